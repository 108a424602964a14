package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/plumbing/uninstall"
)

// cleanupCommand is the first argument that deletes the Leases an uninstalled release leaves (the
// chart's post-delete hook) instead of running the manager.
const cleanupCommand = "cleanup"

// cleanupTimeout bounds the whole cleanup: a Get, a List and a few deletes.
const cleanupTimeout = time.Minute

// parseCleanupFlags parses the cleanup's flags; tests pass their own FlagSet.
func parseCleanupFlags(fs *flag.FlagSet, args []string) (uninstall.Options, error) {
	o := uninstall.Options{}
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (the release's).")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "e1f13584.medik8s.io", "Name of the leader election Lease.")
	fs.StringVar(&o.LeaderPrefix, "leader-holder-prefix", "", "Prefix of the holder identities of the release's managers: their pods' names (<deployment>-).")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", lease.DefaultNamespace, "Namespace of the node Leases.")
	fs.StringVar(&o.Release, "release-identity", "", "Identity of the release (the managers' --release-identity): only the node Leases labelled "+lease.ReleaseLabel+" with it are deleted.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.LeaderElectionNamespace == "" || o.LeaderElectionID == "" || o.LeaderPrefix == "" || o.LeaseNamespace == "" || o.Release == "" {
		return o, fmt.Errorf("cleanup needs --leader-election-namespace, --leader-election-id, --leader-holder-prefix, --lease-namespace and --release-identity")
	}
	if err := lease.ValidRelease(o.Release); err != nil {
		return o, fmt.Errorf("--release-identity: %w", err)
	}
	return o, nil
}

// runCleanup runs `manager cleanup ...`, the chart's post-delete hook, and returns the exit code.
func runCleanup(args []string, out io.Writer) int {
	o, err := parseCleanupFlags(flag.CommandLine, args)
	if err != nil {
		fmt.Fprintln(out, err)
		return 2
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(out, "loading kubeconfig: %v\n", err)
		return 1
	}
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		fmt.Fprintf(out, "creating a client: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := uninstall.Run(ctx, c, o, time.Now(), out); err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	return 0
}

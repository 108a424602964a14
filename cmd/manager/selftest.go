package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medik8s/node-healthcheck/internal/plumbing/selftest"
)

// selfTestCommand is the first argument that runs the self-test instead of the manager.
const selfTestCommand = "self-test"

// selfTestTimeout bounds the whole self-test.
const selfTestTimeout = time.Minute

// parseSelfTestFlags parses the self-test's flags. --kubeconfig is registered on flag.CommandLine by
// controller-runtime's config package; tests pass their own FlagSet.
func parseSelfTestFlags(fs *flag.FlagSet, args []string) (selftest.Options, string, error) {
	o := selftest.Options{}
	var tokenFile string
	fs.StringVar(&o.Name, "name", "node-healthcheck-self-test", "Name of the NodeHealthChecks tried in server-side dry runs (nothing is stored).")
	fs.BoolVar(&o.Webhooks, "webhooks", true, "Check that the admission webhooks default, admit and refuse.")
	fs.StringVar(&o.MetricsURL, "metrics-url", "", "The metrics endpoint to check, for example https://nhc-node-healthcheck-metrics.node-healthcheck.svc:8443/metrics; empty: not checked.")
	fs.StringVar(&tokenFile, "metrics-token-file", selftest.TokenFile, "Bearer token for the metrics endpoint (the pod's ServiceAccount token).")
	fs.BoolVar(&o.MetricsInsecure, "metrics-insecure-skip-verify", true, "Do not verify the metrics endpoint's certificate, which the manager signs itself; the token still authenticates.")
	if err := fs.Parse(args); err != nil {
		return o, "", err
	}
	if fs.NArg() > 0 {
		return o, "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, tokenFile, nil
}

// runSelfTest runs `manager self-test ...`, the chart's helm test hook, and returns the exit code.
func runSelfTest(args []string, out io.Writer) int {
	o, tokenFile, err := parseSelfTestFlags(flag.CommandLine, args)
	if err != nil {
		fmt.Fprintln(out, err)
		return 2
	}
	if o.MetricsURL != "" {
		if o.MetricsToken, err = selftest.ReadToken(tokenFile); err != nil {
			fmt.Fprintln(out, err)
			return 1
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(out, "loading kubeconfig: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), selfTestTimeout)
	defer cancel()
	if err := selftest.Run(ctx, cfg, o, out); err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	fmt.Fprintln(out, "node-healthcheck works")
	return 0
}

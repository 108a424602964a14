package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
// It returns the options and the files to read them from: the token's and the metrics CA's.
func parseSelfTestFlags(fs *flag.FlagSet, args []string) (selftest.Options, selfTestFiles, error) {
	o := selftest.Options{}
	var tokenFile, caFile string
	fs.StringVar(&o.Name, "name", "node-healthcheck-self-test", "Name of the NodeHealthChecks tried in server-side dry runs (nothing is stored).")
	fs.BoolVar(&o.Webhooks, "webhooks", true, "Check that the admission webhooks default, admit and refuse.")
	fs.StringVar(&o.MetricsURL, "metrics-url", "", "The metrics endpoint to check, for example https://nhc-node-healthcheck-metrics.node-healthcheck.svc:8443/metrics; empty: not checked.")
	fs.StringVar(&tokenFile, "metrics-token-file", selftest.TokenFile, "Bearer token for the metrics endpoint (the pod's ServiceAccount token).")
	fs.StringVar(&caFile, "metrics-ca-file", "", "PEM file of the CAs that verify the metrics endpoint's certificate (the chart mounts its webhook certificate's ca.crt); empty: the system's roots.")
	fs.StringVar(&o.MetricsServerName, "metrics-server-name", "", "Name the metrics endpoint's certificate is verified for (the chart: its webhook Service's, which that certificate holds); empty: the URL's host.")
	fs.BoolVar(&o.MetricsInsecure, "metrics-insecure-skip-verify", false, "Do not verify the metrics endpoint's certificate (the manager's self-signed one, without webhooks); the token still authenticates.")
	if err := fs.Parse(args); err != nil {
		return o, selfTestFiles{}, err
	}
	files := selfTestFiles{token: tokenFile, ca: caFile}
	if fs.NArg() > 0 {
		return o, files, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if caFile != "" && o.MetricsInsecure {
		return o, files, errors.New("--metrics-ca-file and --metrics-insecure-skip-verify: verify against the CA, or not at all")
	}
	return o, files, nil
}

// selfTestFiles are the files the self-test's flags name.
type selfTestFiles struct {
	// token is the metrics endpoint's bearer token (--metrics-token-file).
	token string
	// ca holds the CAs of the metrics endpoint's certificate (--metrics-ca-file); empty: none.
	ca string
}

// runSelfTest runs `manager self-test ...`, the chart's helm test hook, and returns the exit code.
func runSelfTest(args []string, out io.Writer) int {
	o, files, err := parseSelfTestFlags(flag.CommandLine, args)
	if err != nil {
		fmt.Fprintln(out, err)
		return 2
	}
	if o.MetricsURL != "" {
		if o.MetricsToken, err = selftest.ReadToken(files.token); err != nil {
			fmt.Fprintln(out, err)
			return 1
		}
		if files.ca != "" {
			if o.MetricsCA, err = os.ReadFile(files.ca); err != nil {
				fmt.Fprintf(out, "reading the metrics CA: %v\n", err)
				return 1
			}
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

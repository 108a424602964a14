package main

import (
	"flag"
	"testing"
)

// The flag names are an interface the chart, the docs and users' scripts depend on.
func TestFlagsKeepTheirNamesAndAreDocumented(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.String("kubeconfig", "", "registered by controller-runtime on flag.CommandLine")
	if _, err := parseFlags(fs, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"kubeconfig", "metrics-bind-address", "health-probe-bind-address", "leader-elect",
		"leader-election-id", "leader-election-namespace", "webhook-port", "webhook-cert-dir",
		"enable-webhooks", "metrics-secure", "enable-http2", "lease-namespace",
	} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s is missing", name)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Usage) < 10 {
			t.Errorf("flag --%s has no real help text: %q", f.Name, f.Usage)
		}
	})
}

func TestFlagDefaults(t *testing.T) {
	o, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.leaderElect || !o.enableWebhooks || !o.metricsSecure || o.enableHTTP2 {
		t.Errorf("secure defaults changed: %+v", o)
	}
	if o.webhookPort != 9443 {
		t.Errorf("webhook port %d, want 9443", o.webhookPort)
	}
}

func TestFlagsRefuseStrayArguments(t *testing.T) {
	if _, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{"--leader-elect=false", "extra"}); err == nil {
		t.Fatal("stray argument accepted")
	}
	if _, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{"--no-such-flag"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
}

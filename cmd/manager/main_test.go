package main

import (
	"flag"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/plumbing/webhookcert"
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
		"upgrade-detect-cluster-api", "upgrade-detect-node-rollout", "upgrade-pause-object", "upgrade-max-pause",
		"webhook-cert-secret", "webhook-service", "webhook-configurations",
		"leader-election-lease-duration", "leader-election-renew-deadline", "leader-election-retry-period",
		"webhook-cert-validity", "webhook-ca-validity", "version", "returning-node-grace", "pprof-bind-address",
		"max-clock-skew", "shutdown-delay",
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
	if o.upgrade != (controller.UpgradeOptions{}) {
		t.Errorf("plain-Kubernetes upgrade detectors must be off by default: %+v", o.upgrade)
	}
	if o.pprofAddr != "0" {
		t.Errorf("pprof must be off by default (it has no authentication), got %q", o.pprofAddr)
	}
	if o.returnGrace != time.Minute {
		t.Errorf("returning-node grace %s, want 1m (the node lifecycle's default grace period and a margin)", o.returnGrace)
	}
	if _, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{"--returning-node-grace=-1s"}); err == nil {
		t.Error("a negative returning-node grace was accepted")
	}
	if o.maxClockSkew != 10*time.Second {
		t.Errorf("max clock skew %s, want 10s", o.maxClockSkew)
	}
}

func TestMaxClockSkewFlag(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		want time.Duration
	}{
		{"--max-clock-skew=0", 0},
		{"--max-clock-skew=1s", time.Second},
		{"--max-clock-skew=2m", 2 * time.Minute},
	} {
		o, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{tt.arg})
		if err != nil {
			t.Errorf("%s: %v", tt.arg, err)
			continue
		}
		if o.maxClockSkew != tt.want {
			t.Errorf("%s: %s, want %s", tt.arg, o.maxClockSkew, tt.want)
		}
	}
	for _, tt := range []struct{ arg, want string }{
		{"--max-clock-skew=-1s", "--max-clock-skew -1s: must not be negative"},
		{"--max-clock-skew=500ms", "--max-clock-skew 500ms: must be 0 (no bound) or at least 1s"},
		{"--max-clock-skew=ten", "max-clock-skew"},
	} {
		_, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{tt.arg})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.arg, err, tt.want)
		}
	}
}

// The public operator reads the lease namespace from LEASE_NAMESPACE; it still works, and the flag
// wins over it.
func TestLeaseNamespaceFromTheEnvironment(t *testing.T) {
	t.Setenv("LEASE_NAMESPACE", "from-env")
	o, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.leaseNamespace != "from-env" {
		t.Errorf("lease namespace %q, want from-env", o.leaseNamespace)
	}
	o, err = parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{"--lease-namespace=from-flag"})
	if err != nil {
		t.Fatal(err)
	}
	if o.leaseNamespace != "from-flag" {
		t.Errorf("lease namespace %q, want from-flag", o.leaseNamespace)
	}
}

// The release identity labels the node leases the operator creates: a label value, or nothing.
func TestReleaseIdentityFlag(t *testing.T) {
	o, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{"--release-identity=nhc.nhc"})
	if err != nil {
		t.Fatal(err)
	}
	if o.release != "nhc.nhc" {
		t.Errorf("release %q, want nhc.nhc", o.release)
	}
	for _, bad := range []string{"--release-identity=ns/release", "--release-identity=" + strings.Repeat("a", 64), "--release-identity=-a"} {
		if _, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{bad}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestUpgradeFlags(t *testing.T) {
	o, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{"--upgrade-detect-cluster-api", "--upgrade-detect-node-rollout",
		"--upgrade-pause-object=upgrades/pause-remediation", "--upgrade-max-pause=6h"})
	if err != nil {
		t.Fatal(err)
	}
	want := controller.UpgradeOptions{ClusterAPI: true, NodeRollout: true, PauseObject: types.NamespacedName{Namespace: "upgrades", Name: "pause-remediation"}, MaxPause: 6 * time.Hour}
	if o.upgrade != want {
		t.Errorf("got %+v, want %+v", o.upgrade, want)
	}
	for _, bad := range []string{"--upgrade-pause-object=pause", "--upgrade-pause-object=/pause", "--upgrade-pause-object=ns/", "--upgrade-pause-object=a/b/c", "--upgrade-max-pause=-1h"} {
		if _, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{bad}); err == nil {
			t.Errorf("%s accepted", bad)
		}
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

func TestSelfManagedCertificateFlags(t *testing.T) {
	o, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{"--webhook-cert-secret=nhc/webhook-cert",
		"--webhook-service=nhc/webhook", "--webhook-configurations=nhc-mutating,nhc-validating"})
	if err != nil {
		t.Fatal(err)
	}
	want := webhookcert.Options{Secret: types.NamespacedName{Namespace: "nhc", Name: "webhook-cert"}, Service: types.NamespacedName{Namespace: "nhc", Name: "webhook"},
		Mutating: "nhc-mutating", Validating: "nhc-validating", CertValidity: webhookcert.DefaultCertValidity, CAValidity: webhookcert.DefaultCAValidity}
	if o.selfManagedCerts == nil || *o.selfManagedCerts != want {
		t.Errorf("got %+v, want %+v", o.selfManagedCerts, want)
	}
	if o, _ := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), nil); o.selfManagedCerts != nil {
		t.Error("self-managed certificates must be off by default")
	}
	for _, bad := range [][]string{
		{"--webhook-cert-secret=nhc/cert"},
		{"--webhook-cert-secret=nhc/cert", "--webhook-service=nhc/svc"},
		{"--webhook-cert-secret=nhc/cert", "--webhook-service=svc", "--webhook-configurations=a,b"},
		{"--webhook-cert-secret=nhc/cert", "--webhook-service=nhc/svc", "--webhook-configurations=a"},
		{"--webhook-cert-secret=cert", "--webhook-service=nhc/svc", "--webhook-configurations=a,b"},
		{"--webhook-cert-secret=nhc/cert", "--webhook-service=nhc/svc", "--webhook-configurations=a,b", "--webhook-cert-validity=30s"},
		{"--webhook-cert-secret=nhc/cert", "--webhook-service=nhc/svc", "--webhook-configurations=a,b", "--webhook-cert-validity=2h", "--webhook-ca-validity=1h"},
	} {
		if _, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestLeaderElectionTimings(t *testing.T) {
	o, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.leaseDuration != 15*time.Second || o.renewDeadline != 10*time.Second || o.retryPeriod != 2*time.Second {
		t.Errorf("defaults %s/%s/%s, want controller-runtime's 15s/10s/2s", o.leaseDuration, o.renewDeadline, o.retryPeriod)
	}
	if _, err := parseFlags(flag.NewFlagSet("manager", flag.ContinueOnError), []string{"--leader-election-lease-duration=10s", "--leader-election-renew-deadline=10s"}); err == nil {
		t.Error("a renew deadline as long as the lease was accepted")
	}
}

func TestSelfTestFlags(t *testing.T) {
	o, files, err := parseSelfTestFlags(flag.NewFlagSet("self-test", flag.ContinueOnError), []string{"--metrics-url=https://m:8443/metrics", "--webhooks=false"})
	if err != nil {
		t.Fatal(err)
	}
	// The metrics endpoint's certificate is verified unless skipping is asked for.
	if o.MetricsURL != "https://m:8443/metrics" || o.Webhooks || o.MetricsInsecure || files.token != "/var/run/secrets/kubernetes.io/serviceaccount/token" || files.ca != "" || o.Name == "" {
		t.Errorf("got %+v, files %+v", o, files)
	}
	o, files, err = parseSelfTestFlags(flag.NewFlagSet("self-test", flag.ContinueOnError), []string{"--metrics-url=https://m:8443/metrics",
		"--metrics-ca-file=/ca/ca.crt", "--metrics-server-name=nhc-node-healthcheck-webhook.nhc.svc"})
	if err != nil || files.ca != "/ca/ca.crt" || o.MetricsServerName != "nhc-node-healthcheck-webhook.nhc.svc" || o.MetricsInsecure {
		t.Errorf("with a CA: got %+v, files %+v, %v", o, files, err)
	}
	if _, _, err := parseSelfTestFlags(flag.NewFlagSet("self-test", flag.ContinueOnError), []string{"--metrics-ca-file=/ca/ca.crt", "--metrics-insecure-skip-verify"}); err == nil {
		t.Error("a CA and skipping verification were both accepted")
	}
	if _, _, err := parseSelfTestFlags(flag.NewFlagSet("self-test", flag.ContinueOnError), []string{"extra"}); err == nil {
		t.Error("an extra argument was accepted")
	}
}

func TestGCDefault(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	unset := func(string) (string, bool) { return "", false }
	if got := applyGCDefault(unset); got != defaultGCPercent {
		t.Errorf("GOGC unset: reported %d, want %d", got, defaultGCPercent)
	}
	if now := debug.SetGCPercent(100); now != defaultGCPercent {
		t.Errorf("GOGC unset: the runtime collects at %d, want %d", now, defaultGCPercent)
	}
	debug.SetGCPercent(200) // as GOGC=200 would have set it at start
	set := func(string) (string, bool) { return "200", true }
	if got := applyGCDefault(set); got != 200 {
		t.Errorf("GOGC=200: reported %d, want 200", got)
	}
	if now := debug.SetGCPercent(100); now != 200 {
		t.Errorf("GOGC=200: the runtime collects at %d, want the environment's 200 untouched", now)
	}
}

func TestCleanupFlags(t *testing.T) {
	o, err := parseCleanupFlags(flag.NewFlagSet("cleanup", flag.ContinueOnError), []string{"--leader-election-namespace=nhc", "--leader-holder-prefix=nhc-node-healthcheck-", "--release-identity=nhc.nhc"})
	if err != nil {
		t.Fatal(err)
	}
	if o.LeaderElectionID != "e1f13584.medik8s.io" || o.LeaseNamespace != "medik8s-leases" || o.LeaderElectionNamespace != "nhc" || o.LeaderPrefix != "nhc-node-healthcheck-" || o.Release != "nhc.nhc" {
		t.Errorf("options %+v", o)
	}
	for _, args := range [][]string{{"--leader-election-namespace=nhc", "--release-identity=r"}, {"--leader-holder-prefix=x-", "--release-identity=r"},
		{"--leader-election-namespace=nhc", "--leader-holder-prefix=x-", "--release-identity=r", "extra"},
		{"--leader-election-namespace=nhc", "--leader-holder-prefix=x-"}, // no release: it would delete no node lease
		{"--leader-election-namespace=nhc", "--leader-holder-prefix=x-", "--release-identity=a/b"}} {
		if _, err := parseCleanupFlags(flag.NewFlagSet("cleanup", flag.ContinueOnError), args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestProfilingDefault(t *testing.T) {
	before := goruntime.MemProfileRate
	t.Cleanup(func() { goruntime.MemProfileRate = before })
	goruntime.MemProfileRate = 512 * 1024
	if got := applyProfilingDefault("localhost:6060"); got != 512*1024 || goruntime.MemProfileRate != 512*1024 {
		t.Errorf("pprof served: rate %d (reported %d), want the runtime's 524288 kept", goruntime.MemProfileRate, got)
	}
	for _, off := range []string{"0", ""} {
		goruntime.MemProfileRate = 512 * 1024
		if got := applyProfilingDefault(off); got != 0 || goruntime.MemProfileRate != 0 {
			t.Errorf("pprof %q: rate %d (reported %d), want 0: nothing reads the samples", off, goruntime.MemProfileRate, got)
		}
	}
}

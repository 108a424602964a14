package chart

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	// What cmd/manager imports (these and the module's own below), so that every init() that
	// registers a metric of the manager ran in this test too (TestTheProbeSeesWhatTheManagerRegisters
	// keeps the list complete).
	_ "github.com/go-logr/logr"
	_ "k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/apimachinery/pkg/types"
	_ "k8s.io/apimachinery/pkg/util/runtime"
	_ "k8s.io/apimachinery/pkg/util/wait"
	_ "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/utils/clock"
	_ "k8s.io/utils/ptr"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/controller-runtime/pkg/healthz"
	_ "sigs.k8s.io/controller-runtime/pkg/log/zap"
	_ "sigs.k8s.io/controller-runtime/pkg/manager"
	_ "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	_ "sigs.k8s.io/controller-runtime/pkg/webhook"

	_ "github.com/medik8s/node-healthcheck/api/v1alpha1"
	_ "github.com/medik8s/node-healthcheck/internal/clockskew"
	_ "github.com/medik8s/node-healthcheck/internal/controller"
	_ "github.com/medik8s/node-healthcheck/internal/health"
	_ "github.com/medik8s/node-healthcheck/internal/lease"
	_ "github.com/medik8s/node-healthcheck/internal/opsettings"
	_ "github.com/medik8s/node-healthcheck/internal/plumbing/metricsauth"
	_ "github.com/medik8s/node-healthcheck/internal/plumbing/selftest"
	_ "github.com/medik8s/node-healthcheck/internal/plumbing/uninstall"
	_ "github.com/medik8s/node-healthcheck/internal/plumbing/webhookcert"
	_ "github.com/medik8s/node-healthcheck/internal/webhook/v1alpha1"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// probe is a collector of one Desc and no metrics: registering it tells whether a metric of the
// name is registered.
type probe struct{ desc *prometheus.Desc }

func (p probe) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }
func (p probe) Collect(chan<- prometheus.Metric)    {}

// registered reports whether the registry that the manager serves (controller-runtime's, filled by
// the init() functions of the packages it imports) holds a metric of the name. The registry
// refuses a second Desc of a registered name with other label names or another help string, and
// this help string is the probe's own; a probe it accepts is unregistered again.
func registered(name string) (bool, error) {
	p := probe{prometheus.NewDesc(name, "test/chart probe of "+name, nil, nil)}
	err := crmetrics.Registry.Register(p)
	switch {
	case err == nil:
		if !crmetrics.Registry.Unregister(p) {
			return false, fmt.Errorf("the probe of %s cannot be unregistered", name)
		}
		return false, nil
	case strings.Contains(err.Error(), "different label names or a different help string"):
		return true, nil
	}
	return false, fmt.Errorf("probing %s: %w", name, err)
}

// prometheusMade are series Prometheus makes itself, from scrapes and rules.
var prometheusMade = []string{"up", "ALERTS", "ALERTS_FOR_STATE"}

// unregistered returns those of the names that are neither registered, nor the _bucket, _sum or
// _count series of a registered name (a histogram's or a summary's: the probe cannot tell the
// type), nor made by Prometheus.
func unregistered(t *testing.T, names []string) []string {
	t.Helper()
	var out []string
	for _, name := range names {
		if slices.Contains(prometheusMade, name) {
			continue
		}
		candidates := []string{name}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				candidates = append(candidates, base)
			}
		}
		found := false
		for _, c := range candidates {
			ok, err := registered(c)
			if err != nil {
				t.Error(err)
			}
			found = found || ok
		}
		if !found {
			out = append(out, name)
		}
	}
	return out
}

// The check reports what is not registered, and only that; probing leaves the registry as it was.
func TestUnregisteredNamesAreReported(t *testing.T) {
	for _, tt := range []struct {
		name     string
		metric   string
		reported bool
	}{
		{"a gauge of the manager", "nodehealthcheck_repair_budget_exhausted", false},
		{"the outcomes counter", "nodehealthcheck_remediation_outcomes_total", false},
		{"the deadline gauge", "nodehealthcheck_remediation_deadline_timestamp_seconds", false},
		{"a histogram's buckets", "nodehealthcheck_time_to_recovery_seconds_bucket", false},
		{"a histogram's count", "nodehealthcheck_time_to_remediation_seconds_count", false},
		{"the upgrade gate (a collector of its own)", "nodehealthcheck_upgrade_gate", false},
		{"the clock skew", "nodehealthcheck_clock_skew_seconds", false},
		{"controller-runtime's reconcile errors", "controller_runtime_reconcile_errors_total", false},
		{"controller-runtime's work queues", "workqueue_depth", false},
		{"controller-runtime's leader election", "leader_election_master_status", false},
		{"the Go collector", "go_goroutines", false},
		{"a scrape metric", "up", false},
		{"a made-up name", "nodehealthcheck_remediations_exhausted_total", true},
		{"a misspelt name", "nodehealthcheck_repair_budget_exhaused", true},
		{"a made-up histogram's buckets", "nodehealthcheck_time_to_repair_seconds_bucket", true},
		{"a counter of the public operator's that this one does not have", "nodehealthcheck_remediation_total", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // the second time sees what the first probe left behind
				if got := unregistered(t, []string{tt.metric}); (len(got) > 0) != tt.reported {
					t.Errorf("%s reported: %v, want %v", tt.metric, len(got) > 0, tt.reported)
				}
			}
		})
	}
}

// The probe sees the metrics the manager serves only if every package cmd/manager imports ran its
// init() here too: every package the manager's sources import outside the standard library is
// imported by this test, and the manager registers nothing itself.
func TestTheProbeSeesWhatTheManagerRegisters(t *testing.T) {
	imports := func(dir string, keep func(file string) bool) (map[string]bool, []string) {
		fset := token.NewFileSet()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		var sources []string
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || !keep(e.Name()) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				out[p] = true
			}
			sources = append(sources, path)
		}
		return out, sources
	}
	manager, sources := imports(testutil.Path("cmd", "manager"), func(f string) bool { return !strings.HasSuffix(f, "_test.go") })
	tests, _ := imports(testutil.Path("test", "chart"), func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	for p := range manager {
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") && !tests[p] {
			t.Errorf("cmd/manager imports %s, which test/chart does not: add it to registered_metrics_test.go's imports, or the metrics its init() registers are not probed", p)
		}
	}
	registers := regexp.MustCompile(`\.(Must)?Register\(`)
	for _, s := range sources {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if registers.Match(b) {
			t.Errorf("%s may register a metric itself, and a main package cannot be imported: register it in the init() of a package the manager imports", s)
		}
	}
}

// Every metric test/rules/testdata/metrics.txt lists is one the manager registers. test/rules parses
// every alert and dashboard query with Prometheus' parser and checks that they select only listed
// metrics (test/rules is a module of its own, with Prometheus' dependencies; the registry is this
// module's): together, a renamed or misspelt metric fails, which would leave an alert that never
// fires and a panel that stays empty.
func TestListedMetricsAreRegistered(t *testing.T) {
	b, err := os.ReadFile(testutil.Path("test", "rules", "testdata", "metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			listed = append(listed, l)
		}
	}
	// Some of the names the alerts use, so that a check that reads nothing does not pass.
	for _, n := range []string{"nodehealthcheck_remediation_outcomes_total", "nodehealthcheck_ongoing_remediation", "leader_election_master_status",
		"nodehealthcheck_certificate_expiration_timestamp_seconds", "controller_runtime_webhook_requests_total"} {
		if !slices.Contains(listed, n) {
			t.Errorf("metrics.txt does not list %s", n)
		}
	}
	for _, n := range unregistered(t, listed) {
		t.Errorf("metrics.txt lists %s, which the manager does not register", n)
	}
}

package chart

import (
	"fmt"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// promqlKeywords are the words of PromQL that are no metric names: operators, modifiers and the
// aggregation operators (which a "by (...)" or "without (...)" may separate from their "(").
var promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}

// labelListKeywords are followed by a parenthesised list of label names.
var labelListKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || ('0' <= c && c <= '9') }

// metricNames returns the metric names a PromQL expression selects, in order of appearance and
// without repeats: the identifiers that are not keywords (aggregation operators included),
// function names (followed by "("), label names (in "{...}" and after by, without, on, ignoring,
// group_left, group_right), numbers or durations, strings, range and subquery brackets, or Grafana
// variables ($name, ${name}). A name given as {__name__="..."} counts too. It fails on unbalanced
// brackets and unterminated strings. It is no parser (the Prometheus one is not in this module's
// graph): it only has to see every name a valid expression selects.
func metricNames(expr string) ([]string, error) {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var open []byte // the unclosed ( and {
	i := 0
	skipSpace := func() {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
	}
	// str reads the string literal at i and returns its value (an escaped character stands for
	// itself: enough for metric names).
	str := func() (string, error) {
		q, start := expr[i], i
		var value strings.Builder
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' && i+1 < len(expr) {
				i++
			}
			value.WriteByte(expr[i])
		}
		if i >= len(expr) {
			return "", fmt.Errorf("unterminated string at %d in %q", start, expr)
		}
		i++
		return value.String(), nil
	}
	ident := func() string {
		start := i
		for i < len(expr) && isIdent(expr[i]) {
			i++
		}
		return expr[start:i]
	}
	for {
		skipSpace()
		if i >= len(expr) {
			break
		}
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := str(); err != nil {
				return nil, err
			}
		case c == '$': // a Grafana variable: $name, ${name}, ${name:format}
			i++
			if i < len(expr) && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unterminated ${ at %d in %q", i, expr)
				}
				i += end + 1
			} else {
				ident()
			}
		case c == '[': // a range or a subquery's range and step: durations and variables only
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unterminated [ at %d in %q", i, expr)
			}
			i += end + 1
		case c == ']':
			return nil, fmt.Errorf("unbalanced ] at %d in %q", i, expr)
		case c == '{': // label matchers: name, operator, string
			open = append(open, '{')
			i++
			for {
				skipSpace()
				if i < len(expr) && expr[i] == '}' {
					break
				}
				label := ident()
				skipSpace()
				opStart := i
				for i < len(expr) && strings.ContainsRune("=!~", rune(expr[i])) {
					i++
				}
				op := expr[opStart:i]
				skipSpace()
				if label == "" || op == "" || i >= len(expr) || !strings.ContainsRune("\"'`", rune(expr[i])) {
					return nil, fmt.Errorf("not a label matcher at %d in %q", i, expr)
				}
				value, err := str()
				if err != nil {
					return nil, err
				}
				if label == "__name__" && op == "=" {
					add(value)
				}
				skipSpace()
				if i < len(expr) && expr[i] == ',' {
					i++
				}
			}
		case c == '(':
			open = append(open, '(')
			i++
		case c == ')' || c == '}':
			want := map[byte]byte{')': '(', '}': '{'}[c]
			if len(open) == 0 || open[len(open)-1] != want {
				return nil, fmt.Errorf("unbalanced %c at %d in %q", c, i, expr)
			}
			open = open[:len(open)-1]
			i++
		case '0' <= c && c <= '9' || c == '.': // a number or a duration (1, 0.5, 1e-3, 0x1f, 5m, 1h30m)
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.' ||
				(strings.ContainsRune("+-", rune(expr[i])) && strings.ContainsRune("eE", rune(expr[i-1])))) {
				i++
			}
		case isIdentStart(c):
			word := ident()
			skipSpace()
			lower := strings.ToLower(word)
			switch {
			case labelListKeywords[lower] && i < len(expr) && expr[i] == '(':
				end := strings.IndexByte(expr[i:], ')')
				if end < 0 {
					return nil, fmt.Errorf("unterminated label list after %s in %q", word, expr)
				}
				i += end + 1
			case promqlKeywords[lower]:
			case i < len(expr) && expr[i] == '(': // a function or an aggregation
			default:
				add(word)
			}
		default: // operators and commas
			i++
		}
	}
	if len(open) > 0 {
		return nil, fmt.Errorf("unclosed %q in %q", open, expr)
	}
	return names, nil
}

func TestMetricNames(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want []string
	}{
		{`max by (name, remediation) (nodehealthcheck_ongoing_remediation) == 1`, []string{"nodehealthcheck_ongoing_remediation"}},
		{`sum(rate(a_total{x="b", c=~"d|e"}[5m])) by (nhc) / on (nhc) group_left (l) b > 0.5`, []string{"a_total", "b"}},
		{`histogram_quantile(0.9, sum by (le) (rate(h_bucket{nhc=~"$nhc"}[$__rate_interval])))`, []string{"h_bucket"}},
		{`(c unless c offset 1h) or increase(c[1h])`, []string{"c"}},
		{`time() - max by (nhc, node) (d{job="$job"}) > 3600`, []string{"d"}},
		{`absent(up{job="a-metrics"} == 1)`, []string{"up"}},
		{`{__name__="by_name", job="j"} * on (job) group_left e`, []string{"by_name", "e"}},
		{`{job="j", __name__="esc\"aped"}`, []string{`esc"aped`}},
		{`sum without (pod) (f) and bool g offset -5m`, []string{"f", "g"}},
		{`label_replace(h, "dst", "$1", "src", "(.*)") + 1e-3 * 0x1f + Inf`, []string{"h"}},
		{`max_over_time(i[1h:5m]) @ start() + j{a='it\'s'} offset ${__range}`, []string{"i", "j"}},
		{`rate(k:recorded:rate5m[5m]) / ignoring(x) l`, []string{"k:recorded:rate5m", "l"}},
		{`vector(0)`, nil},
	} {
		got, err := metricNames(tt.expr)
		if err != nil {
			t.Errorf("%s: %v", tt.expr, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.expr, got, tt.want)
		}
	}
	for _, bad := range []string{`sum(a`, `a)`, `a{b="c}`, `a{b}`, `a[5m`, `sum(a{b="c")}`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("%s: %v, want an error", bad, got)
		}
	}
}

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

// query is a PromQL expression the chart ships and where it is.
type query struct{ where, expr string }

// alertQueries returns the expressions of the rendered PrometheusRule's alerts, by alert name.
func alertQueries(t *testing.T, r rendered) []query {
	t.Helper()
	rules := alertRules(t, r)
	var out []query
	for _, alert := range slices.Sorted(maps.Keys(rules)) {
		out = append(out, query{"alert " + alert, fmt.Sprint(rules[alert]["expr"])})
	}
	return out
}

// grafanaLabelValues is a variable query of Grafana's Prometheus data source that lists a label's
// values on the series of a selector: label_values(<selector>, <label>).
var grafanaLabelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// dashboardQueries returns the queries of the dashboard's panels (rows' panels too) and variables.
func dashboardQueries(t *testing.T, dashboard map[string]any) []query {
	t.Helper()
	var out []query
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			p := p.(map[string]any)
			targets, _ := p["targets"].([]any)
			for _, tg := range targets {
				if expr, ok := tg.(map[string]any)["expr"].(string); ok {
					out = append(out, query{fmt.Sprintf("panel %q", p["title"]), expr})
				}
			}
			if nested, ok := p["panels"].([]any); ok {
				walk(nested)
			}
		}
	}
	panels, _ := dashboard["panels"].([]any)
	walk(panels)
	variables, _, _ := unstructured.NestedSlice(dashboard, "templating", "list")
	for _, v := range variables {
		v := v.(map[string]any)
		if v["type"] != "query" {
			continue
		}
		q, ok := v["query"].(string)
		if m, isMap := v["query"].(map[string]any); isMap {
			q, ok = m["query"].(string)
		}
		if !ok {
			t.Errorf("variable %v has no query", v["name"])
			continue
		}
		if m := grafanaLabelValues.FindStringSubmatch(q); m != nil {
			q = m[1]
		}
		out = append(out, query{fmt.Sprintf("variable %q", v["name"]), q})
	}
	return out
}

// Every metric the alerts and the dashboard use is one the manager registers: a renamed or
// misspelt metric would leave an alert that never fires and a panel that stays empty.
func TestAlertsAndDashboardUseRegisteredMetrics(t *testing.T) {
	r := mustRender(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true},
		"grafanaDashboard": map[string]any{"enabled": true}}})
	for _, tt := range []struct {
		name    string
		queries []query
		// uses are some of the names each set must be seen to use, so that a check that sees
		// nothing does not pass.
		uses []string
	}{
		{"alerts", alertQueries(t, r), []string{"nodehealthcheck_remediation_outcomes_total", "nodehealthcheck_repair_budget_exhausted",
			"nodehealthcheck_remediation_deadline_timestamp_seconds", "nodehealthcheck_ongoing_remediation", "nodehealthcheck_clock_skew_exceeded"}},
		{"dashboard", dashboardQueries(t, dashboardJSON(t, r)), []string{"nodehealthcheck_remediation_outcomes_total",
			"nodehealthcheck_ongoing_remediation", "nodehealthcheck_time_to_remediation_seconds_bucket", "nodehealthcheck_time_to_recovery_seconds_bucket",
			"nodehealthcheck_repair_budget_exhausted", "nodehealthcheck_failure_domain_unhealthy", "nodehealthcheck_condition", "nodehealthcheck_upgrade_gate",
			"nodehealthcheck_remediation_errors_total", "nodehealthcheck_clock_skew_seconds", "nodehealthcheck_remediation_deadline_timestamp_seconds"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var used []string
			for _, q := range tt.queries {
				names, err := metricNames(q.expr)
				if err != nil {
					t.Errorf("%s: %v", q.where, err)
					continue
				}
				if len(names) == 0 {
					t.Errorf("%s uses no metric: %s", q.where, q.expr)
				}
				for _, n := range unregistered(t, names) {
					t.Errorf("%s uses %s, which the manager does not register: %s", q.where, n, q.expr)
				}
				used = append(used, names...)
			}
			for _, n := range tt.uses {
				if !slices.Contains(used, n) {
					t.Errorf("%s: no query is seen to use %s (%d queries)", tt.name, n, len(tt.queries))
				}
			}
		})
	}
}

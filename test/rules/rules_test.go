package rules

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// root is the repository's root.
var root = filepath.Join("..", "..")

// tool returns the path of a binary the Makefile hands over in the environment variable.
func tool(t *testing.T, env, what string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set: run `make test-rules`, which builds %s", env, what)
	}
	return p
}

// rule is one rule of a PrometheusRule's groups.
type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

type group struct {
	Name  string `yaml:"name"`
	Rules []rule `yaml:"rules"`
}

// renderRules renders the chart's PrometheusRule with the default values (the PrometheusRule on)
// and the extra --set arguments, and returns its groups.
func renderRules(t *testing.T, set ...string) []group {
	t.Helper()
	args := []string{"template", "nhc", filepath.Join(root, "charts", "node-healthcheck"), "--namespace", "node-healthcheck",
		"--show-only", "templates/metrics.yaml", "--set", "metrics.prometheusRule.enabled=true"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(tool(t, "HELM", "helm"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(out)))
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Groups []group `yaml:"groups"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("no PrometheusRule rendered: %v", err)
		}
		if doc.Kind == "PrometheusRule" {
			return doc.Spec.Groups
		}
	}
}

func writeRules(t *testing.T, path string, groups []group) {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Prometheus' own rule tests: promtool parses every rule and annotation template, and evaluates
// each alert on series that should fire it and on series that should not (testdata/alerts.yaml).
func TestAlertsWithPromtool(t *testing.T) {
	promtool := tool(t, "PROMTOOL", "promtool")
	groups := renderRules(t)
	dir := t.TempDir()
	writeRules(t, filepath.Join(dir, "full.yaml"), groups)
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "full.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// The unit tests compare labels; the annotations (long texts, checked above) are left out.
	tested := slices.Clone(groups)
	for i := range tested {
		tested[i].Rules = slices.Clone(tested[i].Rules)
		for j := range tested[i].Rules {
			tested[i].Rules[j].Annotations = nil
		}
	}
	writeRules(t, filepath.Join(dir, "rules.yaml"), tested)
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every alert is tested.
	for _, g := range groups {
		for _, r := range g.Rules {
			if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
				t.Errorf("testdata/alerts.yaml does not test %s", r.Alert)
			}
		}
	}
}

// selected returns the metric names an expression selects, parsed by Prometheus' parser, and
// calls agg for each aggregation.
func selected(expr string, agg func(*parser.AggregateExpr)) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			name := n.Name
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			if name != "" && !slices.Contains(names, name) {
				names = append(names, name)
			}
		case *parser.AggregateExpr:
			if agg != nil {
				agg(n)
			}
		}
		return nil
	})
	return names, nil
}

// grafanaVariables are the dashboard's variables outside label values: ranges and intervals.
var grafanaVariables = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)

// grafanaLabelValues is a variable query of Grafana's Prometheus data source that lists a label's
// values on the series of a selector: label_values(<selector>, <label>).
var grafanaLabelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// dashboardQueries returns the dashboard's panel (rows' panels too) and variable queries, by where
// they are, with Grafana's interval variables replaced by a duration so that they parse.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "charts", "node-healthcheck", "dashboards", "node-healthcheck.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func([]json.RawMessage)
	walk = func(panels []json.RawMessage) {
		for _, raw := range panels {
			var p struct {
				Title   string `json:"title"`
				Targets []struct{ Expr string }
				Panels  []json.RawMessage `json:"panels"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			for i, tg := range p.Targets {
				if tg.Expr != "" {
					out[fmt.Sprintf("panel %q query %d", p.Title, i)] = tg.Expr
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		if m := grafanaLabelValues.FindStringSubmatch(q); m != nil {
			q = m[1]
		}
		out[fmt.Sprintf("variable %q", v.Name)] = q
	}
	for k, q := range out {
		out[k] = grafanaVariables.ReplaceAllString(q, "5m")
	}
	return out
}

// listedMetrics returns testdata/metrics.txt: the metrics the manager registers that the alerts
// and the dashboard may use (test/chart checks each is registered).
func listedMetrics(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := strings.TrimSpace(s.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// prometheusMade are series Prometheus makes itself, from scrapes and rules.
var prometheusMade = []string{"up", "ALERTS", "ALERTS_FOR_STATE"}

// known tells whether a selected name is a listed metric, the _bucket, _sum or _count series of
// one, or made by Prometheus.
func known(listed []string, name string) bool {
	if slices.Contains(prometheusMade, name) || slices.Contains(listed, name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(listed, base) {
			return true
		}
	}
	return false
}

// Every alert and dashboard query parses, and selects only metrics the manager registers (listed
// in testdata/metrics.txt): a renamed or misspelt metric would leave an alert that never fires and
// a panel that stays empty. Every aggregation of an alert keeps namespace (the operator's), so
// that releases in several namespaces alert apart.
func TestQueriesParseAndUseRegisteredMetrics(t *testing.T) {
	listed := listedMetrics(t)
	queries := map[string]string{}
	for _, g := range renderRules(t) {
		for _, r := range g.Rules {
			queries["alert "+r.Alert] = r.Expr
		}
	}
	alerts := len(queries)
	dashboard := dashboardQueries(t)
	for k, q := range dashboard {
		queries[k] = q
	}
	if alerts < 10 || len(dashboard) < 10 {
		t.Fatalf("%d alert and %d dashboard queries: too few, the test would see nothing", alerts, len(dashboard))
	}
	used := map[string]bool{}
	for where, q := range queries {
		names, err := selected(q, func(a *parser.AggregateExpr) {
			if strings.HasPrefix(where, "alert ") && !a.Without && !slices.Contains(a.Grouping, "namespace") {
				t.Errorf("%s: %s drops namespace: %s", where, a.Op, a.String())
			}
		})
		if err != nil {
			t.Errorf("%s does not parse: %v\n%s", where, err, q)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s uses no metric: %s", where, q)
		}
		for _, n := range names {
			used[n] = true
			if !known(listed, n) {
				t.Errorf("%s uses %s, which testdata/metrics.txt does not list (the manager must register it): %s", where, n, q)
			}
		}
	}
	for _, n := range listed {
		if !used[n] && !used[n+"_bucket"] && !used[n+"_count"] && !used[n+"_sum"] {
			t.Errorf("testdata/metrics.txt lists %s, which no alert or dashboard query uses", n)
		}
	}
}

// The parser-based check sees what it must: names in selectors, {__name__=...}, through functions,
// aggregations, subqueries and binary operators; and it refuses what does not parse.
func TestSelected(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want []string
	}{
		{`max by (name, remediation) (nodehealthcheck_ongoing_remediation) == 1`, []string{"nodehealthcheck_ongoing_remediation"}},
		{`sum(rate(a_total{x="b", c=~"d|e"}[5m])) by (nhc) / on (nhc) group_left (l) b > 0.5`, []string{"a_total", "b"}},
		{`{__name__="by_name", job="j"} * on (job) group_left e`, []string{"by_name", "e"}},
		{`max_over_time(i[1h:5m]) + j offset 5m`, []string{"i", "j"}},
		{`vector(0)`, nil},
	} {
		got, err := selected(tt.expr, nil)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v %v, want %v", tt.expr, got, err, tt.want)
		}
	}
	for _, bad := range []string{`sum(a`, `a)`, `a{b="c}`, `a[5m`} {
		if got, err := selected(bad, nil); err == nil {
			t.Errorf("%s: %v, want an error", bad, got)
		}
	}
}

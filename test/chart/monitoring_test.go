package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// alertRules returns the rendered PrometheusRule's rules by alert name.
func alertRules(t *testing.T, r rendered) map[string]map[string]any {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(toObject(t, r.get("PrometheusRule", "nhc-node-healthcheck")), "spec", "groups")
	out := map[string]map[string]any{}
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, rule := range rules {
			rule := rule.(map[string]any)
			out[fmt.Sprint(rule["alert"])] = rule
		}
	}
	return out
}

// dashboardJSON returns the dashboard of the rendered ConfigMap.
func dashboardJSON(t *testing.T, r rendered) map[string]any {
	t.Helper()
	data, _, _ := unstructured.NestedStringMap(toObject(t, r.get("ConfigMap", "nhc-node-healthcheck-dashboard")), "data")
	var dashboard map[string]any
	if err := json.Unmarshal([]byte(data["node-healthcheck.json"]), &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	return dashboard
}

func toObject(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	if u == nil {
		t.Fatal("object missing")
	}
	return u.Object
}

// The alerts of issue 28.5 and their thresholds (values with defaults): escalation exhausted
// fires for a window after each count, counting a series' first count too; the repair budget one
// after it held a node for a while; past-deadline once a remediation runs that far past its steps.
func TestOutcomeAlerts(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values map[string]any
		// want is, per alert, its expression's parts and its for: ("" for none).
		want map[string][2]string
	}{
		{"defaults", nil, map[string][2]string{
			"NodeHealthCheckEscalationExhausted": {
				`(nodehealthcheck_remediation_outcomes_total{outcome="StepsExhausted"} unless nodehealthcheck_remediation_outcomes_total{outcome="StepsExhausted"} offset 1h)` +
					`|or increase(nodehealthcheck_remediation_outcomes_total{outcome="StepsExhausted"}[1h])|sum by (nhc) (|) > 0`, ""},
			"NodeHealthCheckRepairBudgetExhausted":   {"max by (nhc, node) (nodehealthcheck_repair_budget_exhausted) == 1", "15m"},
			"NodeHealthCheckRemediationPastDeadline": {"time() - max by (nhc, node) (nodehealthcheck_remediation_deadline_timestamp_seconds) > 3600", ""},
		}},
		{"set", map[string]any{"escalationExhaustedWindow": "1d", "repairBudgetExhaustedFor": "1h", "remediationPastDeadline": "1h30m"}, map[string][2]string{
			"NodeHealthCheckEscalationExhausted":     {`offset 1d)|[1d])`, ""},
			"NodeHealthCheckRepairBudgetExhausted":   {"nodehealthcheck_repair_budget_exhausted", "1h"},
			"NodeHealthCheckRemediationPastDeadline": {"(nodehealthcheck_remediation_deadline_timestamp_seconds) > 5400", ""},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rule := map[string]any{"enabled": true}
			for k, v := range tt.values {
				rule[k] = v
			}
			rules := alertRules(t, mustRender(t, map[string]any{"metrics": map[string]any{"prometheusRule": rule}}))
			for alert, want := range tt.want {
				r, ok := rules[alert]
				if !ok {
					t.Errorf("no alert %s", alert)
					continue
				}
				expr := fmt.Sprint(r["expr"])
				for _, part := range strings.Split(want[0], "|") {
					if !strings.Contains(strings.Join(strings.Fields(expr), " "), part) {
						t.Errorf("%s: expression lacks %q:\n%s", alert, part, expr)
					}
				}
				if got, _ := r["for"].(string); got != want[1] {
					t.Errorf("%s: for %q, want %q", alert, got, want[1])
				}
				if labels, _ := r["labels"].(map[string]any); labels["severity"] != "warning" {
					t.Errorf("%s: labels %v, want severity warning", alert, labels)
				}
				annotations, _ := r["annotations"].(map[string]any)
				summary, _ := annotations["summary"].(string)
				description, _ := annotations["description"].(string)
				if !strings.Contains(summary, "{{ $labels.nhc }}") || description == "" {
					t.Errorf("%s: the summary must name the NodeHealthCheck and a description say what to do: %v", alert, annotations)
				}
				if strings.Contains(expr, "node)") && !strings.Contains(summary, "{{ $labels.node }}") {
					t.Errorf("%s: the summary must name the node: %q", alert, summary)
				}
			}
		})
	}
}

// The Grafana dashboard: off by default; on, a ConfigMap labelled for the Grafana sidecar
// (grafana_dashboard: "1", kube-prometheus-stack's default) holding the chart's JSON, in the
// release namespace or the one set, with the labels and annotations set.
func TestGrafanaDashboardConfigMap(t *testing.T) {
	if cm := mustRender(t, nil).get("ConfigMap", "nhc-node-healthcheck-dashboard"); cm != nil {
		t.Error("the dashboard is off by default")
	}
	r := mustRender(t, map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"enabled": true}}})
	cm := r.get("ConfigMap", "nhc-node-healthcheck-dashboard")
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	if cm.GetNamespace() != namespace {
		t.Errorf("namespace %q, want the release's", cm.GetNamespace())
	}
	if l := cm.GetLabels(); l["grafana_dashboard"] != "1" || l["app.kubernetes.io/instance"] != releaseName {
		t.Errorf("labels %v, want grafana_dashboard: \"1\" and the chart's", l)
	}
	file, err := os.ReadFile(chartDir() + "/dashboards/node-healthcheck.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(file, &want); err != nil {
		t.Fatalf("dashboards/node-healthcheck.json: %v", err)
	}
	if got := dashboardJSON(t, r); !reflect.DeepEqual(got, want) {
		t.Error("the ConfigMap does not hold dashboards/node-healthcheck.json")
	}

	custom := mustRender(t, map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"enabled": true, "namespace": "monitoring",
		"labels": map[string]any{"grafana_dashboard": nil, "dashboards": "medik8s"}, "annotations": map[string]any{"grafana_folder": "Medik8s"}}}})
	cm = custom.get("ConfigMap", "nhc-node-healthcheck-dashboard")
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	if cm.GetNamespace() != "monitoring" {
		t.Errorf("namespace %q, want monitoring", cm.GetNamespace())
	}
	if l := cm.GetLabels(); l["dashboards"] != "medik8s" || l["grafana_dashboard"] != "" {
		t.Errorf("labels %v: want dashboards: medik8s, and grafana_dashboard dropped (set to null)", l)
	}
	if a := cm.GetAnnotations(); a["grafana_folder"] != "Medik8s" {
		t.Errorf("annotations %v", a)
	}
}

// The dashboard works on any Grafana: every query reads the data source variable (no data source
// uid of the author's Grafana), every panel has a query and a place of its own on the grid.
func TestGrafanaDashboardIsPortable(t *testing.T) {
	dashboard := dashboardJSON(t, mustRender(t, map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"enabled": true}}}))
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "datasource" && !strings.HasPrefix(path, "templating") {
					if ds, _ := x.(map[string]any); ds["uid"] != "${datasource}" || ds["type"] != "prometheus" {
						t.Errorf("%s.datasource is %v, want the ${datasource} variable", path, x)
					}
				}
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		}
	}
	walk("", dashboard)
	variables, _, _ := unstructured.NestedSlice(dashboard, "templating", "list")
	var hasDatasource bool
	for _, v := range variables {
		v := v.(map[string]any)
		if v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus" {
			hasDatasource = true
		} else if ds, _ := v["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
			t.Errorf("variable %v reads %v, want the ${datasource} variable", v["name"], v["datasource"])
		}
	}
	if !hasDatasource {
		t.Error("no datasource variable of type prometheus")
	}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	ids := map[float64]bool{}
	panels, _ := dashboard["panels"].([]any)
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range panels {
		p := p.(map[string]any)
		title := fmt.Sprint(p["title"])
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel %q: id %v repeats", title, id)
		}
		ids[id] = true
		if p["type"] != "row" {
			if targets, _ := p["targets"].([]any); len(targets) == 0 {
				t.Errorf("panel %q has no query", title)
			}
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("panel %q has no description", title)
			}
		}
		g, _ := p["gridPos"].(map[string]any)
		x, y, w, h := int(g["x"].(float64)), int(g["y"].(float64)), int(g["w"].(float64)), int(g["h"].(float64))
		if x+w > 24 {
			t.Errorf("panel %q is wider than the grid", title)
		}
		overlaps := map[string]bool{}
		for i := x; i < x+w; i++ {
			for j := y; j < y+h; j++ {
				if other, ok := taken[cell{i, j}]; ok && !overlaps[other] {
					overlaps[other] = true
					t.Errorf("panels %q and %q overlap", other, title)
				}
				taken[cell{i, j}] = title
			}
		}
	}
}

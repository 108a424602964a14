package chart

import (
	"fmt"
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

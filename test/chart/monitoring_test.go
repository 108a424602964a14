package chart

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/medik8s/node-healthcheck/internal/testutil"
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
					`|or increase(nodehealthcheck_remediation_outcomes_total{outcome="StepsExhausted"}[1h])|sum by (namespace, nhc) (|) > 0`, ""},
			"NodeHealthCheckRepairBudgetExhausted":   {"max by (namespace, nhc, node) (nodehealthcheck_repair_budget_exhausted) == 1", "15m"},
			"NodeHealthCheckRemediationPastDeadline": {"time() - max by (namespace, nhc, node) (nodehealthcheck_remediation_deadline_timestamp_seconds) > 3600", ""},
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

// openShiftAPI are API versions an OpenShift cluster serves, with the Prometheus operator's kinds
// (its user-workload monitoring).
var openShiftAPI = []string{"security.openshift.io/v1", "config.openshift.io/v1", "route.openshift.io/v1",
	"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PodMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

// refusedByOpenShift are the fields of a ServiceMonitor's or PodMonitor's endpoint that OpenShift's
// user-workload monitoring refuses (its Prometheus operator runs with arbitrary file-system access
// denied: the object would read files of the Prometheus pod) or that the Prometheus operator has
// deprecated in favour of authorization.
var refusedByOpenShift = []string{"bearerTokenFile", "bearerTokenSecret", "caFile", "certFile", "keyFile", "credentialsFile", "passwordFile"}

// The ServiceMonitor and the PodMonitor, rendered for OpenShift, scrape with a token from a Secret
// and verify the endpoint against the webhook certificate's CA: no field OpenShift refuses, no
// insecureSkipVerify; the token Secret is a ServiceAccount token of a ServiceAccount bound to the
// metrics-reader ClusterRole; interval, scrape timeout and relabelings are passed on.
func TestScrapeObjectsAreAcceptedEverywhere(t *testing.T) {
	relabel := []any{map[string]any{"targetLabel": "cluster", "replacement": "east"}}
	dropGo := []any{map[string]any{"sourceLabels": []any{"__name__"}, "regex": "go_.*", "action": "drop"}}
	for _, tt := range []struct {
		name, kind, endpoints string
		values                map[string]any
		certManager           bool
	}{
		{"ServiceMonitor, self-managed certificate", "ServiceMonitor", "endpoints", nil, false},
		{"ServiceMonitor, cert-manager", "ServiceMonitor", "endpoints", nil, true},
		{"PodMonitor", "PodMonitor", "podMetricsEndpoints", map[string]any{"enabled": true}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := slices.Clone(openShiftAPI)
			if tt.certManager {
				api = append(api, certManagerAPI...)
			}
			r := mustRender(t, map[string]any{"metrics": map[string]any{
				"serviceMonitor": map[string]any{"scrapeTimeout": "20s", "relabelings": relabel, "metricRelabelings": dropGo},
				"podMonitor":     tt.values}}, api...)
			other := map[string]string{"ServiceMonitor": "PodMonitor", "PodMonitor": "ServiceMonitor"}[tt.kind]
			if r.get(other, "nhc-node-healthcheck") != nil {
				t.Errorf("both a %s and a %s: Prometheus would scrape the operator twice", tt.kind, other)
			}
			obj := toObject(t, r.get(tt.kind, "nhc-node-healthcheck"))
			var walk func(path string, v any)
			walk = func(path string, v any) {
				switch v := v.(type) {
				case map[string]any:
					for k, x := range v {
						if slices.Contains(refusedByOpenShift, k) {
							t.Errorf("%s.%s: OpenShift refuses it", path, k)
						}
						if k == "insecureSkipVerify" && x == true {
							t.Errorf("%s.%s: the endpoint must be verified", path, k)
						}
						walk(path+"."+k, x)
					}
				case []any:
					for i, x := range v {
						walk(fmt.Sprintf("%s[%d]", path, i), x)
					}
				}
			}
			walk(tt.kind, obj)
			endpoints, _, _ := unstructured.NestedSlice(obj, "spec", tt.endpoints)
			if len(endpoints) != 1 {
				t.Fatalf("%d endpoints, want 1", len(endpoints))
			}
			ep := endpoints[0].(map[string]any)
			if ep["scheme"] != "https" || ep["port"] != "metrics" || ep["interval"] != "30s" || ep["scrapeTimeout"] != "20s" {
				t.Errorf("endpoint %v: want https on port metrics every 30s, timeout 20s", ep)
			}
			if got := ep["metricRelabelings"]; !reflect.DeepEqual(got, dropGo) {
				t.Errorf("metricRelabelings %v, want %v", got, dropGo)
			}
			relabelings, _ := ep["relabelings"].([]any)
			if tt.kind == "PodMonitor" {
				// The job the alerts and the dashboard select, then the user's.
				want := append([]any{map[string]any{"targetLabel": "job", "replacement": "nhc-node-healthcheck-metrics"}}, relabel...)
				if !reflect.DeepEqual(relabelings, want) {
					t.Errorf("relabelings %v, want %v", relabelings, want)
				}
			} else if !reflect.DeepEqual(relabelings, relabel) {
				t.Errorf("relabelings %v, want %v", relabelings, relabel)
			}

			auth, _ := ep["authorization"].(map[string]any)
			cred, _ := auth["credentials"].(map[string]any)
			if auth["type"] != "Bearer" || cred["key"] != "token" {
				t.Fatalf("authorization %v: want a Bearer token from a Secret's key token", auth)
			}
			secret := r.get("Secret", fmt.Sprint(cred["name"]))
			if secret == nil {
				t.Fatalf("no Secret %v", cred["name"])
			}
			sa := secret.GetAnnotations()["kubernetes.io/service-account.name"]
			if typ, _, _ := unstructured.NestedString(secret.Object, "type"); typ != "kubernetes.io/service-account-token" || sa == "" {
				t.Errorf("Secret %s: type %q, ServiceAccount %q; want a ServiceAccount token", secret.GetName(), typ, sa)
			}
			if r.get("ServiceAccount", sa) == nil {
				t.Errorf("no ServiceAccount %s", sa)
			}
			if !boundTo(t, r, sa, "nhc-node-healthcheck-metrics-reader") {
				t.Errorf("ServiceAccount %s is not bound to the metrics-reader ClusterRole", sa)
			}

			tls, _ := ep["tlsConfig"].(map[string]any)
			ca, _, _ := unstructured.NestedStringMap(tls, "ca", "secret")
			if ca["name"] != "nhc-node-healthcheck-webhook-cert" || ca["key"] != "ca.crt" || tls["serverName"] != "nhc-node-healthcheck-webhook.node-healthcheck.svc" {
				t.Errorf("tlsConfig %v: want the webhook certificate's CA and the name it holds", tls)
			}
			source := certificateSource(t, r)
			if want := map[bool]string{true: "cert-manager", false: "self-managed"}[tt.certManager]; source != want {
				t.Errorf("certificate from %s, want %s", source, want)
			}
			if tt.certManager {
				// cert-manager writes the certificate's Secret, ca.crt included.
				if name, _, _ := unstructured.NestedString(toObject(t, r.get("Certificate", "nhc-node-healthcheck-webhook")), "spec", "secretName"); name != ca["name"] {
					t.Errorf("the Certificate writes %q, the scrape reads the CA from %q", name, ca["name"])
				}
			}
		})
	}
}

// boundTo tells whether a ClusterRoleBinding of the render binds the ServiceAccount of the
// release namespace to the ClusterRole.
func boundTo(t *testing.T, r rendered, sa, clusterRole string) bool {
	t.Helper()
	for i := range r {
		if r[i].GetKind() != "ClusterRoleBinding" {
			continue
		}
		if name, _, _ := unstructured.NestedString(r[i].Object, "roleRef", "name"); name != clusterRole {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(r[i].Object, "subjects")
		for _, s := range subjects {
			s := s.(map[string]any)
			if s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == namespace {
				return true
			}
		}
	}
	return false
}

// Set to an existing token Secret, the scrape reads it and the chart makes no ServiceAccount nor
// token of its own; a tlsConfig set replaces the chart's; both monitors forced at once are refused.
func TestScrapeAuthorizationAndTLSValues(t *testing.T) {
	r := mustRender(t, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true,
		"authorization": map[string]any{"secret": map[string]any{"name": "prometheus-token", "key": "t"}},
		"tlsConfig":     map[string]any{"ca": map[string]any{"configMap": map[string]any{"name": "ca", "key": "ca.crt"}}, "serverName": "metrics.example"}}}})
	sm := toObject(t, r.get("ServiceMonitor", "nhc-node-healthcheck"))
	endpoints, _, _ := unstructured.NestedSlice(sm, "spec", "endpoints")
	ep := endpoints[0].(map[string]any)
	if cred, _, _ := unstructured.NestedStringMap(ep, "authorization", "credentials"); cred["name"] != "prometheus-token" || cred["key"] != "t" {
		t.Errorf("credentials %v, want the Secret set", cred)
	}
	if tls, _ := ep["tlsConfig"].(map[string]any); tls["serverName"] != "metrics.example" || tls["ca"] == nil || len(tls) != 2 {
		t.Errorf("tlsConfig %v, want the one set", tls)
	}
	for _, k := range r.kinds() {
		if strings.Contains(k, "metrics-scraper") {
			t.Errorf("%s made, though the token Secret is given", k)
		}
	}

	// Without webhooks there is no CA to verify against.
	r = mustRender(t, map[string]any{"webhooks": map[string]any{"enabled": false}, "metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
	endpoints, _, _ = unstructured.NestedSlice(toObject(t, r.get("ServiceMonitor", "nhc-node-healthcheck")), "spec", "endpoints")
	if tls, _ := endpoints[0].(map[string]any)["tlsConfig"].(map[string]any); tls["insecureSkipVerify"] != true || tls["ca"] != nil {
		t.Errorf("tlsConfig %v without webhooks, want insecureSkipVerify", tls)
	}

	// Plain HTTP metrics: no token, no TLS, nothing to scrape with.
	r = mustRender(t, map[string]any{"metrics": map[string]any{"secure": false, "serviceMonitor": map[string]any{"enabled": true}}})
	endpoints, _, _ = unstructured.NestedSlice(toObject(t, r.get("ServiceMonitor", "nhc-node-healthcheck")), "spec", "endpoints")
	if ep := endpoints[0].(map[string]any); ep["authorization"] != nil || ep["tlsConfig"] != nil || ep["scheme"] != nil {
		t.Errorf("endpoint %v of plain HTTP metrics", ep)
	}
	if r.get("Secret", "nhc-node-healthcheck-metrics-scraper-token") != nil {
		t.Error("a scrape token for plain HTTP metrics")
	}

	if _, err := render(t, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "podMonitor": map[string]any{"enabled": true}}}); err == nil ||
		!strings.Contains(err.Error(), "scrape the operator twice") {
		t.Errorf("both monitors forced: %v, want a refusal", err)
	}
}

// allAlerts are the alerts of the PrometheusRule, webhooks on.
var allAlerts = []string{"NodeHealthCheckRemediationTooLong", "NodeHealthCheckDisabled", "NodeHealthCheckStormActive", "NodeHealthCheckRemediationPausedForLong",
	"NodeHealthCheckClockSkew", "NodeHealthCheckEscalationExhausted", "NodeHealthCheckRepairBudgetExhausted", "NodeHealthCheckRemediationPastDeadline",
	"NodeHealthCheckUndecodable", "NodeHealthCheckRemediationErrors", "NodeHealthCheckNoLeader", "NodeHealthCheckWebhookErrors",
	"NodeHealthCheckCertificateExpiresSoon", "NodeHealthCheckOperatorDown"}

// Every alert says what happened (summary), what to do (description) and where its runbook is
// (runbook_url: <runbookBaseURL>/<alert>.md, a file of docs/runbooks); it carries its severity and
// the extra rule labels, which cannot change the severity; an alert can be left out by name; the
// webhook alerts need webhooks.
func TestEveryAlertHasARunbookAndTheRuleLabels(t *testing.T) {
	base := "https://example.com/runbooks/"
	r := mustRender(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true, "runbookBaseURL": base,
		"ruleLabels": map[string]any{"team": "platform", "severity": "none"}}}})
	rules := alertRules(t, r)
	if got := slices.Sorted(maps.Keys(rules)); !slices.Equal(got, slices.Sorted(slices.Values(allAlerts))) {
		t.Errorf("alerts %v, want %v", got, allAlerts)
	}
	for alert, rule := range rules {
		annotations, _ := rule["annotations"].(map[string]any)
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if s, _ := annotations[a].(string); strings.TrimSpace(s) == "" {
				t.Errorf("%s has no %s", alert, a)
			}
		}
		if got, want := annotations["runbook_url"], "https://example.com/runbooks/"+alert+".md"; got != want {
			t.Errorf("%s: runbook_url %v, want %s", alert, got, want)
		}
		if _, err := os.Stat(testutil.Path("docs", "runbooks", alert+".md")); err != nil {
			t.Errorf("%s: no runbook: %v", alert, err)
		}
		labels, _ := rule["labels"].(map[string]any)
		if labels["team"] != "platform" || (labels["severity"] != "warning" && labels["severity"] != "critical") {
			t.Errorf("%s: labels %v, want team platform and its own severity", alert, labels)
		}
	}
	entries, err := os.ReadDir(testutil.Path("docs", "runbooks"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if alert, _ := strings.CutSuffix(e.Name(), ".md"); !slices.Contains(allAlerts, alert) {
			t.Errorf("docs/runbooks/%s is the runbook of no alert", e.Name())
		}
	}

	disabled := alertRules(t, mustRender(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true,
		"disabledAlerts": []any{"NodeHealthCheckStormActive", "NodeHealthCheckOperatorDown"}}}}))
	if len(disabled) != len(allAlerts)-2 || disabled["NodeHealthCheckStormActive"] != nil || disabled["NodeHealthCheckOperatorDown"] != nil {
		t.Errorf("with two alerts disabled: %v", slices.Sorted(maps.Keys(disabled)))
	}
	noWebhooks := alertRules(t, mustRender(t, map[string]any{"webhooks": map[string]any{"enabled": false},
		"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}))
	if len(noWebhooks) != len(allAlerts)-2 || noWebhooks["NodeHealthCheckWebhookErrors"] != nil || noWebhooks["NodeHealthCheckCertificateExpiresSoon"] != nil {
		t.Errorf("without webhooks: %v", slices.Sorted(maps.Keys(noWebhooks)))
	}
	if _, err := render(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true,
		"disabledAlerts": []any{"NodeHealthCheckTypo"}}}}); err == nil {
		t.Error("an unknown alert in disabledAlerts is accepted")
	}
}

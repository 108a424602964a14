package chart

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/medik8s/node-healthcheck/internal/lease"
)

func TestRBACIsLeastPrivilege(t *testing.T) {
	for name, r := range map[string]rendered{
		"defaults":             mustRender(t, nil),
		"cert-manager":         mustRender(t, nil, certManagerAPI...),
		"openshift":            mustRender(t, nil, "config.openshift.io/v1"),
		"self-managed webhook": mustRender(t, map[string]any{"certManager": map[string]any{"enabled": false}}, certManagerAPI...),
	} {
		for _, u := range r {
			if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
				continue
			}
			role := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil {
				t.Fatal(err)
			}
			for _, rule := range role.Rules {
				for _, list := range [][]string{rule.Verbs, rule.Resources, rule.APIGroups, rule.NonResourceURLs} {
					if slices.Contains(list, "*") {
						t.Errorf("%s: %s %s has a wildcard: %+v", name, u.GetKind(), u.GetName(), rule)
					}
				}
				if slices.Contains(rule.Resources, "namespaces") {
					t.Errorf("%s: %s %s grants namespaces (the chart creates the lease namespace): %+v", name, u.GetKind(), u.GetName(), rule)
				}
				if slices.ContainsFunc(rule.Resources, func(r string) bool { return strings.HasPrefix(r, "clusterrole") || strings.HasPrefix(r, "role") }) {
					t.Errorf("%s: %s %s manages RBAC: %+v", name, u.GetKind(), u.GetName(), rule)
				}
				if slices.ContainsFunc(rule.Resources, func(r string) bool {
					return r == "secrets" || r == "mutatingwebhookconfigurations" || r == "validatingwebhookconfigurations"
				}) && len(rule.ResourceNames) == 0 {
					t.Errorf("%s: %s %s grants Secrets or webhook configurations beyond the release's own (no resourceNames): %+v", name, u.GetKind(), u.GetName(), rule)
				}
				if u.GetKind() == "ClusterRole" && slices.ContainsFunc(rule.Resources, func(r string) bool {
					return r == "leases" || r == "configmaps" || r == "pods" || r == "poddisruptionbudgets" || r == "secrets"
				}) {
					t.Errorf("%s: namespaced resources must be granted by Roles in their namespaces, not cluster-wide: %+v", name, rule)
				}
			}
		}
	}
	plain, openshift := mustRender(t, nil), mustRender(t, nil, "config.openshift.io/v1")
	if plain.get("Role", "nhc-node-healthcheck-etcd-guard") != nil {
		t.Error("the etcd guard Role belongs on OpenShift only (openshift-etcd does not exist elsewhere)")
	}
	guard := openshift.get("Role", "nhc-node-healthcheck-etcd-guard")
	if guard == nil || guard.GetNamespace() != "openshift-etcd" {
		t.Fatalf("etcd guard Role: %v", guard)
	}
	leases := plain.get("Role", "nhc-node-healthcheck-node-leases")
	if leases.GetNamespace() != "medik8s-leases" {
		t.Errorf("node lease Role in %q", leases.GetNamespace())
	}
	agg := plain.get("ClusterRole", "nhc-node-healthcheck-ext-remediation")
	if !strings.Contains(toYAML(t, agg), "rbac.ext-remediation/aggregate-to-ext-remediation: \"true\"") {
		t.Errorf("aggregation selector missing: %s", toYAML(t, agg))
	}
}

func TestWebhookWiring(t *testing.T) {
	r := mustRender(t, nil, certManagerAPI...)
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		var cfg = r.get(kind, map[string]string{"MutatingWebhookConfiguration": "nhc-node-healthcheck-mutating", "ValidatingWebhookConfiguration": "nhc-node-healthcheck-validating"}[kind])
		if cfg == nil {
			t.Fatalf("%s missing", kind)
		}
		if cfg.GetAnnotations()["cert-manager.io/inject-ca-from"] != "node-healthcheck/nhc-node-healthcheck-webhook-ca" {
			t.Errorf("%s: CA injection annotation %v", kind, cfg.GetAnnotations())
		}
		y := toYAML(t, cfg)
		for _, want := range []string{"failurePolicy: Fail", "timeoutSeconds: 5", "name: nhc-node-healthcheck-webhook", "namespace: node-healthcheck", "- nodehealthchecks"} {
			if !strings.Contains(y, want) {
				t.Errorf("%s lacks %q:\n%s", kind, want, y)
			}
		}
		if strings.Count(y, "resources:") != 1 {
			t.Errorf("%s must be scoped to NodeHealthChecks only:\n%s", kind, y)
		}
	}
	cert := toYAML(t, r.get("Certificate", "nhc-node-healthcheck-webhook"))
	if !strings.Contains(cert, "nhc-node-healthcheck-webhook.node-healthcheck.svc") || !strings.Contains(cert, "secretName: nhc-node-healthcheck-webhook-cert") {
		t.Errorf("certificate:\n%s", cert)
	}
}

func TestOptionSets(t *testing.T) {
	t.Run("existing issuer", func(t *testing.T) {
		r := mustRender(t, map[string]any{"certManager": map[string]any{"issuerRef": map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}}}, certManagerAPI...)
		if r.get("Issuer", "nhc-node-healthcheck-selfsigned") != nil || r.get("Issuer", "nhc-node-healthcheck-webhook-ca") != nil ||
			r.get("Certificate", "nhc-node-healthcheck-webhook-ca") != nil || !strings.Contains(toYAML(t, r.get("Certificate", "nhc-node-healthcheck-webhook")), "name: corp-ca") {
			t.Error("an existing issuer replaces the self-signed one")
		}
	})
	t.Run("self-managed certificates", func(t *testing.T) {
		r := mustRender(t, map[string]any{"certManager": map[string]any{"enabled": false}})
		if r.get("Certificate", "nhc-node-healthcheck-webhook") != nil || r.get("Issuer", "nhc-node-healthcheck-selfsigned") != nil ||
			r.get("Certificate", "nhc-node-healthcheck-webhook-ca") != nil || r.get("Issuer", "nhc-node-healthcheck-webhook-ca") != nil {
			t.Error("no cert-manager objects without cert-manager")
		}
		if r.get("Secret", "nhc-node-healthcheck-webhook-cert") == nil {
			t.Error("the operator fills a Secret the chart creates")
		}
		for _, name := range []string{"nhc-node-healthcheck-mutating", "nhc-node-healthcheck-validating"} {
			for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				if cfg := r.get(kind, name); cfg != nil && cfg.GetAnnotations()["cert-manager.io/inject-ca-from"] != "" {
					t.Errorf("%s %s: cert-manager annotation without cert-manager", kind, name)
				}
			}
		}
		d := toYAML(t, r.get("Deployment", "nhc-node-healthcheck"))
		for _, want := range []string{"--webhook-cert-secret=node-healthcheck/nhc-node-healthcheck-webhook-cert", "--webhook-service=node-healthcheck/nhc-node-healthcheck-webhook",
			"--webhook-configurations=nhc-node-healthcheck-mutating,nhc-node-healthcheck-validating", "secretName: nhc-node-healthcheck-webhook-cert",
			"--webhook-cert-validity=8760h", "--webhook-ca-validity=87600h"} {
			if !strings.Contains(d, want) {
				t.Errorf("deployment lacks %q", want)
			}
		}
		role := toYAML(t, r.get("Role", "nhc-node-healthcheck-leader-election"))
		if !strings.Contains(role, "- nhc-node-healthcheck-webhook-cert") {
			t.Errorf("the operator may update only its own Secret:\n%s", role)
		}
		if strings.Contains(toYAML(t, mustRender(t, nil, certManagerAPI...).get("Role", "nhc-node-healthcheck-leader-election")), "secrets") {
			t.Error("with cert-manager the operator needs no access to Secrets")
		}
	})
	t.Run("self-managed certificate lifetimes", func(t *testing.T) {
		args := deploymentArgs(t, mustRender(t, map[string]any{"certManager": map[string]any{"enabled": false},
			"selfManagedCertificate": map[string]any{"validity": "720h", "caValidity": "8760h"}}))
		for _, a := range []string{"--webhook-cert-validity=720h", "--webhook-ca-validity=8760h"} {
			if !slices.Contains(args, a) {
				t.Errorf("args %v lack %s", args, a)
			}
		}
		for name, r := range map[string]rendered{
			"cert-manager": mustRender(t, nil, certManagerAPI...),
			"webhooks off": mustRender(t, map[string]any{"certManager": map[string]any{"enabled": false}, "webhooks": map[string]any{"enabled": false}}),
		} {
			for _, a := range deploymentArgs(t, r) {
				if strings.HasPrefix(a, "--webhook-cert-validity") || strings.HasPrefix(a, "--webhook-ca-validity") {
					t.Errorf("%s: the self-managed certificate lifetimes are for self-managed mode only: %s", name, a)
				}
			}
		}
	})
	t.Run("leader election timings", func(t *testing.T) {
		leArgs := func(args []string) []string {
			var out []string
			for _, a := range args {
				if strings.HasPrefix(a, "--leader-election-lease-duration") || strings.HasPrefix(a, "--leader-election-renew-deadline") ||
					strings.HasPrefix(a, "--leader-election-retry-period") {
					out = append(out, a)
				}
			}
			return out
		}
		if args := deploymentArgs(t, mustRender(t, nil)); !slices.Contains(args, "--leader-election-id=e1f13584.medik8s.io") {
			t.Errorf("defaults: args %v lack the public operator's leader-election lock", args)
		}
		if args := deploymentArgs(t, mustRender(t, map[string]any{"leaderElection": map[string]any{"id": "nhc.example.com"}})); !slices.Contains(args, "--leader-election-id=nhc.example.com") {
			t.Errorf("set: args %v lack --leader-election-id=nhc.example.com", args)
		}
		if got, want := leArgs(deploymentArgs(t, mustRender(t, nil))), []string{"--leader-election-lease-duration=12s",
			"--leader-election-renew-deadline=8s", "--leader-election-retry-period=2s"}; !slices.Equal(got, want) {
			t.Errorf("defaults: got %v, want %v", got, want)
		}
		r := mustRender(t, map[string]any{"leaderElection": map[string]any{"leaseDuration": "60s", "renewDeadline": "40s", "retryPeriod": "5s"}})
		if got, want := leArgs(deploymentArgs(t, r)), []string{"--leader-election-lease-duration=60s",
			"--leader-election-renew-deadline=40s", "--leader-election-retry-period=5s"}; !slices.Equal(got, want) {
			t.Errorf("set: got %v, want %v", got, want)
		}
		r = mustRender(t, map[string]any{"replicaCount": 1, "podDisruptionBudget": map[string]any{"enabled": false}, "leaderElection": map[string]any{"enabled": false}})
		args := deploymentArgs(t, r)
		if got := leArgs(args); len(got) > 0 {
			t.Errorf("leader election off, yet %v", got)
		}
		if !slices.Contains(args, "--leader-elect=false") {
			t.Errorf("args %v lack --leader-elect=false", args)
		}
	})
	t.Run("webhooks off", func(t *testing.T) {
		r := mustRender(t, map[string]any{"webhooks": map[string]any{"enabled": false}})
		for _, k := range r.kinds() {
			if strings.Contains(k, "Webhook") || strings.HasPrefix(k, "Certificate/") || strings.HasPrefix(k, "Issuer/") {
				t.Errorf("webhooks off, yet %s", k)
			}
		}
		if !strings.Contains(toYAML(t, r.get("Deployment", "nhc-node-healthcheck")), "--enable-webhooks=false") {
			t.Error("the manager must not serve webhooks")
		}
	})
	t.Run("ServiceMonitor and PrometheusRule", func(t *testing.T) {
		r := mustRender(t, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
			"prometheusRule": map[string]any{"enabled": true}}})
		sm := toYAML(t, r.get("ServiceMonitor", "nhc-node-healthcheck"))
		if !strings.Contains(sm, "scheme: https") || !strings.Contains(sm, "release: prom") {
			t.Errorf("ServiceMonitor:\n%s", sm)
		}
		rule := toYAML(t, r.get("PrometheusRule", "nhc-node-healthcheck"))
		for _, alert := range allAlerts {
			if !strings.Contains(rule, alert) {
				t.Errorf("alert %s missing", alert)
			}
		}
	})
	t.Run("default NodeHealthCheck", func(t *testing.T) {
		r := mustRender(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true}})
		nhc := r.get("NodeHealthCheck", "nhc-worker-default")
		if nhc == nil {
			t.Fatal("nhc-worker-default missing")
		}
		y := toYAML(t, nhc)
		for _, want := range []string{"minHealthy: 51%", "key: node-role.kubernetes.io/control-plane", "duration: 300s", "kind: SelfNodeRemediationTemplate",
			"namespace: node-healthcheck", "helm.sh/hook: post-install"} {
			if !strings.Contains(y, want) {
				t.Errorf("default NodeHealthCheck lacks %q:\n%s", want, y)
			}
		}
		checkDefaultSelector(t, nhc)
		if strings.Contains(y, "failureDomain") {
			t.Errorf("the default NodeHealthCheck has no failure domains unless set:\n%s", y)
		}
		zoned := mustRender(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true,
			"failureDomain": map[string]any{"topologyKey": "topology.kubernetes.io/zone", "maxUnhealthy": "34%"}}}).get("NodeHealthCheck", "nhc-worker-default")
		if fd, _, _ := unstructured.NestedMap(zoned.Object, "spec", "failureDomain"); fd["topologyKey"] != "topology.kubernetes.io/zone" || fd["maxUnhealthy"] != "34%" {
			t.Errorf("defaultNodeHealthCheck.failureDomain: spec.failureDomain %v", fd)
		}
		if strings.Contains(y, "skipNodesBeingRemoved") {
			t.Errorf("the default NodeHealthCheck remediates nodes being removed unless set:\n%s", y)
		}
		skipping := mustRender(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true, "skipNodesBeingRemoved": true}}).get("NodeHealthCheck", "nhc-worker-default")
		if got, _, _ := unstructured.NestedBool(skipping.Object, "spec", "skipNodesBeingRemoved"); !got {
			t.Error("defaultNodeHealthCheck.skipNodesBeingRemoved does not set spec.skipNodesBeingRemoved")
		}
		if strings.Contains(y, "maxInFlight") {
			t.Errorf("the default NodeHealthCheck has no in-flight limit unless set:\n%s", y)
		}
		if strings.Contains(y, "allowRemediationRequests") {
			t.Errorf("the default NodeHealthCheck ignores remediation requests unless set:\n%s", y)
		}
		requests := mustRender(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true, "allowRemediationRequests": true}}).get("NodeHealthCheck", "nhc-worker-default")
		if got, _, _ := unstructured.NestedBool(requests.Object, "spec", "allowRemediationRequests"); !got {
			t.Error("defaultNodeHealthCheck.allowRemediationRequests does not set spec.allowRemediationRequests")
		}
		for _, v := range []any{2, "10%"} {
			limited := mustRender(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true, "maxInFlight": v}}).get("NodeHealthCheck", "nhc-worker-default")
			if got, _, _ := unstructured.NestedFieldNoCopy(limited.Object, "spec", "maxInFlight"); fmt.Sprint(got) != fmt.Sprint(v) {
				t.Errorf("defaultNodeHealthCheck.maxInFlight %v: spec.maxInFlight %v (%T)", v, got, got)
			}
		}
		custom := mustRender(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true, "selector": map[string]any{
			"matchExpressions": []any{map[string]any{"key": "node-role.kubernetes.io/worker", "operator": "Exists"}}}}}).get("NodeHealthCheck", "nhc-worker-default")
		if y := toYAML(t, custom); !strings.Contains(y, "key: node-role.kubernetes.io/worker") || strings.Contains(y, "node-role.kubernetes.io/master") {
			t.Errorf("defaultNodeHealthCheck.selector does not set spec.selector:\n%s", y)
		}
		if mustRender(t, nil).get("NodeHealthCheck", "nhc-worker-default") != nil {
			t.Error("the default NodeHealthCheck is off by default")
		}
		if strings.Contains(y, "dryRun") {
			t.Errorf("the default NodeHealthCheck is active unless dryRun is set:\n%s", y)
		}
		dry := mustRender(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true, "dryRun": true}}).get("NodeHealthCheck", "nhc-worker-default")
		if y := toYAML(t, dry); !strings.Contains(y, "dryRun: true") {
			t.Errorf("defaultNodeHealthCheck.dryRun does not set spec.dryRun:\n%s", y)
		}
		if strings.Contains(y, "repairBudget") {
			t.Errorf("the default NodeHealthCheck has no repair budget unless set:\n%s", y)
		}
		budget := mustRender(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true,
			"repairBudget": map[string]any{"maxRemediations": 3, "window": "24h"}}}).get("NodeHealthCheck", "nhc-worker-default")
		if y := toYAML(t, budget); !strings.Contains(y, "maxRemediations: 3") || !strings.Contains(y, "window: 24h") {
			t.Errorf("defaultNodeHealthCheck.repairBudget does not set spec.repairBudget:\n%s", y)
		}
	})
	t.Run("CRDs off, not kept, lease namespace not created", func(t *testing.T) {
		r := mustRender(t, map[string]any{"crds": map[string]any{"enabled": false}, "leases": map[string]any{"createNamespace": false}})
		if r.get("CustomResourceDefinition", "nodehealthchecks.remediation.medik8s.io") != nil || r.get("Namespace", "medik8s-leases") != nil {
			t.Error("crds.enabled=false / leases.createNamespace=false ignored")
		}
		r = mustRender(t, map[string]any{"crds": map[string]any{"keep": false}})
		if _, kept := r.get("CustomResourceDefinition", "nodehealthchecks.remediation.medik8s.io").GetAnnotations()["helm.sh/resource-policy"]; kept {
			t.Error("crds.keep=false still keeps the CRD")
		}
	})
	t.Run("scheduling", func(t *testing.T) {
		r := mustRender(t, map[string]any{"priorityClassName": "system-cluster-critical",
			"nodeSelector": map[string]any{"node-role.kubernetes.io/control-plane": ""},
			"tolerations":  []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}}})
		y := toYAML(t, r.get("Deployment", "nhc-node-healthcheck"))
		for _, want := range []string{"priorityClassName: system-cluster-critical", "node-role.kubernetes.io/control-plane: \"\"", "effect: NoSchedule"} {
			if !strings.Contains(y, want) {
				t.Errorf("deployment lacks %q", want)
			}
		}
	})
}

func TestContradictoryValuesFail(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"replicas without leader election", map[string]any{"leaderElection": map[string]any{"enabled": false}}, "needs leaderElection.enabled=true"},
		{"PrometheusRule without metrics", map[string]any{"metrics": map[string]any{"enabled": false, "prometheusRule": map[string]any{"enabled": true}}}, "needs metrics.enabled=true"},
		{"ServiceMonitor without metrics", map[string]any{"metrics": map[string]any{"enabled": false, "serviceMonitor": map[string]any{"enabled": true}}}, "needs metrics.enabled=true"},
		{"a dashboard without metrics", map[string]any{"metrics": map[string]any{"enabled": false, "grafanaDashboard": map[string]any{"enabled": true}}}, "metrics.grafanaDashboard.enabled=true needs metrics.enabled=true"},
		{"a dashboard namespace that is no name", map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"namespace": "Monitoring"}}}, "grafanaDashboard/namespace"},
		{"a dashboard label that is no string", map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"labels": map[string]any{"grafana_dashboard": 1}}}}, "grafanaDashboard/labels"},
		{"an exhausted-escalation window Prometheus does not parse", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"escalationExhaustedWindow": "1.5h"}}}, "escalationExhaustedWindow"},
		{"an exhausted-escalation window with its units out of order", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"escalationExhaustedWindow": "30m1h"}}}, "escalationExhaustedWindow"},
		{"an empty exhausted-escalation window", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"escalationExhaustedWindow": ""}}}, "escalationExhaustedWindow"},
		{"a repair-budget for: that is no duration", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"repairBudgetExhaustedFor": "soon"}}}, "repairBudgetExhaustedFor"},
		{"a remediation-too-long for: Prometheus does not parse", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"remediationTooLong": "1.5h"}}}, "remediationTooLong"},
		{"a paused-too-long for: in a unit Prometheus does not know", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"pausedTooLong": "500us"}}}, "pausedTooLong"},
		{"a past-deadline threshold that is no duration", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"remediationPastDeadline": "1 hour"}}}, "remediationPastDeadline"},
		{"a past-deadline threshold in days (not a Go duration)", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"remediationPastDeadline": "1d"}}}, "remediationPastDeadline"},
		{"a budget for one replica", map[string]any{"replicaCount": 1}, "podDisruptionBudget.enabled=true needs replicaCount >= 2"},
		{"an unknown value", map[string]any{"replicas": 3}, "additional properties 'replicas' not allowed"},
		{"a misspelt nested value", map[string]any{"webhooks": map[string]any{"enable": false}}, "additional properties 'enable' not allowed"},
		{"a bad duration", map[string]any{"upgrade": map[string]any{"maxPause": "six hours"}}, "maxPause"},
		{"an empty returning-node grace", map[string]any{"returningNodeGrace": ""}, "returningNodeGrace"},
		{"an empty clock skew bound", map[string]any{"maxClockSkew": ""}, "maxClockSkew"},
		{"a clock skew bound that is not a duration", map[string]any{"maxClockSkew": "ten seconds"}, "maxClockSkew"},
		{"a negative clock skew bound", map[string]any{"maxClockSkew": "-10s"}, "maxClockSkew"},
		{"a clock skew bound that is a number", map[string]any{"maxClockSkew": 10}, "maxClockSkew"},
		{"a bad leader-election duration", map[string]any{"leaderElection": map[string]any{"leaseDuration": "fast"}}, "leaseDuration"},
		{"an empty leader-election duration", map[string]any{"leaderElection": map[string]any{"retryPeriod": ""}}, "retryPeriod"},
		{"a bad certificate lifetime", map[string]any{"selfManagedCertificate": map[string]any{"validity": "1 year"}}, "validity"},
		{"a misspelt certificate value", map[string]any{"selfManagedCertificate": map[string]any{"duration": "720h"}}, "additional properties 'duration' not allowed"},
		{"cert-manager neither auto nor a boolean", map[string]any{"certManager": map[string]any{"enabled": "yes"}}, "/certManager/enabled': value must be one of"},
		{"cert-manager as the string true", map[string]any{"certManager": map[string]any{"enabled": "true"}}, "/certManager/enabled': value must be one of"},
		{"a ServiceMonitor neither auto nor a boolean", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": "always"}}}, "/metrics/serviceMonitor/enabled': value must be one of"},
		{"an issuer without cert-manager", map[string]any{"certManager": map[string]any{"enabled": false, "issuerRef": map[string]any{"name": "corp-ca"}}}, "certManager.issuerRef needs cert-manager"},
		{"an issuer where cert-manager is not served", map[string]any{"certManager": map[string]any{"issuerRef": map[string]any{"name": "corp-ca"}}}, "certManager.issuerRef needs cert-manager"},
		{"a template kind without Template", map[string]any{"defaultNodeHealthCheck": map[string]any{"remediationTemplate": map[string]any{"kind": "SelfNodeRemediation"}}}, "kind"},
		{"a maxInFlight of 0", map[string]any{"defaultNodeHealthCheck": map[string]any{"maxInFlight": 0}}, "maxInFlight"},
		{"a failure domain without its bound", map[string]any{"defaultNodeHealthCheck": map[string]any{"failureDomain": map[string]any{"topologyKey": "topology.kubernetes.io/zone"}}}, "maxUnhealthy"},
		{`a maxInFlight of "0%"`, map[string]any{"defaultNodeHealthCheck": map[string]any{"maxInFlight": "0%"}}, "maxInFlight"},
		{"a repair budget without a window", map[string]any{"defaultNodeHealthCheck": map[string]any{"repairBudget": map[string]any{"maxRemediations": 3}}}, "window"},
		{"a repair budget of no remediation", map[string]any{"defaultNodeHealthCheck": map[string]any{"repairBudget": map[string]any{"maxRemediations": 0, "window": "1h"}}}, "maxRemediations"},
		{"a repair budget window that is not a duration", map[string]any{"defaultNodeHealthCheck": map[string]any{"repairBudget": map[string]any{"maxRemediations": 3, "window": "a day"}}}, "window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.values)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := render(t, map[string]any{"replicaCount": 1, "podDisruptionBudget": map[string]any{"enabled": false}, "leaderElection": map[string]any{"enabled": false}}); err != nil {
		t.Errorf("a single replica without leader election or budget is valid: %v", err)
	}
}

// deploymentArgs returns the manager arguments of the rendered Deployment.
func deploymentArgs(t *testing.T, r rendered) []string {
	t.Helper()
	d := r.get("Deployment", "nhc-node-healthcheck")
	if d == nil {
		t.Fatal("Deployment missing")
	}
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		t.Fatalf("Deployment containers: %v", err)
	}
	return toStrings(containers[0].(map[string]any)["args"])
}

// checkDefaultSelector checks that the default NodeHealthCheck selects workers as kubeadm, EKS, GKE,
// AKS and OpenShift label them, and no control-plane node.
func checkDefaultSelector(t *testing.T, nhc *unstructured.Unstructured) {
	t.Helper()
	raw, found, err := unstructured.NestedMap(nhc.Object, "spec", "selector")
	if err != nil || !found {
		t.Fatalf("spec.selector: %v, found %v", err, found)
	}
	var sel metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &sel); err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"a kubeadm worker", map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": "w1"}, true},
		{"an EKS worker", map[string]string{"eks.amazonaws.com/nodegroup": "ng-1", "node.kubernetes.io/instance-type": "m5.large"}, true},
		{"a GKE worker", map[string]string{"cloud.google.com/gke-nodepool": "default-pool"}, true},
		{"an AKS worker", map[string]string{"kubernetes.azure.com/agentpool": "nodepool1", "kubernetes.azure.com/mode": "system", "kubernetes.azure.com/role": "agent"}, true},
		{"an OpenShift worker", map[string]string{"node-role.kubernetes.io/worker": ""}, true},
		{"a kubeadm control-plane node", map[string]string{"node-role.kubernetes.io/control-plane": ""}, false},
		{"an older control-plane node", map[string]string{"node-role.kubernetes.io/master": ""}, false},
		{"an OpenShift control-plane node that also runs workloads", map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""}, false},
	} {
		if got := selector.Matches(labels.Set(tc.labels)); got != tc.want {
			t.Errorf("%s (%v): selected %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

// releaseIdentity returns the --release-identity of the container args, "" when absent.
func releaseIdentity(args []string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--release-identity="); ok {
			return v
		}
	}
	return ""
}

// The managers label the node Leases they create with the release's identity, and the uninstall
// hook deletes the node Leases with that identity: both get the same, "<namespace>.<release>", a
// label value that tells releases apart however long their names.
func TestReleaseIdentity(t *testing.T) {
	identities := map[string]bool{}
	for _, tt := range []struct{ name, ns, want string }{
		{releaseName, namespace, namespace + "." + releaseName},
		{"nhc", "other-team", "other-team.nhc"},
		{strings.Repeat("r", 53), strings.Repeat("n", 63), ""},
		{strings.Repeat("r", 52) + "s", strings.Repeat("n", 63), ""},
	} {
		r, err := renderRelease(t, loadChart(t), tt.name, tt.ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		var manager, cleanup string
		for i := range r {
			containers, _, _ := unstructured.NestedSlice(r[i].Object, "spec", "template", "spec", "containers")
			if len(containers) == 0 {
				continue
			}
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			switch {
			case r[i].GetKind() == "Deployment":
				manager = releaseIdentity(args)
			case r[i].GetKind() == "Job" && strings.HasSuffix(r[i].GetName(), "-cleanup"):
				cleanup = releaseIdentity(args)
			}
		}
		if manager == "" || manager != cleanup {
			t.Errorf("release %s/%s: the manager's identity %q, the cleanup's %q; want the same", tt.ns, tt.name, manager, cleanup)
		}
		if tt.want != "" && manager != tt.want {
			t.Errorf("release %s/%s: identity %q, want %q", tt.ns, tt.name, manager, tt.want)
		}
		if err := lease.ValidRelease(manager); err != nil {
			t.Errorf("release %s/%s: %v", tt.ns, tt.name, err)
		}
		if identities[manager] {
			t.Errorf("release %s/%s: identity %q shared with another release", tt.ns, tt.name, manager)
		}
		identities[manager] = true
	}
}

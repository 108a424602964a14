package chart

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// decode converts a rendered object into a typed one, failing on a field the type lacks.
func decode[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatal("object missing")
	}
	out := new(T)
	decodeStrict(t, u, out)
	return out
}

// podSpec returns the rendered Deployment's pod spec.
func podSpec(t *testing.T, r rendered) corev1.PodSpec {
	t.Helper()
	return decode[appsv1.Deployment](t, r.get("Deployment", "nhc-node-healthcheck")).Spec.Template.Spec
}

// Extra environment and volumes reach the manager container, after the chart's own, and nothing is
// added without them.
func TestEnvAndExtraVolumes(t *testing.T) {
	pod := podSpec(t, mustRender(t, nil))
	if c := pod.Containers[0]; len(c.Env) != 0 || len(c.EnvFrom) != 0 {
		t.Errorf("by default the manager gets no environment from the chart: env %v, envFrom %v", c.Env, c.EnvFrom)
	}
	defaultVolumes, defaultMounts := len(pod.Volumes), len(pod.Containers[0].VolumeMounts)

	pod = podSpec(t, mustRender(t, map[string]any{
		"env":               []any{map[string]any{"name": "GOGC", "value": "50"}, map[string]any{"name": "GOMEMLIMIT", "value": "200MiB"}},
		"envFrom":           []any{map[string]any{"configMapRef": map[string]any{"name": "nhc-env"}}},
		"extraVolumes":      []any{map[string]any{"name": "corp-ca", "configMap": map[string]any{"name": "corp-ca"}}},
		"extraVolumeMounts": []any{map[string]any{"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": true}},
	}))
	c := pod.Containers[0]
	if want := []corev1.EnvVar{{Name: "GOGC", Value: "50"}, {Name: "GOMEMLIMIT", Value: "200MiB"}}; !slices.Equal(c.Env, want) {
		t.Errorf("env %v, want %v", c.Env, want)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != "nhc-env" {
		t.Errorf("envFrom %+v", c.EnvFrom)
	}
	if len(pod.Volumes) != defaultVolumes+1 || pod.Volumes[defaultVolumes].Name != "corp-ca" || pod.Volumes[defaultVolumes].ConfigMap == nil {
		t.Errorf("volumes %+v: want the chart's and corp-ca last", pod.Volumes)
	}
	if len(c.VolumeMounts) != defaultMounts+1 || !reflect.DeepEqual(c.VolumeMounts[defaultMounts], corev1.VolumeMount{Name: "corp-ca", MountPath: "/etc/corp-ca", ReadOnly: true}) {
		t.Errorf("volume mounts %+v: want the chart's and corp-ca last", c.VolumeMounts)
	}
	for _, tt := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"a variable without a name", map[string]any{"env": []any{map[string]any{"value": "50"}}}, "name"},
		{"a volume that takes the chart's name", map[string]any{"extraVolumes": []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}}}, "extraVolumes"},
		{"a mount without a path", map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "x"}}}, "mountPath"},
	} {
		if _, err := render(t, tt.values); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// everything turns on every optional object of the chart, so that a test sees every template.
var everything = map[string]any{
	"defaultNodeHealthCheck": map[string]any{"enabled": true},
	"upgrade":                map[string]any{"pauseObject": map[string]any{"enabled": true}},
	"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}, "grafanaDashboard": map[string]any{"enabled": true},
		"serviceMonitor": map[string]any{"enabled": true}},
	"networkPolicy":          map[string]any{"enabled": true},
	"apiPriorityAndFairness": map[string]any{"enabled": true},
	"rbac":                   map[string]any{"aggregateClusterRoles": map[string]any{"view": true, "edit": true}},
	"serviceAccount":         map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn"}},
}

// merged returns a copy of base with over's keys set, maps merged key by key.
func merged(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		if b, ok := out[k].(map[string]any); ok {
			if o, ok := v.(map[string]any); ok {
				out[k] = merged(b, o)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// commonLabels and commonAnnotations reach every object the chart renders, the CRD and the hooks'
// and tests' objects included, with every option on, with cert-manager and without; the chart's own
// labels and annotations win over them (a selector label, a hook, the keep policy).
func TestCommonLabelsAndAnnotationsOnEveryObject(t *testing.T) {
	common := map[string]any{
		"commonLabels":      map[string]any{"team": "platform", "app.kubernetes.io/name": "not-the-chart"},
		"commonAnnotations": map[string]any{"owner": "sre@example.com", "helm.sh/hook-delete-policy": "common", "helm.sh/resource-policy": "common"},
	}
	for name, r := range map[string]rendered{
		"self-managed": mustRender(t, merged(everything, common), monitoringAPI...),
		"cert-manager": mustRender(t, merged(everything, common), append(certManagerAPI, monitoringAPI...)...),
		"openshift":    mustRender(t, merged(everything, common), "config.openshift.io/v1"),
	} {
		hooks := 0
		for _, u := range r {
			what := name + ": " + u.GetKind() + "/" + u.GetName()
			if got := u.GetLabels()["team"]; got != "platform" {
				t.Errorf("%s: label team %q, want platform", what, got)
			}
			if got := u.GetLabels()["app.kubernetes.io/name"]; got != "node-healthcheck" {
				t.Errorf("%s: label app.kubernetes.io/name %q: the chart's label must win", what, got)
			}
			a := u.GetAnnotations()
			if a["owner"] != "sre@example.com" {
				t.Errorf("%s: annotations %v lack owner", what, a)
			}
			// The hooks' and tests' objects have a delete policy of their own.
			if strings.HasSuffix(u.GetName(), "-self-test") || strings.HasSuffix(u.GetName(), "-cleanup") {
				if a["helm.sh/hook-delete-policy"] == "common" {
					t.Errorf("%s: the common annotation replaced the hook's delete policy", what)
				}
				hooks++
			}
			if (u.GetKind() == "CustomResourceDefinition" || u.GetKind() == "Namespace") && a["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s: keep policy %q: the chart's annotation must win", what, a["helm.sh/resource-policy"])
			}
		}
		if hooks < 10 {
			t.Errorf("%s: only %d objects kept their own hook", name, hooks)
		}
		kinds := map[string]bool{}
		for _, u := range r {
			kinds[u.GetKind()] = true
		}
		for _, k := range []string{"CustomResourceDefinition", "Deployment", "NetworkPolicy", "FlowSchema", "PriorityLevelConfiguration", "ServiceMonitor",
			"PrometheusRule", "NodeHealthCheck", "Job", "Pod", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Namespace", "ConfigMap", "Secret"} {
			if !kinds[k] {
				t.Errorf("%s: no %s rendered: the check does not see every template", name, k)
			}
		}
	}
	for _, u := range mustRender(t, everything, monitoringAPI...) {
		if _, ok := u.GetLabels()["team"]; ok {
			t.Errorf("%s/%s has the label team without commonLabels", u.GetKind(), u.GetName())
		}
	}
}

// hostNetwork runs the pods on the node's network with the node's DNS through the cluster's, and the
// ports follow the values: the manager's bind addresses, the container ports, the Services'
// targetPorts, the probes and the ServiceMonitor's port.
func TestHostNetworkAndPorts(t *testing.T) {
	pod := podSpec(t, mustRender(t, nil))
	if pod.HostNetwork || pod.DNSPolicy != "" {
		t.Errorf("by default: hostNetwork %v, dnsPolicy %q", pod.HostNetwork, pod.DNSPolicy)
	}
	r := mustRender(t, map[string]any{"hostNetwork": true, "replicaCount": 1, "podDisruptionBudget": map[string]any{"enabled": false},
		"webhooks": map[string]any{"port": 10250 + 10}, "metrics": map[string]any{"port": 10263, "serviceMonitor": map[string]any{"enabled": true}},
		"healthProbe": map[string]any{"port": 10264}}, monitoringAPI...)
	pod = podSpec(t, r)
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %q; want true, ClusterFirstWithHostNet", pod.HostNetwork, pod.DNSPolicy)
	}
	c := pod.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if want := map[string]int32{"webhook": 10260, "metrics": 10263, "probes": 10264}; !maps.Equal(ports, want) {
		t.Errorf("container ports %v, want %v", ports, want)
	}
	args := deploymentArgs(t, r)
	for _, want := range []string{"--webhook-port=10260", "--metrics-bind-address=:10263", "--health-probe-bind-address=:10264"} {
		if !slices.Contains(args, want) {
			t.Errorf("the manager's arguments %v lack %s", args, want)
		}
	}
	resolve := func(what string, p intstr.IntOrString) int32 {
		if p.Type == intstr.Int {
			return p.IntVal
		}
		n, ok := ports[p.StrVal]
		if !ok {
			t.Errorf("%s: port %q is none of the container's", what, p.StrVal)
		}
		return n
	}
	for probe, h := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if got := resolve(probe, h.HTTPGet.Port); got != 10264 {
			t.Errorf("%s probe on %d, want 10264", probe, got)
		}
	}
	for svc, want := range map[string]int32{"nhc-node-healthcheck-webhook": 10260, "nhc-node-healthcheck-metrics": 10263} {
		s := decode[corev1.Service](t, r.get("Service", svc))
		if got := resolve(svc, s.Spec.Ports[0].TargetPort); got != want {
			t.Errorf("Service %s targets %d, want %d", svc, got, want)
		}
	}
	sm := r.get("ServiceMonitor", "nhc-node-healthcheck")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	metricsSvc := decode[corev1.Service](t, r.get("Service", "nhc-node-healthcheck-metrics"))
	if port := endpoints[0].(map[string]any)["port"]; port != metricsSvc.Spec.Ports[0].Name {
		t.Errorf("the ServiceMonitor scrapes port %v, the metrics Service's is %q", port, metricsSvc.Spec.Ports[0].Name)
	}
	if p := podSpec(t, mustRender(t, map[string]any{"hostNetwork": true, "dnsPolicy": "Default"})); p.DNSPolicy != corev1.DNSDefault {
		t.Errorf("dnsPolicy Default set: got %q", p.DNSPolicy)
	}
	if _, err := render(t, map[string]any{"dnsPolicy": "ClusterFirstWithHostNetwork"}); err == nil || !strings.Contains(err.Error(), "dnsPolicy") {
		t.Errorf("a misspelt dnsPolicy: %v", err)
	}
}

// The NetworkPolicy is off by default; on, it allows in exactly the webhook and metrics ports (the
// values' ports, from the values' peers) and out the API server's ports and DNS.
func TestNetworkPolicy(t *testing.T) {
	if r := mustRender(t, nil); slices.ContainsFunc(r, func(u unstructured.Unstructured) bool { return u.GetKind() == "NetworkPolicy" }) {
		t.Error("a NetworkPolicy by default")
	}
	r := mustRender(t, map[string]any{"networkPolicy": map[string]any{"enabled": true, "apiServer": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}}},
		"webhooks": map[string]any{"port": 9444}, "metrics": map[string]any{"port": 8444}})
	np := decode[networkingv1.NetworkPolicy](t, r.get("NetworkPolicy", "nhc-node-healthcheck"))
	d := decode[appsv1.Deployment](t, r.get("Deployment", "nhc-node-healthcheck"))
	if !maps.Equal(np.Spec.PodSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("the policy selects %v, the Deployment's pods are %v", np.Spec.PodSelector.MatchLabels, d.Spec.Selector.MatchLabels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policy types %v", np.Spec.PolicyTypes)
	}
	in := map[int32][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			in[p.Port.IntVal] = rule.From
		}
	}
	if len(in) != 2 || in[9444] != nil || len(in[8444]) != 2 {
		t.Fatalf("ingress %+v: want the webhook port 9444 from anywhere, the metrics port 8444 from Prometheus and the release's pods", np.Spec.Ingress)
	}
	if prom := in[8444][0]; prom.NamespaceSelector == nil || prom.PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
		t.Errorf("metrics peers %+v", in[8444])
	}
	out := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			out[string(*p.Protocol)+"/"+strconv.Itoa(int(p.Port.IntVal))] = rule.To
		}
	}
	if got := slices.Sorted(maps.Keys(out)); !slices.Equal(got, []string{"TCP/443", "TCP/53", "TCP/6443", "TCP/8444", "UDP/53"}) {
		t.Errorf("egress ports %v", got)
	}
	if to := out["TCP/6443"]; len(to) != 1 || to[0].IPBlock == nil || to[0].IPBlock.CIDR != "10.0.0.0/24" {
		t.Errorf("the API server's peers %+v, want the ipBlock of the values", to)
	}
	// Without webhooks and metrics nothing comes in.
	np = decode[networkingv1.NetworkPolicy](t, mustRender(t, map[string]any{"networkPolicy": map[string]any{"enabled": true},
		"webhooks": map[string]any{"enabled": false}, "metrics": map[string]any{"enabled": false}}).get("NetworkPolicy", "nhc-node-healthcheck"))
	if len(np.Spec.Ingress) != 0 {
		t.Errorf("ingress without webhooks or metrics: %+v", np.Spec.Ingress)
	}
}

// The leader-election FlowSchema is on by default and matches the leader's Lease requests alone;
// it is not rendered without leader election, when switched off, or when the node Leases are kept
// in the release namespace.
func TestLeaderElectionFlowSchema(t *testing.T) {
	const name = "nhc-node-healthcheck-leader-election"
	fs := decode[flowcontrolv1.FlowSchema](t, mustRender(t, map[string]any{"serviceAccount": map[string]any{"name": "nhc-sa"}}).get("FlowSchema", name))
	if fs.Spec.PriorityLevelConfiguration.Name != "leader-election" || fs.Spec.MatchingPrecedence >= 1000 {
		t.Errorf("level %q, precedence %d; want leader-election, before apiPriorityAndFairness's 1000", fs.Spec.PriorityLevelConfiguration.Name, fs.Spec.MatchingPrecedence)
	}
	if len(fs.Spec.Rules) != 1 || len(fs.Spec.Rules[0].Subjects) != 1 || len(fs.Spec.Rules[0].ResourceRules) != 1 || len(fs.Spec.Rules[0].NonResourceRules) != 0 {
		t.Fatalf("rules %+v", fs.Spec.Rules)
	}
	rule := fs.Spec.Rules[0]
	if sa := rule.Subjects[0].ServiceAccount; sa == nil || sa.Name != "nhc-sa" || sa.Namespace != namespace {
		t.Errorf("subject %+v, want the ServiceAccount nhc-sa", rule.Subjects[0])
	}
	rr := rule.ResourceRules[0]
	if !slices.Equal(rr.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(rr.Resources, []string{"leases"}) || rr.ClusterScope ||
		!slices.Equal(rr.Namespaces, []string{namespace}) || !slices.Equal(rr.Verbs, []string{"get", "create", "update"}) {
		t.Errorf("the rule must match the leader's Lease requests alone: %+v", rr)
	}
	for what, values := range map[string]map[string]any{
		"switched off":                           {"leaderElection": map[string]any{"flowSchema": false}},
		"without leader election":                {"replicaCount": 1, "podDisruptionBudget": map[string]any{"enabled": false}, "leaderElection": map[string]any{"enabled": false}},
		"node Leases in the release's namespace": {"leases": map[string]any{"namespace": namespace}},
	} {
		if mustRender(t, values).get("FlowSchema", name) != nil {
			t.Errorf("%s: rendered", what)
		}
	}
}

// The FlowSchema is off by default; on, it matches every request of the operator's ServiceAccount and
// sends it to the chart's priority level, or to an existing one without creating another.
func TestFlowSchema(t *testing.T) {
	if r := mustRender(t, nil); r.get("FlowSchema", "nhc-node-healthcheck") != nil {
		t.Error("a FlowSchema by default")
	}
	r := mustRender(t, map[string]any{"apiPriorityAndFairness": map[string]any{"enabled": true}, "serviceAccount": map[string]any{"name": "nhc-sa"}})
	fs := decode[flowcontrolv1.FlowSchema](t, r.get("FlowSchema", "nhc-node-healthcheck"))
	plc := decode[flowcontrolv1.PriorityLevelConfiguration](t, r.get("PriorityLevelConfiguration", "nhc-node-healthcheck"))
	if fs.Spec.PriorityLevelConfiguration.Name != plc.Name || plc.Spec.Type != flowcontrolv1.PriorityLevelEnablementLimited {
		t.Errorf("the FlowSchema's level %q, the chart's %q (%s)", fs.Spec.PriorityLevelConfiguration.Name, plc.Name, plc.Spec.Type)
	}
	if l := plc.Spec.Limited; *l.NominalConcurrencyShares != 10 || *l.LendablePercent != 50 {
		t.Errorf("limited %+v", l)
	}
	if len(fs.Spec.Rules) != 1 || len(fs.Spec.Rules[0].Subjects) != 1 {
		t.Fatalf("rules %+v", fs.Spec.Rules)
	}
	rule := fs.Spec.Rules[0]
	if sa := rule.Subjects[0].ServiceAccount; sa == nil || sa.Name != "nhc-sa" || sa.Namespace != namespace {
		t.Errorf("subject %+v, want the ServiceAccount nhc-sa", rule.Subjects[0])
	}
	if len(rule.ResourceRules) != 1 || !rule.ResourceRules[0].ClusterScope || !slices.Equal(rule.ResourceRules[0].Namespaces, []string{"*"}) || len(rule.NonResourceRules) != 1 {
		t.Errorf("the rule must match every request: %+v", rule)
	}
	r = mustRender(t, map[string]any{"apiPriorityAndFairness": map[string]any{"enabled": true, "priorityLevel": "workload-high"}})
	if r.get("PriorityLevelConfiguration", "nhc-node-healthcheck") != nil {
		t.Error("a priority level of its own besides the existing one")
	}
	if got := decode[flowcontrolv1.FlowSchema](t, r.get("FlowSchema", "nhc-node-healthcheck")).Spec.PriorityLevelConfiguration.Name; got != "workload-high" {
		t.Errorf("priority level %q, want workload-high", got)
	}
}

// The ClusterRoles aggregated into view, edit and admin are off by default; view grants reads only,
// edit every verb, on NodeHealthChecks only.
func TestAggregatedClusterRolesRender(t *testing.T) {
	r := mustRender(t, nil)
	if r.get("ClusterRole", "nhc-node-healthcheck-view") != nil || r.get("ClusterRole", "nhc-node-healthcheck-edit") != nil {
		t.Error("roles aggregated into view or edit by default")
	}
	r = mustRender(t, map[string]any{"rbac": map[string]any{"aggregateClusterRoles": map[string]any{"view": true, "edit": true}}})
	for name, want := range map[string]struct {
		to    []string
		verbs []string
	}{
		"nhc-node-healthcheck-view": {[]string{"admin", "edit", "view"}, []string{"get", "list", "watch"}},
		"nhc-node-healthcheck-edit": {[]string{"admin", "edit"}, []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
	} {
		role := decode[rbacv1.ClusterRole](t, r.get("ClusterRole", name))
		var to []string
		for k, v := range role.Labels {
			if target, ok := strings.CutPrefix(k, "rbac.authorization.k8s.io/aggregate-to-"); ok && v == "true" {
				to = append(to, target)
			}
		}
		if slices.Sort(to); !slices.Equal(to, want.to) {
			t.Errorf("%s aggregates to %v, want %v", name, to, want.to)
		}
		if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"nodehealthchecks"}) || !slices.Equal(role.Rules[0].APIGroups, []string{"remediation.medik8s.io"}) {
			t.Fatalf("%s rules %+v", name, role.Rules)
		}
		if got := slices.Sorted(slices.Values(role.Rules[0].Verbs)); !slices.Equal(got, want.verbs) {
			t.Errorf("%s verbs %v, want %v", name, got, want.verbs)
		}
	}
}

// Under `helm template` (Argo CD), where lookup finds nothing, the aggregated ext-remediation role
// has no rules key at all: the aggregation controller's field, which GitOps tools then see no
// difference in.
func TestAggregatedRoleRendersNoRules(t *testing.T) {
	role := mustRender(t, nil).get("ClusterRole", "nhc-node-healthcheck-ext-remediation")
	if _, ok := role.Object["rules"]; ok {
		t.Errorf("the aggregated role renders rules: %v", role.Object["rules"])
	}
	if _, ok := role.Object["aggregationRule"]; !ok {
		t.Error("the aggregated role lost its aggregationRule")
	}
}

// The helm test pod verifies the metrics endpoint's certificate against the webhook certificate's
// CA, for the webhook Service's name (as the ServiceMonitor has Prometheus do), mounting only the
// Secret's ca.crt; without webhooks there is no such CA and it skips verification, explicitly.
func TestSelfTestVerifiesTheMetricsCertificate(t *testing.T) {
	testPod := func(r rendered) corev1.Pod {
		return *decode[corev1.Pod](t, r.get("Pod", "nhc-node-healthcheck-self-test"))
	}
	for name, apiVersions := range map[string][]string{"self-managed": nil, "cert-manager": certManagerAPI} {
		pod := testPod(mustRender(t, nil, apiVersions...))
		args := pod.Spec.Containers[0].Args
		for _, want := range []string{"--metrics-ca-file=/etc/nhc-metrics-ca/ca.crt", "--metrics-server-name=nhc-node-healthcheck-webhook.node-healthcheck.svc"} {
			if !slices.Contains(args, want) {
				t.Errorf("%s: the test pod's arguments %v lack %s", name, args, want)
			}
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--metrics-insecure-skip-verify") }) {
			t.Errorf("%s: the test pod skips verification: %v", name, args)
		}
		if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Secret == nil || pod.Spec.Volumes[0].Secret.SecretName != "nhc-node-healthcheck-webhook-cert" ||
			!reflect.DeepEqual(pod.Spec.Volumes[0].Secret.Items, []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}) {
			t.Errorf("%s: volumes %+v, want the webhook Secret's ca.crt only", name, pod.Spec.Volumes)
		}
		if m := pod.Spec.Containers[0].VolumeMounts; len(m) != 1 || m[0].MountPath != "/etc/nhc-metrics-ca" {
			t.Errorf("%s: mounts %+v", name, m)
		}
	}
	pod := testPod(mustRender(t, map[string]any{"webhooks": map[string]any{"enabled": false}}))
	if args := pod.Spec.Containers[0].Args; !slices.Contains(args, "--metrics-insecure-skip-verify=true") || len(pod.Spec.Volumes) != 0 {
		t.Errorf("without webhooks: arguments %v, volumes %+v", args, pod.Spec.Volumes)
	}
}

package chart

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

func renderedPod(t *testing.T, values map[string]any, apiVersions ...string) (corev1.PodSpec, map[string]string) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mustRender(t, values, apiVersions...).get("Deployment", "nhc-node-healthcheck").Object, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec, d.Spec.Selector.MatchLabels
}

// By default the replicas prefer different nodes, so that the node that fails does not take every
// replica of the operator that is to remediate it: a preferred pod anti-affinity and a topology
// spread constraint on kubernetes.io/hostname, both soft (the replicas still run on one node). Either
// value replaces its default.
func TestReplicasSpreadOverNodes(t *testing.T) {
	pod, selector := renderedPod(t, nil)
	want := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
			TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}},
	}}
	if !reflect.DeepEqual(pod.Affinity, want) {
		t.Errorf("affinity %+v, want a preferred anti-affinity of the Deployment's pods per node", pod.Affinity)
	}
	wantSpread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
		WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}
	if !reflect.DeepEqual(pod.TopologySpreadConstraints, wantSpread) {
		t.Errorf("topology spread %+v, want %+v", pod.TopologySpreadConstraints, wantSpread)
	}
	if pod.PriorityClassName != "" {
		t.Errorf("priority class %q by default: the install must work in any namespace", pod.PriorityClassName)
	}

	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "node-role.kubernetes.io/infra", "operator": "Exists"}}}}}}}
	spread := []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "node-healthcheck"}}}}
	pod, _ = renderedPod(t, map[string]any{"affinity": affinity, "topologySpreadConstraints": spread, "priorityClassName": "system-cluster-critical"})
	if pod.Affinity.PodAntiAffinity != nil || pod.Affinity.NodeAffinity == nil {
		t.Errorf("a set affinity replaces the default: %+v", pod.Affinity)
	}
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone" ||
		pod.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("set topology spread constraints replace the default: %+v", pod.TopologySpreadConstraints)
	}
	if pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priority class %q", pod.PriorityClassName)
	}
}

// Why priorityClassName is empty by default, on real API servers: the recommended
// system-cluster-critical is admitted in the release namespace of a plain cluster (and resolves to
// its priority), but a cluster that limits the system-* classes to namespaces with a quota for them,
// as managed clusters do (ResourceQuota admission with limitedResources), refuses the operator's pod
// there, while the default, no class, is admitted everywhere.
func TestPriorityClass(t *testing.T) {
	if testing.Short() {
		t.Skip("starts control planes")
	}
	t.Parallel() // its own control plane
	if err := testutil.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	defaults, _ := renderedPod(t, nil)
	critical, _ := renderedPod(t, map[string]any{"priorityClassName": "system-cluster-critical"})
	missing, _ := renderedPod(t, map[string]any{"priorityClassName": "no-such-class"})

	admission := filepath.Join(t.TempDir(), "admission.yaml")
	if err := os.WriteFile(admission, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ResourceQuota
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: ResourceQuotaConfiguration
      limitedResources:
        - resource: pods
          matchScopes:
            - scopeName: PriorityClass
              operator: In
              values: ["system-node-critical", "system-cluster-critical"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cluster := range []struct {
		name            string
		admissionConfig string
		criticalAllowed bool
	}{
		{"plain", "", true},
		{"critical classes limited by quota", admission, false},
	} {
		t.Run(cluster.name, func(t *testing.T) {
			env := &envtest.Environment{}
			if cluster.admissionConfig != "" {
				env.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", cluster.admissionConfig)
			}
			cfg, err := env.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Stop() })
			k8s, err := client.New(cfg, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
				t.Fatal(err)
			}
			create := func(spec corev1.PodSpec) (*corev1.Pod, error) {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "manager"}, Spec: spec}
				pod.Spec.ServiceAccountName = ""
				return pod, k8s.Create(ctx, pod, client.DryRunAll)
			}
			if _, err := create(defaults); err != nil {
				t.Errorf("the default pod (no priority class): %v", err)
			}
			pod, err := create(critical)
			switch {
			case cluster.criticalAllowed && err != nil:
				t.Errorf("system-cluster-critical refused: %v", err)
			case cluster.criticalAllowed && (pod.Spec.Priority == nil || *pod.Spec.Priority != 2000000000):
				t.Errorf("system-cluster-critical resolved to priority %v", pod.Spec.Priority)
			case !cluster.criticalAllowed && (err == nil || !strings.Contains(err.Error(), "insufficient quota")):
				t.Errorf("system-cluster-critical where the cluster limits it: got %v, want a quota refusal", err)
			}
			if _, err := create(missing); err == nil {
				t.Error("the check is void: a pod of an unknown priority class was admitted")
			}
		})
	}
}

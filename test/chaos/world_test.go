package chaos

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// The world every run starts from:
//
//	nodes         w01..w10 workers (w01-w06 pool a, w07-w09 pool b, w10 no pool), cp1..cp3 control plane (cp3 pool b)
//	workers       control-plane DoesNotExist, pool In [a b]  -> w01..w09   minHealthy 60%     escalating esc-1 (1m) -> esc-2 (2m), repairBudget 2 in 24h
//	pool-b        pool In [b]                                -> w07..w09, cp3  maxUnhealthy 50%  plain-1, healthyDelay 1m, Unknown for 60s
//	control-plane control-plane Exists                       -> cp1..cp3   minHealthy 1       plain-2
//
// workers and pool-b overlap on w07..w09 (first wins), pool-b and control-plane on cp3 (one
// control-plane node at a time across NodeHealthChecks).
//
// Every node has a Cluster API Machine m-<node> (cp1..cp3 control-plane Machines) and claims it
// with its annotations, except w06, which claims m-cp1 (a kubelet that names a healthy
// control-plane Machine); relink moves change a node's claim.

// Templates: TestRemediationTemplates plain-1 and plain-2 (CR named after the node), esc-1 and
// esc-2 (multiple-templates support: generated CR names, so one kind serves two escalation steps),
// and a SelfNodeRemediationTemplate snr-1 (another remediator). "missing" is never created.
var existingTemplates = []string{"plain-1", "plain-2", "esc-1", "esc-2", "snr-1", "conv-1"}

const (
	testAPIVersion = "test.medik8s.io/v1alpha1"
	snrAPIVersion  = "self-node-remediation.medik8s.io/v1alpha1"
	markerNS       = "chaos-markers"
)

// crKinds are the remediation CR kinds the templates produce, as apiVersion and kind: the version
// the driver and the recorder read (ConvRemediation's stored one, which needs no conversion).
var crKinds = [][2]string{{testAPIVersion, "TestRemediation"}, {snrAPIVersion, "SelfNodeRemediation"}, {convStoreVersion, convKind}}

// convKind is the kind of conv-1's CRs, which its remediator's conversion webhook serves in two
// versions (conversion_test.go).
const convKind = "ConvRemediation"

func templateRef(name string) corev1.ObjectReference {
	switch name {
	case "snr-1":
		return corev1.ObjectReference{APIVersion: snrAPIVersion, Kind: "SelfNodeRemediationTemplate", Namespace: templateNamespace, Name: name}
	case "conv-1":
		return corev1.ObjectReference{APIVersion: convReadVersion, Kind: "ConvRemediationTemplate", Namespace: templateNamespace, Name: name}
	}
	return corev1.ObjectReference{APIVersion: testAPIVersion, Kind: "TestRemediationTemplate", Namespace: templateNamespace, Name: name}
}

// templateObjects returns the templates to create.
func templateObjects() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, name := range existingTemplates {
		ref := templateRef(name)
		t := &unstructured.Unstructured{}
		t.SetAPIVersion(ref.APIVersion)
		t.SetKind(ref.Kind)
		t.SetNamespace(ref.Namespace)
		t.SetName(name)
		if name == "esc-1" || name == "esc-2" {
			t.SetAnnotations(map[string]string{remediationv1alpha1.MultipleTemplatesSupportAnnotation: "true"})
		}
		_ = unstructured.SetNestedMap(t.Object, map[string]any{"spec": map[string]any{"template": name}}, "spec", "template")
		out = append(out, t)
	}
	return out
}

// templateConfig is a choice of templates for a NodeHealthCheck: one template or escalation steps.
type templateConfig struct {
	Name   string
	Single string
	Steps  []remediationv1alpha1.EscalatingRemediation
}

func step(template string, order int, timeout time.Duration) remediationv1alpha1.EscalatingRemediation {
	return remediationv1alpha1.EscalatingRemediation{RemediationTemplate: templateRef(template), Order: order, Timeout: metav1.Duration{Duration: timeout}}
}

// templateConfigs are what template changes choose from. "missing" disables the NodeHealthCheck;
// the 30s timeout is refused by the CRD's CEL rule (at least 1m); conv-1's kind goes unreadable
// while its conversion webhook is down.
var templateConfigs = []templateConfig{
	{Name: "plain-1", Single: "plain-1"},
	{Name: "plain-2", Single: "plain-2"},
	{Name: "snr-1", Single: "snr-1"},
	{Name: "esc-1(1m)->esc-2(2m)", Steps: []remediationv1alpha1.EscalatingRemediation{step("esc-1", 1, time.Minute), step("esc-2", 2, 2*time.Minute)}},
	{Name: "plain-1(1m)->snr-1(2m)", Steps: []remediationv1alpha1.EscalatingRemediation{step("plain-1", 10, time.Minute), step("snr-1", 20, 2*time.Minute)}},
	{Name: "missing", Single: "missing"},
	{Name: "esc-1(30s) (invalid)", Steps: []remediationv1alpha1.EscalatingRemediation{step("esc-1", 1, 30*time.Second)}},
	{Name: "esc-2(1m)->esc-1(1m)", Steps: []remediationv1alpha1.EscalatingRemediation{step("esc-2", 1, time.Minute), step("esc-1", 2, time.Minute)}},
	{Name: "conv-1", Single: "conv-1"},
}

// usesConv reports whether the NodeHealthCheck's templates are of the kind the conversion webhook
// serves.
func (h *nhc) usesConv() bool {
	return slices.ContainsFunc(h.Spec.TemplateRefs(), func(r corev1.ObjectReference) bool { return r.Name == "conv-1" })
}

// apply sets the configuration's templates on the spec.
func (c templateConfig) apply(spec *remediationv1alpha1.NodeHealthCheckSpec) {
	spec.RemediationTemplate, spec.EscalatingRemediations = nil, nil
	if c.Single != "" {
		ref := templateRef(c.Single)
		spec.RemediationTemplate = &ref
		return
	}
	spec.EscalatingRemediations = append([]remediationv1alpha1.EscalatingRemediation(nil), c.Steps...)
}

func conditions(falseFor, unknownFor time.Duration) []remediationv1alpha1.UnhealthyCondition {
	return []remediationv1alpha1.UnhealthyCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Duration: metav1.Duration{Duration: falseFor}},
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Duration: metav1.Duration{Duration: unknownFor}},
	}
}

// initialState is the world at step 0, at fake time now.
func initialState(now time.Time) *state {
	s := &state{Now: now, Nodes: map[string]node{}, NHCs: map[string]*nhc{}}
	healthy := func(name, pool string, cp bool) {
		s.Nodes[name] = node{Name: name, Exists: true, ControlPlane: cp, Pool: pool, Ready: corev1.ConditionTrue, Since: now.Add(-time.Hour),
			Written: now.Add(-time.Hour), SeenBy: now.Add(-time.Hour), Machine: machineOf(name)}
	}
	for i := 1; i <= 10; i++ {
		pool := "a"
		switch {
		case i >= 7 && i <= 9:
			pool = "b"
		case i == 10:
			pool = ""
		}
		healthy(fmt.Sprintf("w%02d", i), pool, false)
	}
	healthy("cp1", "", true)
	healthy("cp2", "", true)
	healthy("cp3", "b", true)
	// w06's kubelet is compromised from the start: its node claims cp1's control-plane Machine.
	w06 := s.Nodes["w06"]
	w06.Machine = machineOf("cp1")
	s.Nodes["w06"] = w06

	minHealthy60, maxUnhealthy50, minHealthy1 := intstr.FromString("60%"), intstr.FromString("50%"), intstr.FromInt32(1)
	add := func(name string, config int, spec remediationv1alpha1.NodeHealthCheckSpec) {
		templateConfigs[config].apply(&spec)
		s.NHCs[name] = &nhc{Name: name, Spec: spec, Config: config}
	}
	add("workers", 3, remediationv1alpha1.NodeHealthCheckSpec{
		Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: controlPlaneLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: poolLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
		}},
		UnhealthyConditions: conditions(30*time.Second, 30*time.Second),
		MinHealthy:          &minHealthy60,
		// Two remediations per node a day: a node that fails a third time waits (or its reset).
		RepairBudget: &remediationv1alpha1.RepairBudget{MaxRemediations: 2, Window: metav1.Duration{Duration: 24 * time.Hour}},
		// Nodes being removed wait, for at most the removal hold (pool-b and control-plane remediate them).
		SkipNodesBeingRemoved: true,
		// A node's request-remediation annotation asks for its remediation (refused elsewhere).
		AllowRemediationRequests: true,
	})
	add("pool-b", 0, remediationv1alpha1.NodeHealthCheckSpec{
		Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: poolLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}},
		}},
		UnhealthyConditions: conditions(30*time.Second, 60*time.Second),
		MaxUnhealthy:        &maxUnhealthy50,
		HealthyDelay:        &metav1.Duration{Duration: time.Minute},
	})
	add("control-plane", 1, remediationv1alpha1.NodeHealthCheckSpec{
		Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: controlPlaneLabel, Operator: metav1.LabelSelectorOpExists},
		}},
		UnhealthyConditions: conditions(30*time.Second, 30*time.Second),
		MinHealthy:          &minHealthy1,
	})
	return s
}

// namesAfterNode reports whether the template's CRs are named after their node (a remediator
// without multiple-templates support): two such templates of one kind need the same name.
func namesAfterNode(template string) bool { return template != "esc-1" && template != "esc-2" }

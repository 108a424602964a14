package targets

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

type noTemplates struct{ got []client.ObjectKey }

func (n *noTemplates) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	n.got = append(n.got, key)
	return nil
}

// A template of the core group (PodTemplate) would make Pods the remediation CRs: the spec is
// disabled without reading it, and its kind is never listed or watched.
func TestCoreGroupTemplateDisables(t *testing.T) {
	spec := remediationv1alpha1.NodeHealthCheckSpec{RemediationTemplate: &corev1.ObjectReference{
		APIVersion: "v1", Kind: "PodTemplate", Namespace: "default", Name: "reboot"}}
	getter := &noTemplates{}
	problem, err := CheckTemplates(context.Background(), getter, &spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if problem == nil || problem.Reason != remediationv1alpha1.ConditionReasonDisabledTemplateInvalid {
		t.Fatalf("problem = %+v, want reason %s", problem, remediationv1alpha1.ConditionReasonDisabledTemplateInvalid)
	}
	if len(getter.got) != 0 {
		t.Errorf("read %v", getter.got)
	}
	nhc := &remediationv1alpha1.NodeHealthCheck{Spec: spec}
	if kinds := RemediationKinds(nhc); len(kinds) != 0 {
		t.Errorf("RemediationKinds = %v, want none", kinds)
	}
}

// On OpenShift a Metal3RemediationTemplate outside openshift-machine-api disables, as the public
// operator's check does; elsewhere (Cluster API with Metal3) any namespace is fine.
func TestMetal3TemplateNamespaceOnOpenShift(t *testing.T) {
	spec := remediationv1alpha1.NodeHealthCheckSpec{RemediationTemplate: &corev1.ObjectReference{
		APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: Metal3TemplateKind, Namespace: "default", Name: "metal3"}}
	problem, err := CheckTemplates(context.Background(), &noTemplates{}, &spec, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "Metal3RemediationTemplate must be in the openshift-machine-api namespace. It is configured to be in namespace: default"
	if problem == nil || problem.Reason != remediationv1alpha1.ConditionReasonDisabledTemplateInvalid || problem.Message != want {
		t.Fatalf("on OpenShift: %+v, want %s: %q", problem, remediationv1alpha1.ConditionReasonDisabledTemplateInvalid, want)
	}

	spec.RemediationTemplate.Namespace = MachineAPINamespace
	if problem, err := CheckTemplates(context.Background(), &withSpecTemplate{}, &spec, true); err != nil || problem != nil {
		t.Errorf("in %s: %+v, %v; want no problem", MachineAPINamespace, problem, err)
	}
	spec.RemediationTemplate.Namespace = "default"
	if problem, err := CheckTemplates(context.Background(), &withSpecTemplate{}, &spec, false); err != nil || problem != nil {
		t.Errorf("not OpenShift: %+v, %v; want no problem", problem, err)
	}
}

// withSpecTemplate reads every template as a valid one.
type withSpecTemplate struct{}

func (withSpecTemplate) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	u := obj.(*unstructured.Unstructured)
	return unstructured.SetNestedMap(u.Object, map[string]any{"spec": map[string]any{}}, "spec", "template")
}

// strategyTemplates reads every template with spec.template.spec.strategy set to strategy.
type strategyTemplates struct{ strategy string }

func (s *strategyTemplates) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	u := obj.(*unstructured.Unstructured)
	return unstructured.SetNestedMap(u.Object, map[string]any{"spec": map[string]any{"strategy": s.strategy}}, "spec", "template")
}

// TestTemplateAsRead checks that a snapshot hands out its templates as it read them, whatever the
// cluster holds since, and a copy each time: the CR a decision asks for is built from the template
// the decision saw (the remediation controller's create reads none).
func TestTemplateAsRead(t *testing.T) {
	getter := &strategyTemplates{strategy: "reboot"}
	r := testReading(t, nil)
	var err error
	if r.templates, r.templateProblem, err = readTemplates(context.Background(), getter, &r.nhc.Spec, false); err != nil || r.templateProblem != nil {
		t.Fatalf("reading: %v, %+v", err, r.templateProblem)
	}
	s, _ := assemble(r, Acting, 0)
	getter.strategy = "power-off" // the template changes after the snapshot was read
	ref := r.nhc.Spec.TemplateRefs()[0]
	strategy := func() string {
		tmpl, ok := s.Template(ref)
		if !ok {
			t.Fatalf("template %v not in the snapshot", ref)
		}
		v, _, _ := unstructured.NestedString(tmpl.Object, "spec", "template", "spec", "strategy")
		tmpl.Object["spec"] = nil // a caller's change stays its own
		return v
	}
	if got := strategy(); got != "reboot" {
		t.Errorf("strategy %q, want the one read, reboot", got)
	}
	if got := strategy(); got != "reboot" {
		t.Errorf("strategy %q after a caller changed its copy, want reboot", got)
	}
	other := ref
	other.Name = "not-referenced"
	if _, ok := s.Template(other); ok {
		t.Error("a template the spec does not reference is in the snapshot")
	}
	if _, ok := assembleWithout(t).Template(ref); ok {
		t.Error("a snapshot that read no templates hands one out")
	}
}

func assembleWithout(t *testing.T) *Snapshot {
	s, _ := assemble(testReading(t, nil), Acting, 0)
	return s
}

// The kinds of a NodeHealthCheck the cache holds are computed once per resourceVersion (the cache
// replaces an object to change it), and forgotten once the NodeHealthCheck is gone.
func TestKindsOfAreKeptPerResourceVersion(t *testing.T) {
	g := &Gatherer{}
	nhc := testutil.NewNHC("nhc")
	nhc.UID, nhc.ResourceVersion = "uid-nhc", "1"
	template := RemediationKinds(nhc)[0]
	listed := remediationv1alpha1.UnhealthyNode{Name: "w1", Remediations: []remediationv1alpha1.Remediation{{Resource: corev1.ObjectReference{
		APIVersion: "other.medik8s.io/v1", Kind: "OtherRemediation", Name: "w1"}}}}
	other := schema.GroupVersionKind{Group: "other.medik8s.io", Version: "v1", Kind: "OtherRemediation"}
	nhcs := []*remediationv1alpha1.NodeHealthCheck{nhc}
	if got := g.kindsOf(nhc, nhcs); !slices.Equal(got, []schema.GroupVersionKind{template}) {
		t.Fatalf("kinds %v, want %v", got, template)
	}
	changed := nhc.DeepCopy()
	changed.Status.UnhealthyNodes = []remediationv1alpha1.UnhealthyNode{listed}
	if got := g.kindsOf(changed, nhcs); !slices.Equal(got, []schema.GroupVersionKind{template}) {
		t.Fatalf("kinds at the same resourceVersion %v, want those computed for it (%v)", got, template)
	}
	changed.ResourceVersion = "2"
	if got := g.kindsOf(changed, nhcs); !slices.Equal(got, []schema.GroupVersionKind{template, other}) {
		t.Fatalf("kinds at a new resourceVersion %v, want %v and %v", got, template, other)
	}
	for i := range 40 { // NodeHealthChecks created and deleted one after another
		gone := testutil.NewNHC(fmt.Sprintf("gone-%d", i))
		gone.UID, gone.ResourceVersion = types.UID(gone.Name), "1"
		g.kindsOf(gone, []*remediationv1alpha1.NodeHealthCheck{changed, gone})
	}
	held := 0
	g.kindMemo.byNHC.Range(func(_, _ any) bool { held++; return true })
	if held > 2*2+16 {
		t.Fatalf("the kinds of %d NodeHealthChecks held; the gone ones should have been forgotten", held)
	}
}

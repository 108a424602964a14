package remediationcr

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

func metal3Template() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
		"kind":       "Metal3RemediationTemplate",
		"metadata":   map[string]any{"name": "metal3", "namespace": "openshift-machine-api"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"strategy": map[string]any{"type": "Reboot", "retryLimit": int64(1), "timeout": "300s"},
		}}},
	}}
}

func owner() *remediationv1alpha1.NodeHealthCheck {
	return &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "nhc", UID: "uid-1"}}
}

func TestBuildFollowsTheTemplateContract(t *testing.T) {
	tmpl := metal3Template()
	machine := Machine{Owner: &metav1.OwnerReference{APIVersion: "machine.openshift.io/v1beta1", Kind: "Machine", Name: "m-1", UID: "m-uid"}}
	cr, err := Build(tmpl, owner(), nodeNamed("worker-1"), machine)
	if err != nil {
		t.Fatal(err)
	}
	if cr.GetAPIVersion() != "infrastructure.cluster.x-k8s.io/v1beta1" || cr.GetKind() != "Metal3Remediation" ||
		cr.GetNamespace() != "openshift-machine-api" || cr.GetName() != "worker-1" || cr.GetGenerateName() != "" {
		t.Errorf("identity: %s %s %s/%s", cr.GetAPIVersion(), cr.GetKind(), cr.GetNamespace(), cr.GetName())
	}
	want := map[string]any{"strategy": map[string]any{"type": "Reboot", "retryLimit": int64(1), "timeout": "300s"}}
	if !equality.Semantic.DeepEqual(cr.Object["spec"], want) {
		t.Errorf("spec %v, want %v", cr.Object["spec"], want)
	}
	if a := cr.GetAnnotations(); a[remediationv1alpha1.NodeNameAnnotation] != "worker-1" || a[remediationv1alpha1.TemplateNameAnnotation] != "metal3" {
		t.Errorf("annotations %v", a)
	}
	refs := cr.GetOwnerReferences()
	// A plain owner reference to the NodeHealthCheck, as the public operator sets it: the controller
	// reference is the remediator's to take.
	if len(refs) != 2 || refs[0].UID != "uid-1" || refs[0].Controller == nil || *refs[0].Controller || refs[0].BlockOwnerDeletion != nil || refs[1].UID != "m-uid" {
		t.Errorf("owner references %+v", refs)
	}
	if l := cr.GetLabels(); len(l) != 1 || l[remediationv1alpha1.PartOfLabel] != remediationv1alpha1.PartOfValue {
		t.Errorf("labels %v, want only %s=%s", l, remediationv1alpha1.PartOfLabel, remediationv1alpha1.PartOfValue)
	}
	// The CR's spec is a copy: changing it leaves the template alone.
	cr.Object["spec"].(map[string]any)["strategy"].(map[string]any)["type"] = "changed"
	if s, _, _ := unstructured.NestedString(tmpl.Object, "spec", "template", "spec", "strategy", "type"); s != "Reboot" {
		t.Error("the template was modified through the CR")
	}
	if NodeName(cr) != "worker-1" {
		t.Error("NodeName")
	}
	if name, uid, ok := ControllerNHC(cr); !ok || name != "nhc" || uid != "uid-1" {
		t.Error("ControllerNHC")
	}
}

func nodeNamed(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// A control-plane node's CR is labelled as the public operator labels it, so the
// one-control-plane-node rule counts it (also the public operator's, during a migration).
func TestBuildLabelsControlPlaneCRs(t *testing.T) {
	for _, label := range []string{ControlPlaneRoleLabel, MasterRoleLabel} {
		node := nodeNamed("cp-1")
		node.Labels = map[string]string{label: ""}
		cr, err := Build(metal3Template(), owner(), node, Machine{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := cr.GetLabels()[remediationv1alpha1.ControlPlaneCRLabel]; !ok || v != "" {
			t.Errorf("%s: labels %v, want %s=\"\"", label, cr.GetLabels(), remediationv1alpha1.ControlPlaneCRLabel)
		}
		if cr.GetLabels()[remediationv1alpha1.PartOfLabel] != remediationv1alpha1.PartOfValue {
			t.Errorf("%s: labels %v", label, cr.GetLabels())
		}
	}
}

// A worker-labelled node whose verified Machine is a control-plane Machine gets a control-plane CR:
// the one-control-plane-node rule counts it, across NodeHealthChecks.
func TestBuildLabelsCRsOfControlPlaneMachines(t *testing.T) {
	node := nodeNamed("cp-1")
	node.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
	for _, tc := range []struct {
		machine Machine
		want    bool
	}{
		{Machine{}, false},
		{Machine{Owner: &metav1.OwnerReference{Kind: "Machine", Name: "m"}}, false},
		{Machine{ControlPlane: true}, true}, // a Machine in another namespace: no owner, the role counts
		{Machine{Owner: &metav1.OwnerReference{Kind: "Machine", Name: "m"}, ControlPlane: true}, true},
	} {
		cr, err := Build(metal3Template(), owner(), node, tc.machine)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := cr.GetLabels()[remediationv1alpha1.ControlPlaneCRLabel]; got != tc.want {
			t.Errorf("%+v: labels %v, want the control-plane label: %v", tc.machine, cr.GetLabels(), tc.want)
		}
		wantRefs := 1 // the NodeHealthCheck
		if tc.machine.Owner != nil {
			wantRefs = 2
		}
		if got := len(cr.GetOwnerReferences()); got != wantRefs {
			t.Errorf("%+v: owner references %v", tc.machine, cr.GetOwnerReferences())
		}
	}
}

func TestBuildWithMultipleTemplatesSupportGeneratesNames(t *testing.T) {
	tmpl := metal3Template()
	tmpl.SetAnnotations(map[string]string{remediationv1alpha1.MultipleTemplatesSupportAnnotation: "true"})
	cr, err := Build(tmpl, owner(), nodeNamed("worker-1"), Machine{})
	if err != nil {
		t.Fatal(err)
	}
	if cr.GetName() != "" || cr.GetGenerateName() != "worker-1-" || NodeName(cr) != "worker-1" || len(cr.GetOwnerReferences()) != 1 {
		t.Errorf("name %q generateName %q refs %v", cr.GetName(), cr.GetGenerateName(), cr.GetOwnerReferences())
	}
}

func TestBuildEmptyInnerSpec(t *testing.T) {
	tmpl := metal3Template()
	_ = unstructured.SetNestedMap(tmpl.Object, map[string]any{"spec": map[string]any{}}, "spec", "template")
	cr, err := Build(tmpl, owner(), nodeNamed("n"), Machine{})
	if err != nil || len(cr.Object["spec"].(map[string]any)) != 0 {
		t.Fatalf("cr %v err %v", cr, err)
	}
}

func TestBuildRefusesBrokenTemplates(t *testing.T) {
	noTemplate := metal3Template()
	unstructured.RemoveNestedField(noTemplate.Object, "spec", "template")
	badKind := metal3Template()
	badKind.SetKind("Metal3Remediation")
	stringSpec := metal3Template()
	_ = unstructured.SetNestedField(stringSpec.Object, "reboot", "spec", "template", "spec")
	stringTemplate := metal3Template()
	_ = unstructured.SetNestedField(stringTemplate.Object, "reboot", "spec", "template")
	for name, tmpl := range map[string]*unstructured.Unstructured{"no spec.template": noTemplate, "kind without suffix": badKind,
		"spec.template.spec a string": stringSpec, "spec.template a string": stringTemplate} {
		if _, err := Build(tmpl, owner(), nodeNamed("n"), Machine{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestCondition(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Succeeded", "status": "False"},
	}}}}
	if Condition(cr, "Succeeded") != metav1.ConditionFalse || Condition(cr, "Other") != "" {
		t.Error("Condition")
	}
}

// TestBuildForLongNodeNames: a node name of 253 characters still gives a CR the API server accepts:
// its own name for plain templates, a cut generateName prefix for templates with generated names.
func TestBuildForLongNodeNames(t *testing.T) {
	node := strings.Repeat("a", 120) + "." + strings.Repeat("b", 132)
	if len(node) != 253 {
		t.Fatalf("node name of %d characters", len(node))
	}
	cr, err := Build(metal3Template(), owner(), nodeNamed(node), Machine{})
	if err != nil || cr.GetName() != node {
		t.Fatalf("name %q err %v", cr.GetName(), err)
	}
	multi := metal3Template()
	multi.SetAnnotations(map[string]string{remediationv1alpha1.MultipleTemplatesSupportAnnotation: "true"})
	cr, err = Build(multi, owner(), nodeNamed(node), Machine{})
	if err != nil {
		t.Fatal(err)
	}
	prefix := cr.GetGenerateName()
	if len(prefix) > 248 || !strings.HasSuffix(prefix, "-") || !strings.HasPrefix(node, strings.TrimSuffix(prefix, "-")) {
		t.Fatalf("generateName %q (%d characters)", prefix, len(prefix))
	}
	if errs := validation.IsDNS1123Subdomain(prefix + "x2k4z"); len(errs) > 0 {
		t.Fatalf("generated name invalid: %v", errs)
	}
	if NodeName(cr) != node {
		t.Fatalf("node name annotation %q", NodeName(cr))
	}
	// A cut that ends in a dot drops it.
	dotted := strings.Repeat("a", 246) + ".bbbbbb"
	if p := generateNamePrefix(dotted); strings.Contains(p, ".-") || len(p) > 248 {
		t.Fatalf("prefix %q", p)
	}
}

// The in-place readers of unstructured CRs answer as the copying getters do.
func TestInPlaceReadersAgreeWithGetters(t *testing.T) {
	built, err := Build(metal3Template(), owner(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{ControlPlaneRoleLabel: ""}}}, Machine{})
	if err != nil {
		t.Fatal(err)
	}
	other := built.DeepCopy()
	other.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Machine", Name: "m", UID: "uid-m"}})
	other.SetAnnotations(nil)
	other.SetLabels(map[string]string{"a": "b"})
	broken := built.DeepCopy()
	broken.Object["metadata"].(map[string]any)["annotations"] = "not a map"
	broken.Object["metadata"].(map[string]any)["ownerReferences"] = []any{"not a map"}
	for _, cr := range []*unstructured.Unstructured{built, other, broken, {Object: map[string]any{}}} {
		typed := &metav1.ObjectMeta{Labels: cr.GetLabels(), Annotations: cr.GetAnnotations(), OwnerReferences: cr.GetOwnerReferences(), Name: cr.GetName()}
		for _, key := range []string{remediationv1alpha1.NodeNameAnnotation, remediationv1alpha1.TemplateNameAnnotation, "missing"} {
			v, ok := Annotation(cr, key)
			if want, wantOK := cr.GetAnnotations()[key]; v != want || ok != wantOK {
				t.Errorf("Annotation(%q) = %q, %v; GetAnnotations has %q, %v", key, v, ok, want, wantOK)
			}
			if tv, tok := Annotation(typed, key); tv != v || tok != ok {
				t.Errorf("Annotation(%q) of the typed object = %q, %v; of the unstructured %q, %v", key, tv, tok, v, ok)
			}
		}
		for _, key := range []string{remediationv1alpha1.ControlPlaneCRLabel, "a", "missing"} {
			v, ok := Label(cr, key)
			if want, wantOK := cr.GetLabels()[key]; v != want || ok != wantOK {
				t.Errorf("Label(%q) = %q, %v; GetLabels has %q, %v", key, v, ok, want, wantOK)
			}
		}
		name, uid, ok := ControllerNHC(cr)
		tname, tuid, tok := ControllerNHC(typed)
		if name != tname || uid != tuid || ok != tok {
			t.Errorf("ControllerNHC = %q %q %v in place, %q %q %v from GetOwnerReferences", name, uid, ok, tname, tuid, tok)
		}
	}
	if name, uid, ok := ControllerNHC(built); name != "nhc" || uid != "uid-1" || !ok {
		t.Errorf("ControllerNHC(built) = %q %q %v, want nhc uid-1", name, uid, ok)
	}
	if _, ok := Label(built, remediationv1alpha1.ControlPlaneCRLabel); !ok {
		t.Error("a control-plane node's CR has no isControlPlaneNode label")
	}
}

func TestTemplateSpec(t *testing.T) {
	withInner := func(inner any) *unstructured.Unstructured {
		tmpl := metal3Template()
		tmpl.Object["spec"] = map[string]any{"template": map[string]any{"spec": inner}}
		return tmpl
	}
	noInner := metal3Template()
	noInner.Object["spec"] = map[string]any{"template": map[string]any{}}
	tests := []struct {
		name string
		tmpl *unstructured.Unstructured
		want map[string]any
		err  string
	}{
		{name: "an object", tmpl: withInner(map[string]any{"strategy": "reboot"}), want: map[string]any{"strategy": "reboot"}},
		{name: "none", tmpl: noInner, want: map[string]any{}},
		{name: "null", tmpl: withInner(nil), want: map[string]any{}},
		{name: "a string", tmpl: withInner("reboot"), err: "spec.template.spec of type string, not an object"},
		{name: "a list", tmpl: withInner([]any{"reboot"}), err: "spec.template.spec of type []interface {}, not an object"},
	}
	for _, tt := range tests {
		got, err := TemplateSpec(tt.tmpl)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), tt.tmpl.GetName()) {
				t.Errorf("%s: error %v, want one naming the template and %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

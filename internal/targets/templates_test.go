package targets

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
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
	problem, err := CheckTemplates(context.Background(), getter, &spec)
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

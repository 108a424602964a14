package testutil

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// TemplateNamespace is where test remediation templates live.
const TemplateNamespace = "default"

// TestTemplateRef references a namespaced TestRemediationTemplate.
func TestTemplateRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: "test.medik8s.io/v1alpha1",
		Kind:       "TestRemediationTemplate",
		Namespace:  TemplateNamespace,
		Name:       name,
	}
}

// WorkerSelector selects nodes that are neither control-plane nor master, as the reference docs do.
func WorkerSelector() metav1.LabelSelector {
	return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "node-role.kubernetes.io/control-plane", Operator: metav1.LabelSelectorOpDoesNotExist},
		{Key: "node-role.kubernetes.io/master", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
}

// NewNHC returns a valid NodeHealthCheck with a worker selector, one TestRemediationTemplate,
// minHealthy 51% and the default unhealthy conditions.
func NewNHC(name string) *remediationv1alpha1.NodeHealthCheck {
	mh := intstr.FromString("51%")
	return &remediationv1alpha1.NodeHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: remediationv1alpha1.NodeHealthCheckSpec{
			Selector:            WorkerSelector(),
			RemediationTemplate: TestTemplateRef("test-template"),
			MinHealthy:          &mh,
			UnhealthyConditions: remediationv1alpha1.DefaultUnhealthyConditions(),
		},
	}
}

// Step returns an escalation step for a TestRemediationTemplate.
func Step(template string, order int, timeout time.Duration) remediationv1alpha1.EscalatingRemediation {
	return remediationv1alpha1.EscalatingRemediation{
		RemediationTemplate: *TestTemplateRef(template),
		Order:               order,
		Timeout:             metav1.Duration{Duration: timeout},
	}
}

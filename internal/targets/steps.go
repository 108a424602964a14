package targets

import (
	corev1 "k8s.io/api/core/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// Steps returns the spec's remediation steps: the escalation steps, or the single template, which
// never times out.
func Steps(spec *remediationv1alpha1.NodeHealthCheckSpec) []health.Step {
	if spec.RemediationTemplate != nil {
		return []health.Step{{StepKey: health.StepKey{TemplateKind: spec.RemediationTemplate.Kind, TemplateName: spec.RemediationTemplate.Name}}}
	}
	steps := make([]health.Step, 0, len(spec.EscalatingRemediations))
	for _, e := range spec.EscalatingRemediations {
		steps = append(steps, health.Step{StepKey: health.StepKey{TemplateKind: e.RemediationTemplate.Kind, TemplateName: e.RemediationTemplate.Name},
			Order: e.Order, Timeout: e.Timeout.Duration})
	}
	return steps
}

// TemplateRef returns the template reference of a step, and whether the spec has it.
func TemplateRef(spec *remediationv1alpha1.NodeHealthCheckSpec, step health.StepKey) (corev1.ObjectReference, bool) {
	for _, ref := range spec.TemplateRefs() {
		if ref.Kind == step.TemplateKind && ref.Name == step.TemplateName {
			return ref, true
		}
	}
	return corev1.ObjectReference{}, false
}

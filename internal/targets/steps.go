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
		return []health.Step{{StepKey: stepKey(*spec.RemediationTemplate), Template: *spec.RemediationTemplate}}
	}
	steps := make([]health.Step, 0, len(spec.EscalatingRemediations))
	for _, e := range spec.EscalatingRemediations {
		steps = append(steps, health.Step{StepKey: stepKey(e.RemediationTemplate), Template: e.RemediationTemplate, Order: e.Order, Timeout: e.Timeout.Duration})
	}
	return steps
}

func stepKey(ref corev1.ObjectReference) health.StepKey {
	return health.StepKey{TemplateKind: ref.Kind, TemplateName: ref.Name}
}

package targets

import (
	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// Dry-run (spec.dryRun): the NodeHealthCheck decides as when active but creates no CR. The
// remediations it would have created are recorded in status (unhealthyNodes[].dryRunRemediations)
// and stand in for CRs in its later decisions: a node with one counts as remediating (the
// healthy-node budget), and its escalation steps time out as the CRs' would. Only the nhc
// controller, which writes status, advances them (nhc's nextSimulated); the remediation controller
// leaves a dry-run NodeHealthCheck's nodes without real CRs alone.

// DryRun reports whether the NodeHealthCheck only observes (spec.dryRun).
func (s *Snapshot) DryRun() bool { return s.NHC.Spec.DryRun }

// Simulated returns the remediations the stored status records for the node as a dry-run
// NodeHealthCheck's; nil when dry-run is off.
func (s *Snapshot) Simulated(node string) []remediationv1alpha1.DryRunRemediation {
	if !s.DryRun() {
		return nil
	}
	for i := range s.Stored.Status.UnhealthyNodes {
		if u := &s.Stored.Status.UnhealthyNodes[i]; u.Name == node {
			return u.DryRunRemediations
		}
	}
	return nil
}

// simulatedStepCRs returns simulated remediations as escalation sees CRs.
func simulatedStepCRs(sim []remediationv1alpha1.DryRunRemediation) []health.StepCR {
	if len(sim) == 0 {
		return nil
	}
	crs := make([]health.StepCR, len(sim))
	for i, r := range sim {
		crs[i] = health.StepCR{StepKey: health.StepKey{TemplateKind: r.Template.Kind, TemplateName: r.Template.Name}, Created: r.Started.Time}
		if r.TimedOut != nil {
			crs[i].TimedOut, crs[i].TimedOutAt = true, r.TimedOut.Time
		}
	}
	return crs
}

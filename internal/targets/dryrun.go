package targets

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// Dry-run (spec.dryRun): the NodeHealthCheck decides as when active but creates no CR. The
// remediations it would have created are recorded in status (unhealthyNodes[].dryRunRemediations)
// and stand in for CRs in its later decisions: a node with one counts as remediating (the
// healthy-node budget), and its escalation steps time out as the CRs' would. Only the nhc
// controller, which writes status, advances them (NextSimulated); the remediation controller
// leaves a dry-run NodeHealthCheck's nodes without real CRs alone.

// KeepsOrphans reports whether the CRs of nodes the NodeHealthCheck does not select (Orphans) are
// left alone now: while it is paused (spec.pauseRequests), as the public operator leaves them, and
// while its selector does not parse (it selects nothing, so every node would look unselected).
func (s *Snapshot) KeepsOrphans() bool { return len(s.NHC.Spec.PauseRequests) > 0 || s.badSelector }

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

// NextSimulated returns the node's simulated remediations after the decision, as the active
// NodeHealthCheck's CRs would be after it acted: a start adds the first step, a running
// remediation escalates (timing out the step and adding the next), a healthy delay keeps them, a
// recovery ends them. Nil when dry-run is off or the node has real CRs (created before dry-run).
func (s *Snapshot) NextSimulated(d health.NodeDecision) []remediationv1alpha1.DryRunRemediation {
	if !s.DryRun() || len(s.CRs[d.Name]) > 0 {
		return nil
	}
	old := s.Simulated(d.Name)
	now := metav1.Time{Time: s.Now}
	switch d.Action {
	case health.StartRemediation:
		if d.Step == nil {
			return nil
		}
		return []remediationv1alpha1.DryRunRemediation{{Template: d.Step.Template, Started: now}}
	case health.ContinueRemediation:
		if len(old) == 0 {
			return nil
		}
		// The decision's escalation over the simulated steps: held as an active one's would be.
		e := d.Escalation
		out := slices.Clone(old)
		for _, i := range e.TimeOut {
			out[i].TimedOut = &now
		}
		if e.Next != nil {
			out = append(out, remediationv1alpha1.DryRunRemediation{Template: e.Next.Template, Started: now})
		}
		return out
	case health.HealthyDelayed:
		return old
	}
	return nil
}

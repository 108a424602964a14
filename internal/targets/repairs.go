package targets

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// The repair budget (spec.repairBudget) counts when each node's remediations started. A start is
// the creation of the first CR of a remediation (escalation steps are the same remediation), or,
// for a dry-run NodeHealthCheck, of its first simulated step. The nhc controller records the real
// ones in status.remediationHistory and the simulated ones apart, in
// status.dryRunRemediationHistory (RepairHistory, DryRunRepairHistory); a decision counts the
// recorded ones and the running remediation's, so a start counts before it is recorded. A dry-run
// NodeHealthCheck counts both, as the active one would have; an active one only the real ones, so
// turning dry-run off never spends the real budget on remediations that did not happen.

// repairBudget returns the spec's repair budget for decisions (nil: none).
func repairBudget(spec *remediationv1alpha1.NodeHealthCheckSpec) *health.RepairBudget {
	if spec.RepairBudget == nil {
		return nil
	}
	return &health.RepairBudget{Max: spec.RepairBudget.MaxRemediations, Window: spec.RepairBudget.Window.Duration}
}

// repairStarts returns the node's real and simulated remediation starts the budget counts, each
// oldest first: those recorded in status and the running remediation's, after the node's reset
// annotation, within the window. Simulated starts are only a dry-run NodeHealthCheck's.
func (s *Snapshot) repairStarts(n *corev1.Node) (real, simulated []time.Time) {
	b := repairBudget(&s.NHC.Spec)
	if b == nil {
		return nil, nil
	}
	reset, hasReset := s.repairReset(n)
	counted := func(history []remediationv1alpha1.NodeRemediationHistory, running time.Time) []time.Time {
		var starts []time.Time
		for _, h := range history {
			if h.Name == n.Name {
				for _, t := range h.Started {
					starts = append(starts, t.Time)
				}
			}
		}
		if !running.IsZero() && !slices.ContainsFunc(starts, running.Equal) {
			starts = append(starts, running)
		}
		if hasReset {
			starts = slices.DeleteFunc(starts, func(t time.Time) bool { return !t.After(reset) })
		}
		return b.Counted(starts, s.Now)
	}
	real = counted(s.Stored.Status.RemediationHistory, s.runningSince(n.Name))
	if s.DryRun() {
		var sim time.Time
		if len(s.CRs[n.Name]) == 0 {
			if steps := s.Simulated(n.Name); len(steps) > 0 {
				sim = steps[0].Started.Time
			}
		}
		simulated = counted(s.Stored.Status.DryRunRemediationHistory, sim)
	}
	return real, simulated
}

// repairReset returns the time in the node's repair-budget-reset annotation: starts up to it are not
// counted. A value that is not an RFC 3339 time is ignored and reported (InvalidRepairBudgetResets).
func (s *Snapshot) repairReset(n *corev1.Node) (time.Time, bool) {
	v, ok := n.Annotations[remediationv1alpha1.RepairBudgetResetAnnotation]
	if !ok {
		return time.Time{}, false
	}
	reset, err := time.Parse(time.RFC3339, v)
	if err != nil {
		if s.invalidResets == nil {
			s.invalidResets = map[string]string{}
		}
		s.invalidResets[n.Name] = v
		return time.Time{}, false
	}
	return reset, true
}

// InvalidRepairBudgetResets returns, by node, the values of repair-budget-reset annotations that
// are not RFC 3339 times (ignored by the budget), for the selected nodes a repair budget counts.
func (s *Snapshot) InvalidRepairBudgetResets() map[string]string { return s.invalidResets }

// runningSince returns when the node's running remediation started: its oldest CR's creation
// (zero: none).
func (s *Snapshot) runningSince(node string) time.Time {
	var since time.Time
	for _, cr := range s.CRs[node] {
		if t := cr.GetCreationTimestamp().Time; since.IsZero() || t.Before(since) {
			since = t
		}
	}
	return since
}

// RepairStarts returns, by selected node, the remediation starts the decision counted for the repair
// budget: real and (for a dry-run NodeHealthCheck) simulated ones, each oldest first, with the
// simulated starts this decision makes (nil maps without a repair budget). Status records them.
func (s *Snapshot) RepairStarts() (real, simulated map[string][]time.Time) {
	return s.realRepairs, s.simulatedRepairs
}

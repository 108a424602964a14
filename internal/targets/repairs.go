package targets

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/nodeinput"
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
// counted. Whoever may patch the Node can write it (its kubelet too, NodeRestriction does not limit
// annotations): it is parsed once and bounded. A value that is not an RFC 3339 time is refused, and
// so is one dated after now beyond the skew bound (it would turn the budget off until that date);
// one dated a moment ahead, within the bound, takes effect at its time. Refusals are reported
// (RefusedInputs).
func (s *Snapshot) repairReset(n *corev1.Node) (time.Time, bool) {
	v, ok := n.Annotations[remediationv1alpha1.RepairBudgetResetAnnotation]
	if !ok {
		return time.Time{}, false
	}
	reset, err := nodeinput.Time(v)
	switch {
	case err != nil:
		s.refuse(n.Name, remediationv1alpha1.RepairBudgetResetAnnotation, v, RefusedNotATime, "is %v (for example %s)", err, s.Now.UTC().Format(time.RFC3339))
		return time.Time{}, false
	case reset.After(s.Now.Add(s.FutureBound())):
		s.refuse(n.Name, remediationv1alpha1.RepairBudgetResetAnnotation, v, RefusedFuture,
			"is dated %s, more than %s (the clock-skew bound) after the operator's time %s (a reset dated ahead would turn the budget off until then)",
			reset.UTC().Format(time.RFC3339), s.FutureBound(), s.Now.UTC().Format(time.RFC3339))
		return time.Time{}, false
	case reset.After(s.Now):
		s.inputDue = health.Earliest(s.inputDue, reset)
		return time.Time{}, false
	}
	return reset, true
}

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

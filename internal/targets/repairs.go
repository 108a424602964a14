package targets

import (
	"fmt"
	"slices"
	"strings"
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

// The repair budget's reset: an administrator who repaired a node stops counting its earlier
// remediations. It is read from the NodeHealthCheck (RepairBudgetResetAnnotation), which nodes cannot
// write: the same annotation on the Node is refused, since a node's kubelet may write any annotation
// on its own Node and would clear its own history (then a node that claims to be down would be
// remediated without end, taking maxInFlight slots from nodes that are).

// budgetResets are the resets the NodeHealthCheck's annotation gives, parsed once per snapshot.
type budgetResets struct {
	// all is a reset for every node (zero: none); byNode the resets of named nodes.
	all    time.Time
	byNode map[string]time.Time
	// refused says, for each entry it ignores, why (events on the NodeHealthCheck).
	refused []string
}

// maxResetEntries bounds how many entries of the annotation are read: far more than the nodes an
// administrator repairs at once.
const maxResetEntries = 1000

// resets parses the NodeHealthCheck's repair-budget-reset annotation, once.
func (s *Snapshot) resets() *budgetResets {
	if s.budgetResets != nil {
		return s.budgetResets
	}
	r := &budgetResets{}
	s.budgetResets = r
	v, ok := s.Stored.Annotations[remediationv1alpha1.RepairBudgetResetAnnotation]
	if !ok {
		return r
	}
	entries := strings.FieldsFunc(v, func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\t' })
	if len(entries) > maxResetEntries {
		r.refused = append(r.refused, fmt.Sprintf("only its first %d of %d entries are read", maxResetEntries, len(entries)))
		entries = entries[:maxResetEntries]
	}
	for _, e := range entries {
		node, value, named := strings.Cut(e, "=")
		if !named {
			node, value = "", e
		}
		at, err := nodeinput.Time(value)
		switch {
		case err != nil:
			r.refused = append(r.refused, fmt.Sprintf("entry %s is %v (want <node>=<time> or <time>, for example %s)", nodeinput.Quote(e), err, s.Now.UTC().Format(time.RFC3339)))
			continue
		case at.After(s.Now.Add(s.FutureBound())):
			r.refused = append(r.refused, fmt.Sprintf("entry %s is dated more than %s (the clock-skew bound) after the operator's time %s (a reset dated ahead would turn the budget off until then)",
				nodeinput.Quote(e), s.FutureBound(), s.Now.UTC().Format(time.RFC3339)))
			continue
		case at.After(s.Now):
			s.inputDue = health.Earliest(s.inputDue, at) // takes effect at its time
			continue
		}
		if !named {
			r.all = Later(r.all, at)
			continue
		}
		if r.byNode == nil {
			r.byNode = map[string]time.Time{}
		}
		r.byNode[node] = Later(r.byNode[node], at)
	}
	return r
}

// ResetRefusals says why the NodeHealthCheck's repair-budget-reset annotation, or entries of it, are
// ignored (none: nil).
func (s *Snapshot) ResetRefusals() []string {
	if s.NHC.Spec.RepairBudget == nil {
		return nil
	}
	return s.resets().refused
}

// repairReset returns when the node's repair budget was reset (starts up to it are not counted):
// the latest of the NodeHealthCheck's entries for it and for every node. The node's own annotation
// is refused and reported (RefusedInputs).
func (s *Snapshot) repairReset(n *corev1.Node) (time.Time, bool) {
	if v, ok := n.Annotations[remediationv1alpha1.RepairBudgetResetAnnotation]; ok {
		s.refuse(n.Name, remediationv1alpha1.RepairBudgetResetAnnotation, v, RefusedUntrusted,
			"the node's own kubelet may write it, and would clear its own history; to reset the node's repair budget, set %s=%s=<time> on NodeHealthCheck %s",
			remediationv1alpha1.RepairBudgetResetAnnotation, n.Name, s.Stored.Name)
	}
	r := s.resets()
	reset := Later(r.all, r.byNode[n.Name])
	return reset, !reset.IsZero()
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

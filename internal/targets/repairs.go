package targets

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// The repair budget (spec.repairBudget) counts when each node's remediations started. A start is
// the creation of the first CR of a remediation (escalation steps are the same remediation), or,
// for a dry-run NodeHealthCheck, of its first simulated step. The nhc controller records them in
// status.remediationHistory (RepairHistory); a decision counts the recorded ones and the running
// remediation's, so a start counts before it is recorded.

// repairBudget returns the spec's repair budget for decisions (nil: none).
func repairBudget(spec *remediationv1alpha1.NodeHealthCheckSpec) *health.RepairBudget {
	if spec.RepairBudget == nil {
		return nil
	}
	return &health.RepairBudget{Max: spec.RepairBudget.MaxRemediations, Window: spec.RepairBudget.Window.Duration}
}

// repairStarts returns the node's remediation starts the budget counts, oldest first: those recorded
// in status and the running remediation's, after the node's reset annotation, within the window.
func (s *Snapshot) repairStarts(n *corev1.Node) []time.Time {
	b := repairBudget(&s.NHC.Spec)
	if b == nil {
		return nil
	}
	var starts []time.Time
	for _, h := range s.Stored.Status.RemediationHistory {
		if h.Name == n.Name {
			for _, t := range h.Started {
				starts = append(starts, t.Time)
			}
		}
	}
	if t, ok := s.runningSince(n.Name); ok && !slices.ContainsFunc(starts, t.Equal) {
		starts = append(starts, t)
	}
	if v, ok := n.Annotations[remediationv1alpha1.RepairBudgetResetAnnotation]; ok {
		if reset, err := time.Parse(time.RFC3339, v); err == nil {
			starts = slices.DeleteFunc(starts, func(t time.Time) bool { return !t.After(reset) })
		}
	}
	return b.Counted(starts, s.Now)
}

// runningSince returns when the node's running remediation started: its oldest CR's creation, or
// its first simulated step's.
func (s *Snapshot) runningSince(node string) (time.Time, bool) {
	var since time.Time
	for _, cr := range s.CRs[node] {
		if t := cr.GetCreationTimestamp().Time; since.IsZero() || t.Before(since) {
			since = t
		}
	}
	if sim := s.Simulated(node); since.IsZero() && len(sim) > 0 {
		since = sim[0].Started.Time
	}
	return since, !since.IsZero()
}

// RepairHistory returns status.remediationHistory after this decision: the counted starts of every
// selected node that has any (nil without a repair budget). Starts are stored at the API's
// precision (whole seconds), as read back.
func (s *Snapshot) RepairHistory() []remediationv1alpha1.NodeRemediationHistory {
	var out []remediationv1alpha1.NodeRemediationHistory
	for _, n := range s.Nodes {
		starts := s.repairs[n.Name]
		if len(starts) == 0 {
			continue
		}
		h := remediationv1alpha1.NodeRemediationHistory{Name: n.Name}
		for _, t := range starts {
			h.Started = append(h.Started, metav1.Time{Time: t.Truncate(time.Second)})
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b remediationv1alpha1.NodeRemediationHistory) int { return strings.Compare(a.Name, b.Name) })
	return out
}

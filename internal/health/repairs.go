package health

import (
	"slices"
	"time"
)

// DefaultReturnGrace is the manager's --returning-node-grace default (Input.ReturnGrace): the node
// lifecycle controller's default --node-monitor-grace-period (50s) and a margin.
const DefaultReturnGrace = time.Minute

// DefaultRemovalHold is the manager's --removal-hold default (Input.RemovalHold): generous against
// a drain (Karpenter's and the autoscaler's take minutes), short against a broken node left
// unremediated because its removal never completes.
const DefaultRemovalHold = 30 * time.Minute

// RepairBudget limits how often one node is remediated: at most Max remediation starts within any
// Window (spec.repairBudget).
type RepairBudget struct {
	Max    int
	Window time.Duration
}

// Counted returns the starts the budget counts at now (within the window ending now), oldest first.
func (b RepairBudget) Counted(starts []time.Time, now time.Time) []time.Time {
	from := now.Add(-b.Window)
	var out []time.Time
	for _, s := range starts {
		if s.After(from) && !s.After(now) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// Exhausted reports whether the starts leave no room for another remediation now, and if so, when
// there is room again (when enough of them are older than the window).
func (b RepairBudget) Exhausted(starts []time.Time, now time.Time) (bool, time.Time) {
	counted := b.Counted(starts, now)
	if b.Max <= 0 || len(counted) < b.Max {
		return false, time.Time{}
	}
	return true, counted[len(counted)-b.Max].Add(b.Window)
}

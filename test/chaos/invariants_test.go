package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The invariants, checked after every step from the API (through the CR recorder, which sees every
// create, update and delete of remediation CRs in resourceVersion order, so CRs that came and went
// within a step count too) against the driver's model.
const (
	// invUnwarranted: a new remediation (a node's first CR of a NodeHealthCheck) only for a node
	// that is due (selected, unhealthy past the condition's duration, not excluded, not paused, the
	// template exists) in the model before or after the step; and no CR at all, not even an
	// escalation step, for a node that was healthy or not selected throughout the step.
	invUnwarranted = "no-unwarranted-cr"
	// invBudget: when a new remediation starts, the NodeHealthCheck's selected nodes with CRs are at
	// most selected - minHealthy (before or after the step).
	invBudget = "budget"
	// invOneNHC: never CRs of two NodeHealthChecks (controller owner reference) on one node.
	invOneNHC = "one-nhc-per-node"
	// invOneControlPlane: never CRs on two control-plane nodes at once, across NodeHealthChecks.
	invOneControlPlane = "one-control-plane-node"
	// invOneRemediator: a node has at most one running CR (not marked nhc-timed-out, not reporting
	// Succeeded) at a time: a new step starts only after the previous one gave up.
	invOneRemediator = "one-remediator-per-node"
	// invLeftCR: no CR left once its node has been healthy for a step (after its healthyDelay),
	// is deleted, or is no longer selected by the CR's NodeHealthCheck (unless the node is
	// poisoned: every write about it fails).
	invLeftCR = "no-cr-left-behind"
	// invLeftLease: likewise for node leases held by a NodeHealthCheck.
	invLeftLease = "no-lease-left-behind"
	// invLiveness: a node owed a remediation (due, within budget, no CR of any NodeHealthCheck, no
	// other control-plane node remediated, its lease free, not poisoned) for three settled checks in a
	// row has a problem: it should have got its CR in the step it became due. Checks after random
	// API faults do not count until a fault-free step poked the controllers (see checker.backoff).
	invLiveness = "no-stuck-remediation"
)

// livenessSteps is how many consecutive settled checks a node may be owed a remediation without
// one; the first is the step in which it became due, where the CR is expected already.
const livenessSteps = 3

// crRecord is one remediation CR as the recorder saw it, with the resourceVersions at which its
// life changed (0: never).
type crRecord struct {
	UID       types.UID
	Kind      string
	Name      string
	Node      string
	Owner     string
	OwnerUID  types.UID
	Template  string
	Created   uint64
	TimedOut  uint64 // first seen with the nhc-timed-out annotation
	Failed    uint64 // first seen with Succeeded=False
	Succeeded uint64 // first seen with Succeeded=True
	Deleted   uint64
}

func (c *crRecord) String() string {
	return fmt.Sprintf("%s %s (node %s, nhc %s, template %s, rv %d)", c.Kind, c.Name, c.Node, c.Owner, c.Template, c.Created)
}

// liveAt reports whether the CR existed at resourceVersion rv.
func (c *crRecord) liveAt(rv uint64) bool {
	return c.Created <= rv && (c.Deleted == 0 || rv < c.Deleted)
}

// runningAt reports whether the CR existed at rv and had not given up or finished.
func (c *crRecord) runningAt(rv uint64) bool {
	before := func(mark uint64) bool { return mark == 0 || rv < mark }
	return c.liveAt(rv) && before(c.TimedOut) && before(c.Failed) && before(c.Succeeded)
}

// leaseInfo is a node lease as read from the API at a check.
type leaseInfo struct {
	UID     types.UID
	Node    string
	Holder  string
	Expires time.Time
}

// violation is one broken invariant.
type violation struct {
	Invariant string
	Step      int
	Message   string
}

func (v violation) String() string {
	return fmt.Sprintf("step %d: %s: %s", v.Step, v.Invariant, v.Message)
}

// snapshot is what a check reads from the API after a step.
type snapshot struct {
	// RV is the resourceVersion up to which the recorder has seen every CR event.
	RV uint64
	// CRs are every CR the recorder has seen, including deleted ones.
	CRs []*crRecord
	// Leases are the node leases in the lease namespace.
	Leases []leaseInfo
	// Settled is false when the step did not settle within the bounded wait: only the safety
	// invariants, which are about what happened, are checked then.
	Settled bool
	// Faulty is true when random API faults failed requests in this step (the poisoned node's
	// failures do not count); Poked when the step made every controller reconcile every
	// NodeHealthCheck (a clock step, the end of a poisoning).
	Faulty, Poked bool
}

// checker judges each step against the model. It keeps the model's history and, for liveness, how
// long each node has been owed a remediation.
type checker struct {
	hist []*state // hist[k]: the model after step k
	rvs  []uint64 // rvs[k]: the snapshot RV of check k
	owed map[string]int
	// backoff is set after a step with random API faults, until a fault-free step poked: a
	// reconcile that failed is retried after controller-runtime's per-NodeHealthCheck error backoff
	// (exponential, up to 1000s), or at the next event, so liveness waits for one.
	backoff bool
	// left holds the CRs (by UID) and leases (by UID and holder) already reported as left behind,
	// so each is reported once.
	left map[string]bool
	// stats say how much the run exercised the invariants.
	stats struct {
		newCRs, firstCRs  int
		owed, longestOwed int
	}
}

func newChecker(initial *state, rv uint64) *checker {
	return &checker{hist: []*state{initial}, rvs: []uint64{rv}, owed: map[string]int{}, left: map[string]bool{}}
}

// check judges step cur.Step (one more than the last) and records it.
func (k *checker) check(cur *state, snap snapshot) []violation {
	s := cur.Step
	prev := k.hist[len(k.hist)-1]
	lo := k.rvs[len(k.rvs)-1]
	k.hist = append(k.hist, cur)
	k.rvs = append(k.rvs, snap.RV)

	var out []violation
	report := func(inv, format string, args ...any) {
		out = append(out, violation{Invariant: inv, Step: s, Message: fmt.Sprintf(format, args...)})
	}
	var fresh []*crRecord
	for _, c := range snap.CRs {
		if c.Created > lo && c.Created <= snap.RV {
			fresh = append(fresh, c)
		}
	}
	slices.SortFunc(fresh, func(a, b *crRecord) int { return int(a.Created) - int(b.Created) })
	for _, c := range fresh {
		k.checkNew(c, prev, cur, snap.CRs, report)
	}
	k.stats.newCRs += len(fresh)
	if snap.Settled {
		k.checkLeftBehind(prev, cur, snap, report)
	}
	k.checkLiveness(cur, snap, report)
	return out
}

// liveOn returns the CRs live on the node at rv, other than except.
func liveOn(crs []*crRecord, node string, rv uint64, except *crRecord) []*crRecord {
	var out []*crRecord
	for _, o := range crs {
		if o != except && o.Node == node && o.liveAt(rv) {
			out = append(out, o)
		}
	}
	return out
}

// checkNew judges one CR created during the step, at the resourceVersion it was created.
func (k *checker) checkNew(c *crRecord, prev, cur *state, crs []*crRecord, report func(string, string, ...any)) {
	h := cur.NHCs[c.Owner]
	if h == nil {
		report(invUnwarranted, "%s is owned by %q, which is not a NodeHealthCheck of this world", c, c.Owner)
		return
	}
	hPrev := prev.NHCs[c.Owner]
	before, after := prev.Nodes[c.Node], cur.Nodes[c.Node]
	others := liveOn(crs, c.Node, c.Created, c)
	first := !slices.ContainsFunc(others, func(o *crRecord) bool { return o.OwnerUID == c.OwnerUID })

	switch {
	case !hPrev.matched(before) && !h.matched(after):
		report(invUnwarranted, "%s created for a node healthy throughout the step (before: %s, after: %s)", c, before, after)
	case !hPrev.selects(before) && !h.selects(after):
		report(invUnwarranted, "%s created for a node %s does not select (before: %s, after: %s)", c, c.Owner, before, after)
	case first:
		whyBefore, whyAfter := hPrev.whyNotDue(before, prev.Now), h.whyNotDue(after, cur.Now)
		if whyBefore != "" && whyAfter != "" {
			report(invUnwarranted, "%s started a remediation of a node that is not due: before the step %s, after it %s", c, whyBefore, whyAfter)
		}
	}

	if first {
		k.stats.firstCRs++
		var details []string
		within := false
		for _, st := range []struct {
			name string
			s    *state
			h    *nhc
		}{{"before", prev, hPrev}, {"after", cur, h}} {
			selected := st.s.selected(st.h)
			remediated := 0
			for _, name := range selected {
				if slices.ContainsFunc(crs, func(o *crRecord) bool { return o.Node == name && o.OwnerUID == c.OwnerUID && o.liveAt(c.Created) }) {
					remediated++
				}
			}
			allowed := st.h.maxRemediated(len(selected))
			if remediated <= allowed {
				within = true
			}
			details = append(details, fmt.Sprintf("%s the step %d of %d selected nodes remediated, at most %d allowed", st.name, remediated, len(selected), allowed))
		}
		if !within {
			report(invBudget, "%s started a remediation beyond the budget: %s", c, strings.Join(details, "; "))
		}
	}

	for _, o := range others {
		if o.OwnerUID != c.OwnerUID {
			report(invOneNHC, "%s created while %s of another NodeHealthCheck exists", c, o)
			break
		}
	}

	if before.ControlPlane || after.ControlPlane {
		busy := map[string]bool{}
		for _, o := range crs {
			if o.liveAt(c.Created) && (prev.Nodes[o.Node].ControlPlane || cur.Nodes[o.Node].ControlPlane) {
				busy[o.Node] = true
			}
		}
		if len(busy) > 1 {
			report(invOneControlPlane, "%s created while control-plane nodes %v have CRs", c, sortedKeys(busy))
		}
	}

	if c.runningAt(c.Created) {
		for _, o := range others {
			if o.OwnerUID == c.OwnerUID && o.runningAt(c.Created) {
				report(invOneRemediator, "%s created while %s still runs (neither timed out nor failed)", c, o)
				break
			}
		}
	}
}

// appearedAt returns the step in which a CR appeared, from the check RVs.
func (k *checker) appearedAt(c *crRecord) int {
	for i, rv := range k.rvs {
		if c.Created <= rv {
			return i
		}
	}
	return len(k.rvs) - 1
}

// gone reports why a node should have no CRs or lease of the NodeHealthCheck h at this check;
// empty when it may have them.
func (k *checker) gone(name string, h *nhc, prev, cur *state, delay time.Duration, fromStep int) string {
	before, after := prev.Nodes[name], cur.Nodes[name]
	switch {
	case name == prev.Poisoned || name == cur.Poisoned:
		return "" // every write about it fails: nothing can be cleaned up
	case !before.Exists && !after.Exists:
		return "its node was deleted"
	case h != nil && !h.selects(before) && !h.selects(after):
		return fmt.Sprintf("%s no longer selects its node (%s)", h.Name, after)
	case healthySettled(after, prev, delay, fromStep, k.hist[min(fromStep, len(k.hist)-1)].Now):
		if delay > 0 {
			return fmt.Sprintf("its node has been healthy since %s (%s), past the healthyDelay of %s", after.Since.Format(time.TimeOnly), after, delay)
		}
		return fmt.Sprintf("its node has been healthy since step %d (%s)", max(after.HealthyFrom, fromStep), after)
	}
	return ""
}

func (k *checker) checkLeftBehind(prev, cur *state, snap snapshot, report func(string, string, ...any)) {
	once := func(key, inv, format string, args ...any) {
		if !k.left[key] {
			k.left[key] = true
			report(inv, format, args...)
		}
	}
	for _, c := range snap.CRs {
		if !c.liveAt(snap.RV) {
			continue
		}
		h := cur.NHCs[c.Owner]
		appeared := k.appearedAt(c)
		if h == nil || appeared == cur.Step {
			continue // a CR gets the step after the one it appeared in
		}
		if why := k.gone(c.Node, h, prev, cur, h.healthyDelay(), appeared); why != "" {
			once(string(c.UID), invLeftCR, "%s left behind: %s", c, why)
		}
	}
	for _, l := range snap.Leases {
		owner, ours := strings.CutPrefix(l.Holder, leaseHolderPrefix)
		if !ours {
			continue
		}
		if why := k.gone(l.Node, cur.NHCs[owner], prev, cur, 0, 0); why != "" {
			once(string(l.UID)+"/"+l.Holder, invLeftLease, "lease node-%s of %s left behind: %s", l.Node, l.Holder, why)
		}
	}
}

// checkLiveness counts, for each NodeHealthCheck and node, how many settled checks in a row the
// node has been owed a remediation without getting one.
func (k *checker) checkLiveness(cur *state, snap snapshot, report func(string, string, ...any)) {
	switch {
	case snap.Faulty:
		k.backoff = true
	case snap.Poked:
		k.backoff = false
	}
	if !snap.Settled || k.backoff {
		clear(k.owed)
		return
	}
	hasCR := func(node string, owner string) bool {
		return slices.ContainsFunc(snap.CRs, func(c *crRecord) bool {
			return c.Node == node && (owner == "" || c.Owner == owner) && c.liveAt(snap.RV)
		})
	}
	controlPlaneBusy := false
	for _, n := range cur.Nodes {
		if n.ControlPlane && hasCR(n.Name, "") {
			controlPlaneBusy = true
		}
	}
	leasedByOther := func(node, holder string) bool {
		return slices.ContainsFunc(snap.Leases, func(l leaseInfo) bool {
			return l.Node == node && l.Holder != holder && cur.Now.Before(l.Expires)
		})
	}
	for _, hn := range cur.nhcNames() {
		h := cur.NHCs[hn]
		selected := cur.selected(h)
		healthy := 0
		for _, name := range selected {
			if !h.matched(cur.Nodes[name]) && !hasCR(name, h.Name) {
				healthy++
			}
		}
		required, ok := requiredHealthy(len(selected), h.Spec.MinHealthy, h.Spec.MaxUnhealthy)
		for _, name := range cur.nodeNames() {
			key := hn + "/" + name
			n := cur.Nodes[name]
			owed := h.whyNotDue(n, cur.Now) == "" && ok && healthy >= required && !hasCR(name, "") &&
				!(n.ControlPlane && controlPlaneBusy) && !leasedByOther(name, leaseHolderPrefix+hn) && name != cur.Poisoned
			if !owed {
				delete(k.owed, key)
				continue
			}
			k.owed[key]++
			k.stats.owed++
			k.stats.longestOwed = max(k.stats.longestOwed, k.owed[key])
			if k.owed[key] == livenessSteps {
				report(invLiveness, "node %s has been owed a remediation by %s for %d settled steps without a CR: Ready=%s since %s, %d of %d selected nodes healthy, %d required",
					n, hn, livenessSteps, n.Ready, n.Since.Format(time.TimeOnly), healthy, len(selected), required)
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

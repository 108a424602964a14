package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
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
	// invHeld: one gate for every new CR. No escalation (a next-step CR: one created while another
	// CR of its NodeHealthCheck is on the node, or from a template that is not the first step; or
	// an nhc-timed-out mark) for a node while, in every state of the step, what holds its first step
	// closes the gate (state.gateClosed: paused, a missing template, dry-run, the clock skew beyond the
	// bound, an invalid budget, too few healthy nodes that did not just come back, the exclusion
	// label, a maintenance operator's lease). Every state of the step: the cache may lag behind a
	// move, as no-unwarranted-cr allows.
	invHeld = "no-escalation-while-held"
	// invDeleted: no CR deleted while its node is selected by its NodeHealthCheck, exists and is
	// unhealthy (in the model) in every state of the step: the operator deletes the CRs of nodes that
	// are healthy again (after healthyDelay), deleted or no longer selected, and one CR more: a
	// CR marked timed out whose name the next step needs (explainExisting: another template of its
	// kind in the NodeHealthCheck's templates, which names CRs after the node as well).
	invDeleted = "no-cr-of-unhealthy-selected-node-deleted"
	// invFirstStep: never two CRs of a NodeHealthCheck's first escalation step (its template is the
	// first step in every state of the step that created it) for one failure of one node: the node
	// exists, is selected and unhealthy, and the NodeHealthCheck keeps the same templates, in every
	// state from the end of the step that created the first CR to the end of the step that created
	// the second.
	invFirstStep = "one-first-step-per-failure"
	// invRepairBudget: a node gets no new remediation (its first CR of a NodeHealthCheck with
	// spec.repairBudget) while maxRemediations earlier ones of the NodeHealthCheck count: started
	// after the node's reset annotation and within the window (the API server's clock, as the
	// operator counts starts), each seen running at a settled check without random API faults, so
	// that the status writer recorded it (docs/compatibility.md: a remediation created and deleted
	// between two status writes may go uncounted).
	invRepairBudget = "repair-budget"
	// invForeignLease: a node lease a maintenance operator holds (unexpired, in fake time) is
	// neither taken nor deleted by the operator: at every check it is there, with its holder.
	invForeignLease = "no-foreign-lease-taken"
	// invMachine: every Machine that owns a CR is the CR node's Machine (its status.nodeRef names
	// the node), and a CR is labelled control-plane only for a control-plane node: a node's claim
	// (its annotations, which its kubelet can write) chooses neither which host Metal3 reboots nor
	// which nodes count as control plane.
	invMachine = "machine-owner-is-node"
	// invInFlight: a NodeHealthCheck's remediation of a node starts only while fewer than its
	// spec.maxInFlight other nodes it selects are unhealthy with its live CRs, in some state of the
	// step (an upper bound of the nodes the decision counts as under remediation).
	invInFlight = "max-in-flight"
	// invFailureDomain: a NodeHealthCheck with spec.failureDomain starts a remediation of a node
	// only while, in some state of the step, at most maxUnhealthy of the selected nodes of the
	// node's domain (its pool label) are not Ready.
	invFailureDomain = "failure-domain"
	// invBackdated: a failure a slow writer dated back by more than the clock-skew bound (its
	// lastTransitionTime earlier than when it was written) starts no remediation before the
	// condition's duration has passed since it was written: the watch that shows the change does
	// not trust its time (watch.ConditionChanges). Judged in every state of the step where the node
	// is unhealthy, unless a manager started since the write (it lists the node, and trusts the
	// time: the record of changes is its process's memory).
	invBackdated = "no-backdated-blip-remediated"
	// invRemoval: a NodeHealthCheck with spec.skipNodesBeingRemoved starts no remediation of a node
	// that is being removed (a removing party's taint, or a deletion a finalizer holds) while the
	// removal hold certainly lasts, in every state of the step: less than --removal-hold since the
	// removal began at the earliest (state.removalHolds). Escalation is held too: the removal is part
	// of the gate no-escalation-while-held judges; and no-stuck-remediation owes the node a
	// remediation again once the hold has certainly ended.
	invRemoval = "removal-hold"
	// invReplaced: a Node deleted and created again under the same name is a new node: the CRs of
	// its old object (created before the new one's creationTimestamp, in an earlier second) are not
	// its remediation. None of them is live at a settled check after the step that created the new
	// object (they go as a deleted node's do; docs/compatibility.md's outcomes: "the new one gets its
	// own remediation"), and no next step escalates them onto it (reported when created). The
	// remediators of this world never replace a machine: a CR that says it does
	// (PermanentNodeDeletionExpected, targets.KeptOrphanCR) stays the new node's remediation.
	invReplaced = "replaced-node-is-new"
	// invUnknown: unknown is not free. While conv-1's kind cannot be read and the leader changed since
	// it could (a new leader never read it), throughout the step: every node lease the owner of a
	// live CR of the kind held when it went down is there, with that holder (not released, not
	// swept, even once it expired), and no other NodeHealthCheck starts on the CR's node.
	invUnknown = "unknown-kind-untouched"
	// invRequestRefused, invRequestOnce, invRequestThreshold: see checkRequest.
	invRequestRefused   = "no-start-for-refused-request"
	invRequestOnce      = "request-answered-once"
	invRequestThreshold = "request-within-threshold"
	// invRequestWaits: a request never takes a slot of spec.maxInFlight ahead of a node that is
	// really down: no first CR answering the request of a node whose conditions are healthy leaves,
	// with it, at least maxInFlight selected nodes under remediation (running CRs of the
	// NodeHealthCheck) while another selected node gets none that is certainly owed a remediation
	// (as no-stuck-remediation judges it, the in-flight bound aside) in every state of the step in
	// which the request was pending. Checked at settled steps.
	invRequestWaits = "request-waits-for-failures"
)

// livenessSteps is how many consecutive settled checks a node may be owed a remediation without
// one; the first is the step in which it became due, where the CR is expected already.
const livenessSteps = 3

// crRecord is one remediation CR as the recorder saw it, with the resourceVersions at which its
// life changed (0: never).
type crRecord struct {
	UID      types.UID
	Kind     string
	Name     string
	Node     string
	Owner    string
	OwnerUID types.UID
	Template string
	// Machines are the Machines among its owners as created; ControlPlane is set when it was
	// created with the control-plane CR label.
	Machines     []string
	ControlPlane bool
	// CreatedAt is the CR's creationTimestamp (the API server's clock, whole seconds).
	CreatedAt time.Time
	// RequestedAt is the time of the remediation request the CR answers (its requested-at
	// annotation, RequestValue as written; zero: none, or not a time).
	RequestedAt  time.Time
	RequestValue string
	Created      uint64
	TimedOut     uint64 // first seen with the nhc-timed-out annotation
	Failed       uint64 // first seen with Succeeded=False
	Succeeded    uint64 // first seen with Succeeded=True
	Deleted      uint64
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
	// firstSteps are the CRs of a first escalation step seen so far, with the check (index into
	// hist) they appeared at (one-first-step-per-failure); starts the CRs that started a remediation (the repair
	// budget) and recorded those of them seen running at a settled check without random faults.
	firstSteps   map[types.UID]int
	firstStepCRs []*crRecord
	starts       []*crRecord
	recorded     map[types.UID]bool
	// exhausted are the remediations (NodeHealthCheck/node) that answer a request whose steps were
	// seen exhausted, with the step they were first seen so.
	exhausted map[string]int
	// downOwed are, by NodeHealthCheck, the nodes owed a remediation but for spec.maxInFlight at the
	// last check (nil: it was not settled).
	downOwed map[string][]string
	// stats say how much the run exercised the invariants.
	stats checkerStats
}

// checkerStats say how much a run exercised the invariants.
type checkerStats struct {
	newCRs, firstCRs  int
	owed, longestOwed int
	// escalations are next-step CRs and timed-out marks, heldRunning the node-checks at which a
	// CR ran while the gate was closed (no-escalation-while-held); deletions the CRs deleted,
	// budgetHeld the node-checks at which a node due was held back by its repair budget.
	escalations, heldRunning, deletions, budgetHeld int
	// inFlightHeld are the node-checks at which a node due waited for spec.maxInFlight, domainHeld
	// those at which its failure domain was over spec.failureDomain's bound.
	inFlightHeld, domainHeld int
	// machineOwned are the new CRs with a Machine owner, claimedElsewhere those of a node that
	// claimed another Machine or none (before or after the step).
	machineOwned, claimedElsewhere int
	// backdatedHeld are the node-checks at which a failure a slow writer dated back had lasted its
	// duration by its lastTransitionTime but not since it was written.
	backdatedHeld int
	// requestStarts are the remediations started for requests, requestRefusedStarts those for a
	// request that is refused or not due; requestOwed the node-checks at which a node was owed a
	// remediation for its request; requestWaited those at which a pending request of a healthy node
	// waited for a node really down (the in-flight bound) or for the threshold's headroom.
	requestStarts, requestRefusedStarts, requestOwed, requestWaited int
	// unknownHeld are the node-checks at which a CR of conv-1's kind was live, its owner's lease
	// recorded, while the leader could not read the kind; unknownWaited those at which a node due
	// waited for the kind.
	unknownHeld, unknownWaited int
	// removalHeld are the node-checks at which a node due was held by its removal, removalOver the
	// remediations started of nodes being removed by NodeHealthChecks that skip them (past the hold).
	removalHeld, removalOver int
}

func newChecker(initial *state, rv uint64) *checker {
	return &checker{hist: []*state{initial}, rvs: []uint64{rv}, owed: map[string]int{}, left: map[string]bool{},
		firstSteps: map[types.UID]int{}, recorded: map[types.UID]bool{}, exhausted: map[string]int{}}
}

// stepStates returns the model's states through a step: the one before it, those between the
// moves of a burst, and the one after it.
func stepStates(prev, cur *state) []*state {
	return slices.Concat([]*state{prev}, cur.Mids, []*state{cur})
}

// anyState reports whether the condition holds in one of the states.
func anyState(states []*state, cond func(s *state) bool) bool {
	return slices.ContainsFunc(states, cond)
}

// allStates reports whether the condition holds in every one of the states.
func allStates(states []*state, cond func(s *state) bool) bool {
	return !slices.ContainsFunc(states, func(s *state) bool { return !cond(s) })
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
	states := stepStates(prev, cur)
	for _, c := range fresh {
		k.checkNew(c, prev, cur, snap.CRs, report)
	}
	for _, c := range snap.CRs {
		if c.TimedOut > lo && c.TimedOut <= snap.RV {
			k.stats.escalations++
			k.checkHeld(c, "marked timed out", states, report)
		}
		if c.Deleted > lo && c.Deleted <= snap.RV {
			k.stats.deletions++
			k.checkDeleted(c, states, report)
		}
	}
	k.stats.newCRs += len(fresh)
	if snap.Settled {
		k.checkLeftBehind(prev, cur, snap, report)
		if !snap.Faulty {
			for _, c := range k.starts {
				if c.liveAt(snap.RV) {
					k.recorded[c.UID] = true
				}
			}
		}
	}
	for _, c := range snap.CRs {
		if h, n := cur.NHCs[c.Owner], cur.Nodes[c.Node]; h != nil && c.runningAt(snap.RV) && cur.gateClosed(h, n) != "" {
			k.stats.heldRunning++
		}
	}
	for _, name := range cur.nodeNames() {
		if n := cur.Nodes[name]; cur.Now.Before(n.LeasedUntil) && !slices.ContainsFunc(snap.Leases, func(l leaseInfo) bool {
			return l.Node == name && l.Holder == maintenanceHolder
		}) {
			report(invForeignLease, "the lease of node %s, which %s holds until %s, is gone or someone else's", name, maintenanceHolder, n.LeasedUntil.Format(time.TimeOnly))
		}
	}
	if allStates(states, func(s *state) bool { return s.ConvBlind }) {
		for _, c := range snap.CRs {
			held, ok := cur.ConvLeases[c.Node]
			if c.Kind != convKind || !c.liveAt(snap.RV) || !ok || held.Holder != leaseHolderPrefix+c.Owner {
				continue
			}
			k.stats.unknownHeld++
			if !slices.ContainsFunc(snap.Leases, func(l leaseInfo) bool { return l.UID == held.UID && l.Holder == held.Holder }) && !k.left["unknown/"+string(c.UID)] {
				k.left["unknown/"+string(c.UID)] = true
				report(invUnknown, "the lease of node %s, which %s held for %s when its kind became unreadable, is gone or someone else's while the leader cannot read the kind", c.Node, held.Holder, c)
			}
		}
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

// checkNew judges one CR created during the step, at the resourceVersion it was created. A burst's
// states between its moves count as before or after it.
func (k *checker) checkNew(c *crRecord, prev, cur *state, crs []*crRecord, report func(string, string, ...any)) {
	h := cur.NHCs[c.Owner]
	if h == nil {
		report(invUnwarranted, "%s is owned by %q, which is not a NodeHealthCheck of this world", c, c.Owner)
		return
	}
	states := stepStates(prev, cur)
	hPrev := prev.NHCs[c.Owner]
	before, after := prev.Nodes[c.Node], cur.Nodes[c.Node]
	others := liveOn(crs, c.Node, c.Created, c)
	first := !slices.ContainsFunc(others, func(o *crRecord) bool { return o.OwnerUID == c.OwnerUID })

	requested := c.RequestValue != ""
	if requested {
		k.checkRequest(c, first, others, states, crs, report)
	}
	switch {
	case requested && !first:
		// An escalation of a remediation that answers a request: checkRequest judged its time.
	case requested:
		if allStates(states, func(s *state) bool {
			return s.whyNoRequest(s.NHCs[c.Owner], s.Nodes[c.Node]) != "" && s.whyNotDue(s.NHCs[c.Owner], s.Nodes[c.Node]) != ""
		}) {
			report(invUnwarranted, "%s started a remediation for a request of a node that is not due for it: before the step %s, after it %s",
				c, prev.whyNoRequest(hPrev, before), cur.whyNoRequest(h, after))
		}
	case !anyState(states, func(s *state) bool { return s.NHCs[c.Owner].matched(s.Nodes[c.Node]) }):
		report(invUnwarranted, "%s created for a node healthy throughout the step (before: %s, after: %s)", c, before, after)
	case !anyState(states, func(s *state) bool { return s.NHCs[c.Owner].selects(s.Nodes[c.Node]) }):
		report(invUnwarranted, "%s created for a node %s does not select (before: %s, after: %s)", c, c.Owner, before, after)
	case allStates(states, func(s *state) bool { return s.NHCs[c.Owner].Spec.DryRun }):
		report(invUnwarranted, "%s created by %s, in dry-run throughout the step", c, c.Owner)
	case first:
		whyBefore, whyAfter := prev.whyNotDue(hPrev, before), cur.whyNotDue(h, after)
		if allStates(states, func(s *state) bool { return s.whyNotDue(s.NHCs[c.Owner], s.Nodes[c.Node]) != "" }) {
			report(invUnwarranted, "%s started a remediation of a node that is not due: before the step %s, after it %s", c, whyBefore, whyAfter)
		}
	}

	for _, machine := range c.Machines {
		if node := machineNode(machine); node != c.Node {
			report(invMachine, "%s is owned by Machine %s, whose status.nodeRef names node %s (the node claimed Machine %q before the step, %q after it)",
				c, machine, node, before.Machine, after.Machine)
		}
	}
	if len(c.Machines) > 0 {
		k.stats.machineOwned++
	}
	if before.Machine != machineOf(c.Node) || after.Machine != machineOf(c.Node) {
		k.stats.claimedElsewhere++
	}
	if c.ControlPlane && !before.ControlPlane {
		report(invMachine, "%s is labelled control-plane, but node %s is a worker (it claimed Machine %q before the step, %q after it)", c, c.Node, before.Machine, after.Machine)
	}

	if first && !requested {
		k.checkBackdated(c, states, report)
	}
	if first {
		if anyState(states, func(s *state) bool {
			return s.NHCs[c.Owner].Spec.SkipNodesBeingRemoved && s.Nodes[c.Node].RemovedBy != ""
		}) {
			k.stats.removalOver++
		}
		if allStates(states, func(s *state) bool { return s.removalHolds(s.NHCs[c.Owner], s.Nodes[c.Node]) }) {
			n := cur.Nodes[c.Node]
			report(invRemoval, "%s started a remediation of a node being removed by %s since %s, within the removal hold (%s) throughout the step",
				c, n.RemovedBy, n.RemovalSince.Format(time.TimeOnly), removalHold)
		}
	}

	if first {
		k.stats.firstCRs++
		var details []string
		within := false
		for _, s := range states {
			sh := s.NHCs[c.Owner]
			selected := s.selected(sh)
			remediated := 0
			for _, name := range selected {
				if slices.ContainsFunc(crs, func(o *crRecord) bool { return o.Node == name && o.OwnerUID == c.OwnerUID && o.liveAt(c.Created) }) {
					remediated++
				}
			}
			allowed := sh.maxRemediated(len(selected))
			if remediated <= allowed {
				within = true
			}
			when := "after"
			switch {
			case s == prev:
				when = "before"
			case s != cur:
				when = "within"
			}
			details = append(details, fmt.Sprintf("%s the step %d of %d selected nodes remediated, at most %d allowed", when, remediated, len(selected), allowed))
		}
		if !within {
			report(invBudget, "%s started a remediation beyond the budget: %s", c, strings.Join(details, "; "))
		}
		k.starts = append(k.starts, c)
		k.checkRepairBudget(c, states, report)
		k.checkInFlight(c, states, crs, report)
		k.checkFailureDomain(c, states, report)
	}
	if !first && after.Exists && after.CreatedStep > 0 &&
		!slices.ContainsFunc(others, func(o *crRecord) bool { return o.OwnerUID == c.OwnerUID && !after.Created.After(o.CreatedAt) }) {
		report(invReplaced, "%s escalates onto node %s, created again at %s, a remediation of its previous object", c, c.Node, after.Created.Format(time.TimeOnly))
	}
	firstStep := allStates(states, func(s *state) bool { return s.NHCs[c.Owner].firstStep() == c.Template })
	if !first || !anyState(states, func(s *state) bool { return s.NHCs[c.Owner].firstStep() == c.Template }) {
		k.stats.escalations++
		k.checkHeld(c, "created as a next step", states, report)
	}
	if firstStep {
		k.checkFirstStep(c, cur, report)
		k.firstSteps[c.UID] = len(k.hist) - 1
		k.firstStepCRs = append(k.firstStepCRs, c)
	}

	for _, o := range others {
		if o.OwnerUID != c.OwnerUID {
			report(invOneNHC, "%s created while %s of another NodeHealthCheck exists", c, o)
			if o.Kind == convKind && allStates(states, func(s *state) bool { return s.ConvBlind }) {
				report(invUnknown, "%s created while %s, of a kind the leader cannot read, may run", c, o)
			}
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

// checkRequest judges a CR that answers a remediation request (its requested-at annotation):
//   - no-start-for-refused-request: a first CR answers the node's request as the driver wrote it,
//     in some state of the step where the NodeHealthCheck takes requests and the request is pending
//     (a time, not refused as dated beyond the bound or expired, its time come); a later step
//     answers the request its remediation's CRs answer;
//   - request-answered-once: no two remediations (first CRs) answer the same request of one node
//     object;
//   - request-within-threshold: a node whose conditions are healthy throughout the step (it is
//     unhealthy only for its request) starts only where, in some state of the step, its start leaves
//     at least the required healthy selected nodes (Ready, without the NodeHealthCheck's CRs).
func (k *checker) checkRequest(c *crRecord, first bool, others []*crRecord, states []*state, crs []*crRecord, report func(string, string, ...any)) {
	if !first {
		if !slices.ContainsFunc(others, func(o *crRecord) bool { return o.OwnerUID == c.OwnerUID && o.RequestValue == c.RequestValue }) {
			report(invRequestRefused, "%s answers request %s, which no earlier CR of its remediation answers", c, c.RequestValue)
		}
		return
	}
	k.stats.requestStarts++
	var whys []string
	accepted := false
	for _, s := range states {
		h, n := s.NHCs[c.Owner], s.Nodes[c.Node]
		switch {
		case !n.RequestAt.Equal(c.RequestedAt) || c.RequestedAt.IsZero():
			whys = append(whys, fmt.Sprintf("the node's request is %s@%s", cmp.Or(n.Request, "none"), n.RequestAt.Format(time.TimeOnly)))
		case !h.Spec.AllowRemediationRequests:
			whys = append(whys, c.Owner+" does not take requests")
		case h.Spec.DryRun:
			whys = append(whys, c.Owner+" is in dry-run, which ignores requests")
		case !n.requestPending(s.Now):
			whys = append(whys, fmt.Sprintf("the request (%s) is refused or not due at %s", n.Request, s.Now.Format(time.TimeOnly)))
		default:
			accepted = true
		}
	}
	if !accepted {
		k.stats.requestRefusedStarts++
		report(invRequestRefused, "%s answers request %s, which the operator must refuse or wait for throughout the step: %s", c, c.RequestValue, strings.Join(whys, "; "))
	}
	for _, o := range k.starts {
		if o != c && o.Node == c.Node && o.RequestValue == c.RequestValue && o.Created < c.Created && !states[len(states)-1].Nodes[c.Node].Created.After(o.CreatedAt) {
			report(invRequestOnce, "%s answers request %s of node %s, which %s answered already", c, c.RequestValue, c.Node, o)
			break
		}
	}
	if !allStates(states, func(s *state) bool { n := s.Nodes[c.Node]; return n.Exists && n.Ready == corev1.ConditionTrue }) {
		return // unhealthy by its conditions too: counted unhealthy already
	}
	var details []string
	for _, s := range states {
		h := s.NHCs[c.Owner]
		selected := s.selected(h)
		required, ok := requiredHealthy(len(selected), h.Spec.MinHealthy, h.Spec.MaxUnhealthy)
		healthy := 0
		for _, name := range selected {
			if name != c.Node && s.Nodes[name].Ready == corev1.ConditionTrue &&
				!slices.ContainsFunc(crs, func(o *crRecord) bool { return o.Node == name && o.OwnerUID == c.OwnerUID && o.liveAt(c.Created) }) {
				healthy++
			}
		}
		if ok && healthy >= required {
			return
		}
		details = append(details, fmt.Sprintf("%d other selected nodes healthy without CRs, %d required", healthy, required))
	}
	report(invRequestThreshold, "%s started a remediation for a request of a healthy node that leaves too few healthy nodes in every state of the step: %s", c, strings.Join(details, "; "))
}

// checkInFlight judges a first CR against spec.maxInFlight: within the limit in some state of the
// step, counting the other selected nodes that are not Ready and have a live CR of the owner when
// it was created.
func (k *checker) checkInFlight(c *crRecord, states []*state, crs []*crRecord, report func(string, string, ...any)) {
	var details []string
	for _, s := range states {
		sh := s.NHCs[c.Owner]
		if sh.Spec.MaxInFlight == nil {
			return
		}
		limit := sh.Spec.MaxInFlight.IntValue()
		running := 0
		for _, name := range s.selected(sh) {
			if name != c.Node && s.Nodes[name].Ready != corev1.ConditionTrue &&
				slices.ContainsFunc(crs, func(o *crRecord) bool { return o.Node == name && o.OwnerUID == c.OwnerUID && o.runningAt(c.Created) }) {
				running++
			}
		}
		if running < limit {
			return
		}
		details = append(details, fmt.Sprintf("%d nodes under remediation, maxInFlight %d", running, limit))
	}
	report(invInFlight, "%s started a remediation beyond spec.maxInFlight in every state of the step: %s", c, strings.Join(details, "; "))
}

// checkFailureDomain judges a first CR against spec.failureDomain: its node's domain within the
// bound in some state of the step.
func (k *checker) checkFailureDomain(c *crRecord, states []*state, report func(string, string, ...any)) {
	var details []string
	for _, s := range states {
		sh := s.NHCs[c.Owner]
		over, detail := s.domainOver(sh, s.Nodes[c.Node])
		if !over {
			return
		}
		details = append(details, detail)
	}
	report(invFailureDomain, "%s started a remediation in a failure domain over its bound in every state of the step: %s", c, strings.Join(details, "; "))
}

// checkBackdated judges a new remediation against the time its node's failure was written: in
// some state of the step where the node is unhealthy for its NodeHealthCheck, the failure counts
// from its lastTransitionTime (written within the bound of it, or a manager started since that
// trusts it) or has lasted the condition's duration since it was written.
func (k *checker) checkBackdated(c *crRecord, states []*state, report func(string, string, ...any)) {
	var whys []string
	for _, s := range states {
		h, n := s.NHCs[c.Owner], s.Nodes[c.Node]
		if h == nil || !h.matched(n) {
			continue
		}
		if !n.slowWrite() || s.Managers > n.WrittenManagers {
			return // not dated back, or a manager that trusts the time may lead: no-unwarranted-cr judges it
		}
		d, _ := h.duration(n)
		from := s.earliestCount(n)
		if !s.Now.Before(from.Add(d)) {
			return
		}
		whys = append(whys, fmt.Sprintf("at %s Ready=%s dated %s, written at %s: %s of its %s since then",
			s.Now.Format(time.TimeOnly), n.Ready, n.Since.Format(time.TimeOnly), n.Written.Format(time.TimeOnly), s.Now.Sub(from), d))
	}
	if len(whys) > 0 {
		report(invBackdated, "%s started a remediation of a failure a slow writer dated back, before its duration since it was written: %s", c, strings.Join(whys, "; "))
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
	// A paused NodeHealthCheck leaves the CRs (and leases) of nodes it does not select until it is
	// unpaused.
	keepsOrphans := h != nil && (h.paused() || prev.NHCs[h.Name].paused())
	switch {
	case name == prev.Poisoned || name == cur.Poisoned:
		return "" // every write about it fails: nothing can be cleaned up
	case !before.Exists && !after.Exists && !keepsOrphans:
		return "its node was deleted"
	case h != nil && !h.selects(before) && !h.selects(after) && !keepsOrphans:
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
	// Unknown is not free: while conv-1's kind cannot be read, its CRs stay, and so do the leases of
	// the NodeHealthChecks that use it or have CRs of it.
	convDown := anyState(stepStates(prev, cur), func(s *state) bool { return s.ConvDown })
	for _, c := range snap.CRs {
		if !c.liveAt(snap.RV) || (convDown && c.Kind == convKind) {
			continue
		}
		h := cur.NHCs[c.Owner]
		appeared := k.appearedAt(c)
		if h == nil || appeared == cur.Step {
			continue // a CR gets the step after the one it appeared in
		}
		if n := cur.Nodes[c.Node]; n.Exists && n.Created.After(c.CreatedAt) && n.CreatedStep < cur.Step && c.Node != cur.Poisoned && c.Node != prev.Poisoned {
			once(string(c.UID), invReplaced, "%s of node %s's previous object (created %s) left behind: the node was created again at %s, in step %d",
				c, c.Node, c.CreatedAt.Format(time.TimeOnly), n.Created.Format(time.TimeOnly), n.CreatedStep)
			continue
		}
		if why := k.gone(c.Node, h, prev, cur, h.healthyDelay(), appeared); why != "" && !k.requestRuns(h, c.Node, cur, snap) {
			once(string(c.UID), invLeftCR, "%s left behind: %s", c, why)
		}
	}
	for _, l := range snap.Leases {
		owner, ours := strings.CutPrefix(l.Holder, leaseHolderPrefix)
		if !ours || (convDown && k.mayUseConv(owner, prev, cur, snap)) {
			continue
		}
		if why := k.gone(l.Node, cur.NHCs[owner], prev, cur, 0, 0); why != "" && !k.requestRuns(cur.NHCs[owner], l.Node, cur, snap) {
			once(string(l.UID)+"/"+l.Holder, invLeftLease, "lease node-%s of %s left behind: %s", l.Node, l.Holder, why)
		}
	}
}

// mayUseConv reports whether the NodeHealthCheck uses conv-1's kind before or after the step, or
// has live CRs of it.
func (k *checker) mayUseConv(owner string, prev, cur *state, snap snapshot) bool {
	for _, s := range stepStates(prev, cur) {
		if h := s.NHCs[owner]; h != nil && h.usesConv() {
			return true
		}
	}
	return slices.ContainsFunc(snap.CRs, func(c *crRecord) bool { return c.Owner == owner && c.Kind == convKind && c.liveAt(snap.RV) })
}

// requestRuns reports whether the node's remediation by h answers a request and may go on
// although the node's conditions are healthy: until a CR of it reports Succeeded=True, the node's
// conditions change after its first CR answering the request appeared, or its steps are exhausted
// (no CR runs, one of the last step's timed out or failed), seen at an earlier check. The node
// exists and is selected.
func (k *checker) requestRuns(h *nhc, node string, cur *state, snap snapshot) bool {
	n := cur.Nodes[node]
	if h == nil || !h.selects(n) {
		return false
	}
	var live []*crRecord
	var first *crRecord
	for _, c := range snap.CRs {
		if c.Owner == h.Name && c.Node == node && c.liveAt(snap.RV) {
			live = append(live, c)
			if c.RequestValue != "" && (first == nil || c.Created < first.Created) {
				first = c
			}
		}
	}
	if first == nil {
		return false
	}
	if slices.ContainsFunc(live, func(c *crRecord) bool { return c.Succeeded != 0 && c.Succeeded <= snap.RV }) {
		return false
	}
	if appeared := k.appearedAt(first); k.hist[appeared].Nodes[node].Writes != n.Writes {
		return false // the conditions changed: answered
	}
	key := h.Name + "/" + node
	exhausted := !slices.ContainsFunc(live, func(c *crRecord) bool { return c.runningAt(snap.RV) }) &&
		slices.ContainsFunc(live, func(c *crRecord) bool { return c.Template == h.lastStep() })
	if !exhausted {
		delete(k.exhausted, key)
		return true
	}
	if _, seen := k.exhausted[key]; !seen {
		k.exhausted[key] = cur.Step
	}
	return k.exhausted[key] == cur.Step // the step after it is seen exhausted, its CRs go
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
		k.downOwed = nil
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
	// remediating counts the nodes with live CRs of the NodeHealthCheck (at least those the
	// decision counts under remediation).
	remediating := func(owner string) int {
		nodes := map[string]bool{}
		for _, c := range snap.CRs {
			if c.Owner == owner && c.liveAt(snap.RV) {
				nodes[c.Node] = true
			}
		}
		return len(nodes)
	}
	// maybeAnswered reports whether a remediation of the node may have answered its request: a CR
	// of it was live at some moment since the step before the request was written.
	maybeAnswered := func(n node) bool {
		from := k.rvs[max(n.RequestStep-1, 0)]
		return n.RequestAt.Compare(n.PrevRequestAt) <= 0 || slices.ContainsFunc(snap.CRs, func(c *crRecord) bool {
			return c.Node == n.Name && (c.Deleted == 0 || c.Deleted > from)
		})
	}
	downOwed := map[string][]string{} // by NodeHealthCheck: the nodes owed a remediation but for maxInFlight
	// While conv-1's kind cannot be read (in some state of the step), the NodeHealthChecks that may
	// use it wait, no control-plane node starts (another's remediation of the kind could not be
	// seen), nor a node such a NodeHealthCheck selects (its status may list it with a CR of the kind).
	prev := k.hist[max(len(k.hist)-2, 0)]
	convDown := anyState(stepStates(prev, cur), func(s *state) bool { return s.ConvDown })
	unknownHolds := func(hn string, n node) bool {
		if !convDown {
			return false
		}
		if n.ControlPlane || k.mayUseConv(hn, prev, cur, snap) {
			return true
		}
		for _, g := range cur.nhcNames() {
			if k.mayUseConv(g, prev, cur, snap) && (cur.NHCs[g].selects(n) || prev.NHCs[g].selects(prev.Nodes[n.Name])) {
				return true
			}
		}
		return false
	}
	for _, hn := range cur.nhcNames() {
		h := cur.NHCs[hn]
		selected := cur.selected(h)
		healthy, returned, requests := 0, 0, 0
		for _, name := range selected {
			n := cur.Nodes[name]
			if !h.matched(n) && !hasCR(name, h.Name) {
				healthy++
				if cur.cameBack(n) {
					returned++
				}
				if cur.whyNoRequest(h, n) == "" && !maybeAnswered(n) {
					requests++
				}
			}
		}
		required, ok := requiredHealthy(len(selected), h.Spec.MinHealthy, h.Spec.MaxUnhealthy)
		type verdict struct {
			name      string
			byRequest bool
		}
		var due []verdict
		for _, name := range cur.nodeNames() {
			n := cur.Nodes[name]
			if h.matched(n) && cur.earliestCount(n) != n.Since && h.unhealthyPast(n, cur.Now) && !h.unhealthyPast(withSince(n, cur.earliestCount(n)), cur.Now) {
				k.stats.backdatedHeld++
			}
			// Due as the leader counts the failure at the latest (node.latestCount).
			counted := n
			if from, known := n.latestCount(); known {
				counted.Since = from
			} else {
				counted.Since = cur.Now.Add(time.Hour) // not shown by the leader's watch for certain yet
			}
			switch {
			case cur.whyNotDue(h, counted) == "":
				due = append(due, verdict{name: name})
			case n.Ready == corev1.ConditionTrue && cur.whyNoRequest(h, n) == "" && !maybeAnswered(n):
				// Unhealthy only for its request: it takes the threshold's headroom and waits for the
				// nodes that are really down and for earlier requests.
				if healthy-1 < required || requests > 1 {
					k.stats.requestWaited++
					continue
				}
				due = append(due, verdict{name: name, byRequest: true})
			}
		}
		for _, v := range due {
			name, n := v.name, cur.Nodes[v.name]
			// The returning-node hold: the threshold must hold without the nodes that just came back.
			owed := ok && healthy-returned >= required && !hasCR(name, "") &&
				!(n.ControlPlane && controlPlaneBusy) && !leasedByOther(name, leaseHolderPrefix+hn) && name != cur.Poisoned
			if over, _ := cur.domainOver(h, n); owed && over {
				k.stats.domainHeld++
				owed = false // its domain lost more nodes than the bound
			}
			if owed && cur.removalMayHold(h, n) {
				k.stats.removalHeld++
				owed = false // its removal may hold it still
			}
			if owed && budgetMayBeExhausted(h, n, cur.Now, snap.CRs) {
				k.stats.budgetHeld++
				owed = false
			}
			if owed && unknownHolds(hn, n) {
				k.stats.unknownWaited++
				owed = false
			}
			if owed && !v.byRequest {
				downOwed[hn] = append(downOwed[hn], name)
			}
			switch {
			case !owed || h.Spec.MaxInFlight == nil:
			case v.byRequest && (remediating(h.Name) >= h.Spec.MaxInFlight.IntValue() || len(downOwed[hn]) > 0):
				k.stats.requestWaited++
				owed = false // it waits for a remediation to end; nodes really down go first
			case remediating(h.Name) >= h.Spec.MaxInFlight.IntValue():
				k.stats.inFlightHeld++
				owed = false // it waits for a remediation to end
			}
			key := hn + "/" + name
			if !owed {
				delete(k.owed, key)
				continue
			}
			if v.byRequest {
				k.stats.requestOwed++
			}
			k.owed[key]++
			k.stats.owed++
			k.stats.longestOwed = max(k.stats.longestOwed, k.owed[key])
			if k.owed[key] == livenessSteps {
				what := fmt.Sprintf("Ready=%s since %s", n.Ready, n.Since.Format(time.TimeOnly))
				if v.byRequest {
					what = fmt.Sprintf("its request dated %s", n.RequestAt.Format(time.TimeOnly))
				}
				report(invLiveness, "node %s has been owed a remediation by %s for %d settled steps without a CR: %s, %d of %d selected nodes healthy (%d of them just back), %d required",
					n, hn, livenessSteps, what, healthy, len(selected), returned, required)
			}
		}
	}
	k.checkRequestWaits(cur, snap, downOwed, report)
	k.downOwed = downOwed
}

// checkRequestWaits judges the remediations started in this step for requests of nodes whose
// conditions are healthy against spec.maxInFlight's order (invRequestWaits): downOwed are the nodes
// owed a remediation (but for the in-flight bound) at this check, k.downOwed at the one before.
func (k *checker) checkRequestWaits(cur *state, snap snapshot, downOwed map[string][]string, report func(string, string, ...any)) {
	if len(k.hist) < 2 {
		return
	}
	prev := k.hist[len(k.hist)-2]
	lo := k.rvs[len(k.rvs)-2]
	states := stepStates(prev, cur)
	for _, c := range snap.CRs {
		h := cur.NHCs[c.Owner]
		if c.Created <= lo || c.Created > snap.RV || c.RequestValue == "" || h == nil ||
			slices.ContainsFunc(liveOn(snap.CRs, c.Node, c.Created, c), func(o *crRecord) bool { return o.OwnerUID == c.OwnerUID }) ||
			!allStates(states, func(s *state) bool {
				return s.NHCs[c.Owner].Spec.MaxInFlight != nil && s.Nodes[c.Node].Ready == corev1.ConditionTrue
			}) {
			continue
		}
		limit := h.Spec.MaxInFlight.IntValue()
		running := 0
		for _, name := range cur.selected(h) {
			if slices.ContainsFunc(snap.CRs, func(o *crRecord) bool { return o.Node == name && o.OwnerUID == c.OwnerUID && o.runningAt(c.Created) }) {
				running++
			}
		}
		if running < limit {
			continue
		}
		// The request could start only where it was pending: the node owed must be owed in every
		// such state (the states between a burst's moves are not judged).
		pending := func(s *state) bool { return s.whyNoRequest(s.NHCs[c.Owner], s.Nodes[c.Node]) == "" }
		if slices.ContainsFunc(cur.Mids, pending) || (pending(prev) && k.downOwed == nil) {
			continue
		}
		for _, d := range downOwed[c.Owner] {
			if d != c.Node && (!pending(prev) || slices.Contains(k.downOwed[c.Owner], d)) && len(liveOn(snap.CRs, d, c.Created, nil)) == 0 {
				report(invRequestWaits, "%s started a remediation for the request of a healthy node, the %d-th of maxInFlight %d, while node %s, down, was owed one wherever the request was pending in the step and got none",
					c, running, limit, cur.Nodes[d])
				break
			}
		}
	}
}

// checkHeld judges an escalation (a next-step CR, a timed-out mark): not while the gate that holds
// the node's first step is closed in every state of the step.
func (k *checker) checkHeld(c *crRecord, what string, states []*state, report func(string, string, ...any)) {
	var whys []string
	for _, s := range states {
		h := s.NHCs[c.Owner]
		if h == nil {
			return
		}
		why := s.gateClosed(h, s.Nodes[c.Node])
		if why == "" {
			return
		}
		whys = append(whys, why)
	}
	report(invHeld, "%s %s while the gate of new remediations was closed throughout the step: before it %s, after it %s", c, what, whys[0], whys[len(whys)-1])
}

// checkDeleted judges a CR deleted during the step.
func (k *checker) checkDeleted(c *crRecord, states []*state, report func(string, string, ...any)) {
	if n := states[len(states)-1].Nodes[c.Node]; n.Created.After(c.CreatedAt) {
		return // a CR of the node's previous object (replaced-node-is-new)
	}
	for _, s := range states {
		h, n := s.NHCs[c.Owner], s.Nodes[c.Node]
		if h == nil || !h.selects(n) || !h.matched(n) {
			return
		}
	}
	if c.TimedOut != 0 && c.TimedOut < c.Deleted && anyState(states, func(s *state) bool { return needsName(s.NHCs[c.Owner], c) }) {
		return // replaced by the next step, which needs its name
	}
	prev, cur := states[0], states[len(states)-1]
	report(invDeleted, "%s deleted while %s selected its node and the node was unhealthy throughout the step (before: %s, after: %s)",
		c, c.Owner, prev.Nodes[c.Node], cur.Nodes[c.Node])
}

// needsName reports whether another template of the NodeHealthCheck makes CRs of the CR's kind
// named after the node, as the CR is: a CR of that step needs the CR's name.
func needsName(h *nhc, c *crRecord) bool {
	if !namesAfterNode(c.Template) {
		return false
	}
	for _, ref := range h.Spec.TemplateRefs() {
		if ref.Name != c.Template && ref.Kind == c.Kind+"Template" && namesAfterNode(ref.Name) {
			return true
		}
	}
	return false
}

// checkFirstStep judges a CR of the first escalation step created in step cur.Step: no earlier one
// of the same NodeHealthCheck for the same failure of the node.
func (k *checker) checkFirstStep(c *crRecord, cur *state, report func(string, string, ...any)) {
	for _, o := range k.firstStepCRs {
		from := k.firstSteps[o.UID]
		if o.OwnerUID != c.OwnerUID || o.Node != c.Node || o.Template != c.Template || o.Created >= c.Created {
			continue
		}
		var span []*state
		for j := from; j < len(k.hist); j++ {
			span = append(span, k.hist[j].Mids...)
			span = append(span, k.hist[j])
		}
		config := cur.NHCs[c.Owner].Config
		if allStates(span, func(s *state) bool {
			h, n := s.NHCs[c.Owner], s.Nodes[c.Node]
			return h.Config == config && h.selects(n) && h.matched(n)
		}) {
			report(invFirstStep, "%s and %s are both first steps of one failure: %s selected %s, unhealthy, with the same templates, from step %d on",
				o, c, c.Owner, cur.Nodes[c.Node], k.hist[from].Step)
		}
	}
}

// checkRepairBudget judges a new remediation of a NodeHealthCheck with a repair budget.
func (k *checker) checkRepairBudget(c *crRecord, states []*state, report func(string, string, ...any)) {
	var budget *remediationv1alpha1.RepairBudget
	var resetAt time.Time
	for _, s := range states {
		b := s.NHCs[c.Owner].Spec.RepairBudget
		if b == nil || (budget != nil && *b != *budget) {
			return
		}
		budget = b
		if n := s.Nodes[c.Node]; n.ResetAt.After(resetAt) {
			resetAt = n.ResetAt
		}
	}
	from := states[len(states)-1].Now.Add(-budget.Window.Duration)
	// The status writer records the starts of the nodes it selects: a node deleted or not selected
	// at some moment starts afresh.
	selectedSince := -1
	for j := range k.hist {
		if anyState(append(slices.Clone(k.hist[j].Mids), k.hist[j]), func(s *state) bool {
			h := s.NHCs[c.Owner]
			return h == nil || !h.selects(s.Nodes[c.Node])
		}) {
			selectedSince = j
		}
	}
	var counted []string
	for _, o := range k.starts {
		if o != c && o.OwnerUID == c.OwnerUID && o.Node == c.Node && o.Created < c.Created && k.recorded[o.UID] &&
			k.appearedAt(o) > selectedSince && o.CreatedAt.After(resetAt) && o.CreatedAt.After(from) {
			counted = append(counted, fmt.Sprintf("%s %s at %s", o.Kind, o.Name, o.CreatedAt.Format(time.TimeOnly)))
		}
	}
	if len(counted) >= budget.MaxRemediations {
		report(invRepairBudget, "%s started a remediation after %d counted within %s (maxRemediations %d): %s", c, len(counted), budget.Window.Duration,
			budget.MaxRemediations, strings.Join(counted, ", "))
	}
}

// budgetMayBeExhausted reports whether the operator may count the node's repair budget exhausted:
// at least maxRemediations CRs of the NodeHealthCheck on the node, created at or after its reset
// and within the window, may have been recorded as starts (a status write records the oldest CR
// running on a node as a start, so a CR may count if it ever was the oldest).
func budgetMayBeExhausted(h *nhc, n node, now time.Time, crs []*crRecord) bool {
	b := h.Spec.RepairBudget
	if b == nil {
		return false
	}
	count := 0
	for _, c := range crs {
		if c.Owner == h.Name && c.Node == n.Name && !c.CreatedAt.Before(n.ResetAt) && c.CreatedAt.After(now.Add(-b.Window.Duration-time.Second)) &&
			mayBeOldest(c, crs) {
			count++
		}
	}
	return count >= b.MaxRemediations
}

// mayBeOldest reports whether the CR was, at some moment, the oldest CR of its NodeHealthCheck on
// its node: no older one outlived it.
func mayBeOldest(c *crRecord, crs []*crRecord) bool {
	for _, o := range crs {
		if o != c && o.OwnerUID == c.OwnerUID && o.Node == c.Node && o.Created < c.Created && o.liveAt(c.Created) &&
			(o.Deleted == 0 || (c.Deleted != 0 && o.Deleted >= c.Deleted)) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// withSince returns the node with its Ready condition counted from since.
func withSince(n node, since time.Time) node {
	n.Since = since
	return n
}

package health

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/lease"
)

// removing reports whether the node's removal holds its remediation back now; one that lasted
// RemovalHold or longer does not (and is recorded in the decision), one that may still end makes
// the decision come back when it would.
func removing(in Input, n *Node, d *Decision) bool {
	if n.BeingRemovedBy == "" {
		return false
	}
	if in.RemovalHold <= 0 || n.BeingRemovedSince.IsZero() {
		return true
	}
	until := n.BeingRemovedSince.Add(in.RemovalHold)
	if in.Now.Before(until) {
		d.Next = Earliest(d.Next, until)
		return true
	}
	if !slices.ContainsFunc(d.RemovalsOverdue, func(r RemovalOverdue) bool { return r.Node == n.Name }) {
		d.RemovalsOverdue = append(d.RemovalsOverdue, RemovalOverdue{Node: n.Name, By: n.BeingRemovedBy, Since: n.BeingRemovedSince})
	}
	return false
}

// removalMessage says who removes the node.
func removalMessage(n *Node, hold time.Duration) string {
	m := fmt.Sprintf("node %s is being removed by %s", n.Name, n.BeingRemovedBy)
	if hold > 0 && !n.BeingRemovedSince.IsZero() {
		m += fmt.Sprintf(" since %s; the hold ends at %s if it is not gone by then", n.BeingRemovedSince.UTC().Format(time.RFC3339),
			n.BeingRemovedSince.Add(hold).UTC().Format(time.RFC3339))
	}
	return m
}

// Decide evaluates every selected node and decides, for one NodeHealthCheck, which nodes to start
// remediating, which to skip and why, which remediations continue, and which nodes recovered.
//
// Safety rules: a node counts healthy only while it is healthy and has no remediation left; a new
// remediation starts only for an Unhealthy node, only without blockers, and only while at least
// MinHealthy nodes are healthy. Running remediations always continue, and one gate holds every new
// CR: the rules that keep a first step from starting (startHolds, holds.go: a blocker, the threshold,
// storm recovery, returning nodes, a failure domain, the exclusion label, a removal, a lease someone
// else holds, the etcd guard, ...) keep a running remediation from escalating too (escalationHolds),
// but for the few that concern new remediations only, named where the chains are.
func Decide(in Input) Decision {
	d := Decision{Observed: len(in.Nodes)}
	d.MinHealthy, d.BudgetErr = MinHealthy(len(in.Nodes), in.MinHealthy, in.MaxUnhealthy)
	var returned []time.Time // when each healthy node that came back within ReturnGrace did

	for _, n := range in.Nodes {
		h := requestedHealth(in, n, n.evaluate(in))
		// A terminating node the termination-handler MachineHealthCheck handles is that
		// MachineHealthCheck's: counted healthy, as the public operator counts it, and never
		// remediated here (its own CRs, if it had some before, continue).
		leftToMHC := h.State == Unhealthy && !n.Remediating && n.LeftToMachineHealthCheck
		// A node unhealthy only for its pending request counts by its conditions: healthy
		// (ByRequest).
		if (h.State == Healthy || leftToMHC || h.ByRequest) && !n.Remediating {
			d.Healthy++
			if at, ok := cameBack(in, n); ok && h.State == Healthy {
				returned = append(returned, at)
			}
		}
		d.Next = Earliest(d.Next, h.Next)
		nd := NodeDecision{Name: n.Name, Health: h}
		switch {
		case leftToMHC:
			nd.Action, nd.SkipReason = Skip, SkipMachineHealthCheck
			nd.SkipMessage = fmt.Sprintf("node %s is terminating and left to the termination-handler MachineHealthCheck", n.Name)
		case h.State == Healthy && n.Remediating:
			nd.Action = Recovered
			if until, delayed := healthyDelayUntil(in.HealthyDelay, n, in.Now); delayed {
				nd.Action = HealthyDelayed
				nd.AwaitingConfirmation = until.IsZero()
				d.Next = Earliest(d.Next, until)
			}
		case h.State == Healthy:
			continue
		case n.Remediating:
			nd.Action = ContinueRemediation
			if len(n.CRs) > 0 {
				nd.Escalation = Escalate(EscalationInput{Steps: in.Steps, CRs: n.CRs, Now: in.Now, Unhealthy: h.State == Unhealthy})
			}
		case h.State == SoonUnhealthy:
			nd.Action = Wait
		default:
			nd.Action = StartRemediation // confirmed or downgraded to Skip below
		}
		d.Nodes = append(d.Nodes, nd)
	}

	// One gate for every new remediation of this NodeHealthCheck.
	var reason SkipReason
	var message string
	switch {
	case len(in.Blockers) > 0:
		reason, message = in.Blockers[0].Reason, in.Blockers[0].Message
	case d.BudgetErr != nil:
		reason, message = SkipInvalidBudget, d.BudgetErr.Error()
	case d.Healthy < d.MinHealthy:
		reason = SkipThreshold
		message = fmt.Sprintf("%d of %d selected nodes are healthy, %d required", d.Healthy, d.Observed, d.MinHealthy)
	case d.Healthy-len(returned) < d.MinHealthy && slices.ContainsFunc(d.Nodes, acts):
		// The threshold holds only with nodes that just came back: wait until enough of them have
		// been back for ReturnGrace (the oldest first).
		slices.SortFunc(returned, func(a, b time.Time) int { return a.Compare(b) })
		settled := d.Healthy - len(returned)
		until := returned[d.MinHealthy-settled-1].Add(in.ReturnGrace)
		d.Next = Earliest(d.Next, until)
		reason = SkipNodesReturning
		message = fmt.Sprintf("%d of %d selected nodes are healthy, %d required, but %d of them came back less than %s ago; "+
			"no new remediation before %s, so that nodes still coming back are not remediated",
			d.Healthy, d.Observed, d.MinHealthy, len(returned), in.ReturnGrace, until.UTC().Format(time.RFC3339))
	}
	if in.StormCooldown != nil {
		// Re-evaluated on every decision, whether or not a node is unhealthy right now.
		violated := d.BudgetErr == nil && d.Healthy < d.MinHealthy
		var blocked bool
		var end time.Time
		d.Storm, blocked, end = NextStorm(in.Storm, violated, *in.StormCooldown, in.Now)
		d.Next = Earliest(d.Next, end)
		if blocked && reason == "" {
			reason = SkipStorm
			message = fmt.Sprintf("storm recovery: the healthy-node threshold was violated; no new remediation until it has held for %s", *in.StormCooldown)
		}
	}
	slices.SortFunc(d.Nodes, func(a, b NodeDecision) int { return strings.Compare(a.Name, b.Name) })
	byName := map[string]*Node{}
	controlPlaneBusy := in.ControlPlaneElsewhere
	for i := range in.Nodes {
		n := &in.Nodes[i]
		byName[n.Name] = n
		if n.ControlPlane && n.Remediating {
			controlPlaneBusy = n.Name
		}
	}
	skip := func(nd *NodeDecision, r SkipReason, m string) { nd.Action, nd.SkipReason, nd.SkipMessage = Skip, r, m }
	d.DomainsHeld = failureDomainsHeld(in, d.Nodes)
	c := &holdContext{in: in, d: &d, gateReason: reason, gateMessage: message, domains: d.DomainsHeld, controlPlaneBusy: controlPlaneBusy}
	var first *Step
	if len(in.Steps) > 0 {
		first = Escalate(EscalationInput{Steps: in.Steps, Now: in.Now, Unhealthy: true}).Next
	}
	for i := range d.Nodes {
		nd := &d.Nodes[i]
		n := byName[nd.Name]
		switch nd.Action {
		case ContinueRemediation:
			holdEscalation(c, n, nd)
		case StartRemediation:
			if r, m := firstHold(startHolds, c, n); r != "" {
				skip(nd, r, m)
				continue
			}
			if n.ControlPlane {
				c.controlPlaneBusy = n.Name
			}
			nd.Step = first
		}
	}
	limitRequests(&d, skip)
	if in.MaxInFlight != nil {
		limitInFlight(in, &d, skip)
	}
	return d
}

// limitRequests lets the starts of nodes unhealthy only for their remediation request
// (NodeHealth.ByRequest, counted healthy) take the threshold's headroom, in the order of their
// requests: each start leaves one healthy node fewer, and none may leave fewer than MinHealthy. The
// nodes that are really down were counted unhealthy already; their starts take nothing.
func limitRequests(d *Decision, skip func(*NodeDecision, SkipReason, string)) {
	var requests []*NodeDecision
	for i := range d.Nodes {
		if nd := &d.Nodes[i]; nd.Action == StartRemediation && nd.Health.ByRequest {
			requests = append(requests, nd)
		}
	}
	slices.SortStableFunc(requests, func(a, b *NodeDecision) int { return a.Health.Requested.Compare(b.Health.Requested) })
	headroom := d.Healthy - d.MinHealthy
	for _, nd := range requests {
		if headroom <= 0 {
			skip(nd, SkipRequestThreshold, fmt.Sprintf("%d of %d selected nodes are healthy, %d required: remediating node %s for its request would leave fewer; it waits",
				d.Healthy, d.Observed, d.MinHealthy, nd.Name))
			nd.Step = nil
			continue
		}
		headroom--
	}
}

// failureDomainsHeld returns, for each failure domain where more selected nodes than the bound are
// unhealthy or about to be (under remediation or not; a node unhealthy only for its remediation
// request does not count), why no new remediation starts there. An invalid bound holds every domain.
// A node that moved between domains lately (Node.OtherDomains) counts as failing in each of them,
// and in no domain's size.
func failureDomainsHeld(in Input, decisions []NodeDecision) map[string]string {
	if in.FailureDomain == nil {
		return nil
	}
	size, failing := map[string]int{}, map[string]int{}
	state := map[string]NodeHealth{}
	for _, nd := range decisions {
		state[nd.Name] = nd.Health
	}
	for _, n := range in.Nodes {
		// Every domain a node is or was in lately is judged, even one it only counts failing in.
		size[n.Domain] += 0
		if len(n.OtherDomains) == 0 {
			size[n.Domain]++
		}
		if h, listed := state[n.Name]; listed && h.State != Healthy && !h.ByRequest {
			failing[n.Domain]++
			for _, other := range n.OtherDomains {
				failing[other]++
				size[other] += 0
			}
		}
	}
	held := map[string]string{}
	key := in.FailureDomain.TopologyKey
	for domain, total := range size {
		bound, err := scaled(&in.FailureDomain.MaxUnhealthy, total)
		name := fmt.Sprintf("%s=%s", key, domain)
		if domain == NoDomain {
			name = fmt.Sprintf("of the nodes without label %s", key)
		}
		switch {
		case err != nil:
			held[domain] = fmt.Sprintf("failureDomain.maxUnhealthy: %v", err)
		case failing[domain] > bound:
			held[domain] = fmt.Sprintf("in failure domain %s %d of %d selected nodes are unhealthy or about to be, at most %d allowed (failureDomain.maxUnhealthy %s); "+
				"no new remediation starts there, other domains go on", name, failing[domain], total, bound, in.FailureDomain.MaxUnhealthy.String())
		}
	}
	return held
}

// heldDomain says why a domain the node is in, or was in lately, holds its remediation ("": none
// does).
func heldDomain(held map[string]string, n *Node) string {
	if why := held[n.Domain]; why != "" {
		return why
	}
	for _, other := range n.OtherDomains {
		if why := held[other]; why != "" {
			return fmt.Sprintf("node %s was in failure domain %s lately: %s", n.Name, other, why)
		}
	}
	return ""
}

// limitInFlight lets at most in.MaxInFlight selected nodes be under remediation: the nodes already
// under remediation (their CRs run, or are kept by healthyDelay; not those whose remediation has
// ended, Stalled) and the unselected nodes whose CRs are kept (InFlightUnselected) count first, then
// the starts go, and the others wait. Nodes that are really down go first, in the order they
// became unhealthy, then nodes unhealthy only for their remediation request, in the order of their
// requests (a node can write its own request: requests never take a slot ahead of a failure); then
// by name. An invalid limit starts nothing.
func limitInFlight(in Input, d *Decision, skip func(*NodeDecision, SkipReason, string)) {
	limit, err := InFlightLimit(len(in.Nodes), in.MaxInFlight)
	running := in.InFlightUnselected
	var starts []*NodeDecision
	for i := range d.Nodes {
		switch nd := &d.Nodes[i]; nd.Action {
		case ContinueRemediation, HealthyDelayed:
			if nd.Stalled() == "" {
				running++
			}
		case StartRemediation:
			starts = append(starts, nd)
		}
	}
	slices.SortStableFunc(starts, func(a, b *NodeDecision) int {
		// Nodes that are really down first; then those unhealthy only for their request.
		if a.Health.ByRequest != b.Health.ByRequest {
			if b.Health.ByRequest {
				return -1
			}
			return 1
		}
		if c := a.Health.UnhealthySince.Compare(b.Health.UnhealthySince); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, nd := range starts {
		switch {
		case err != nil:
			skip(nd, SkipInvalidBudget, err.Error())
		case running >= limit:
			replaced := ""
			if in.InFlightUnselected > 0 {
				replaced = fmt.Sprintf(" (%d of them no longer selected, their CRs kept: being replaced)", in.InFlightUnselected)
			}
			skip(nd, SkipInFlight, fmt.Sprintf("%d of at most %d selected nodes are under remediation%s (maxInFlight %s); node %s waits until one ends, "+
				"the nodes that became unhealthy first going first", running, limit, replaced, in.MaxInFlight.String(), nd.Name))
			nd.Step = nil
		default:
			running++
		}
	}
}

// acts reports whether a node decision creates a CR or times one out now.
func acts(n NodeDecision) bool {
	return n.Action == StartRemediation || (n.Action == ContinueRemediation && n.Escalation.Due())
}

// holdEscalation applies the gate of new remediations (escalationHolds) to a running remediation
// whose escalation is due. A held escalation times nothing out and starts nothing; the running CR
// stays. An escalation that is not due makes the decision come back at its deadline.
func holdEscalation(c *holdContext, n *Node, nd *NodeDecision) {
	if !nd.Escalation.Due() {
		c.d.Next = Earliest(c.d.Next, nd.Escalation.Deadline)
		return
	}
	if r, m := firstHold(escalationHolds, c, n); r != "" {
		nd.SkipReason, nd.SkipMessage = r, fmt.Sprintf("escalation of node %s held: %s", n.Name, m)
		withheld := nd.Escalation
		nd.Escalation.TimeOut, nd.Escalation.Next, nd.Escalation.Exhausted = nil, nil, false
		nd.Escalation.Withheld = &withheld
	}
}

// leasedMessage says who holds the node's lease, and until when.
func leasedMessage(n *Node) string {
	until := "it releases it (the lease has no expiry)"
	if !n.LeasedUntil.IsZero() {
		until = n.LeasedUntil.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("node %s is leased by %s until %s (for example for maintenance)", n.Name, n.LeasedBy, until)
}

// recheck is when a hold that ends at until (zero: unknown) is looked at again.
func recheck(until, now time.Time) time.Time {
	if until.IsZero() || !until.After(now) {
		return now.Add(lease.Recheck)
	}
	return until
}

// MayAct returns the names of the nodes whose decision could create a CR or time one out now, were
// nothing held: unhealthy nodes without a remediation, and remediating ones whose escalation is
// due. Their leases and the etcd guard decide whether they do (Node.LeasedBy, Node.EtcdGuard), so
// a gatherer reads those for these nodes only.
func (in Input) MayAct() []string {
	var out []string
	for _, n := range in.Nodes {
		h := requestedHealth(in, n, n.evaluate(in))
		switch {
		case h.State != Unhealthy:
		case !n.Remediating:
			out = append(out, n.Name)
		case len(n.CRs) > 0 && Escalate(EscalationInput{Steps: in.Steps, CRs: n.CRs, Now: in.Now, Unhealthy: true}).Due():
			out = append(out, n.Name)
		}
	}
	return out
}

// evaluate is the node's verdict from its conditions (EvaluateNode), each whose time is not trusted
// counting from when this process saw it change (CountFrom).
func (n Node) evaluate(in Input) NodeHealth {
	if len(n.CountFrom) == 0 {
		return EvaluateNode(in.UnhealthyConditions, n.Conditions, in.Now)
	}
	conditions := slices.Clone(n.Conditions)
	for i := range conditions {
		if from, ok := n.CountFrom[conditions[i].Type]; ok {
			conditions[i].LastTransitionTime = metav1.NewTime(from)
		}
	}
	return EvaluateNode(in.UnhealthyConditions, conditions, in.Now)
}

// healthyDelayUntil reports whether healthyDelay still keeps a recovered node's CRs, and until when
// (zero: until the node is confirmed, for a negative delay).
func healthyDelayUntil(delay *time.Duration, n Node, now time.Time) (time.Time, bool) {
	if delay == nil || *delay == 0 || n.ConfirmedHealthy {
		return time.Time{}, false
	}
	if *delay < 0 {
		return time.Time{}, true
	}
	since := n.HealthySince
	if since.IsZero() || since.After(now) {
		since = now
	}
	until := since.Add(*delay)
	return until, now.Before(until)
}

// cameBack reports whether a node that is healthy now came back less than in.ReturnGrace ago, and
// when: the latest status change of a condition whose type an unhealthy condition names (its
// lastTransitionTime, or when this process saw it change if that is later), if it is within
// ReturnGrace of now and at least ReturnGrace after the node was created (sooner, the node joined
// the cluster rather than came back).
func cameBack(in Input, n Node) (time.Time, bool) {
	if in.ReturnGrace <= 0 {
		return time.Time{}, false
	}
	var at time.Time
	for _, c := range n.Conditions {
		if !slices.ContainsFunc(in.UnhealthyConditions, func(u remediationv1alpha1.UnhealthyCondition) bool { return u.Type == c.Type }) {
			continue
		}
		changed := c.LastTransitionTime.Time
		if seen := n.SeenChanging[c.Type]; seen.After(changed) {
			changed = seen
		}
		if changed.After(at) {
			at = changed
		}
	}
	if at.After(in.Now) {
		at = in.Now // a skewed clock: it just changed
	}
	if at.IsZero() || !in.Now.Before(at.Add(in.ReturnGrace)) {
		return time.Time{}, false
	}
	if !n.Created.IsZero() && at.Sub(n.Created) < in.ReturnGrace {
		return time.Time{}, false
	}
	return at, true
}

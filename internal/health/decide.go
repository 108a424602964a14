package health

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/lease"
)

// Node is what a decision needs to know about one selected node.
type Node struct {
	// Name is the node's name.
	Name string
	// Conditions are the node's status conditions.
	Conditions []corev1.NodeCondition
	// Remediating is true while at least one remediation CR of this NodeHealthCheck exists for the
	// node (including CRs that are being deleted).
	Remediating bool
	// HealthySince is when the node's conditions became healthy while it had remediation CRs (from
	// status); zero when not known yet, which counts as now.
	HealthySince time.Time
	// ConfirmedHealthy is true when an administrator put the manually-confirmed-healthy annotation on
	// the node: healthyDelay does not hold it.
	ConfirmedHealthy bool
	// Excluded is true when the node's exclude-from-remediation label is "true": no new remediation.
	Excluded bool
	// ControlPlane is true for control-plane (or master) nodes: at most one is remediated at a time.
	ControlPlane bool
	// LeftToMachineHealthCheck is true when the default termination-handler MachineHealthCheck
	// handles the node (OpenShift): no new remediation.
	LeftToMachineHealthCheck bool
	// CoveredBy names the Cluster API MachineHealthCheck ("namespace/name") that covers the node's
	// Machine: it remediates the node, and this NodeHealthCheck starts none.
	CoveredBy string
	// RemediatedElsewhere names another NodeHealthCheck that has a remediation CR for the node: the
	// first one wins, and this one starts none (never two remediators on one node).
	RemediatedElsewhere string
	// ElsewhereUnknown, when set, says why another NodeHealthCheck may remediate the node unseen (its
	// stored status lists the node with CRs of a kind that cannot be read now): unknown is not free,
	// this one starts none, as for RemediatedElsewhere.
	ElsewhereUnknown string
	// Repairs are when the node's remediations started, as far as the repair budget counts them
	// (recorded in status, the running one's, after the node's reset annotation).
	Repairs []time.Time
	// Domain is the node's failure domain: the value of spec.failureDomain.topologyKey's label
	// (NoDomain when the node has none).
	Domain string
	// OtherDomains are the failure domains the node was in lately besides Domain (its label
	// changed: a kubelet may set topology.kubernetes.io/zone on itself). A node that moved cannot
	// escape a domain or weigh on another's bound: while it is unhealthy, about to be or under
	// remediation it counts in each of its domains, it counts in no domain's size, and a domain
	// held in any of them holds it.
	OtherDomains []string
	// BeingRemovedBy says who is removing the node (nodetaints.BeingRemoved), "" when nobody is; only
	// set where spec.skipNodesBeingRemoved is: no new remediation of it starts and its running one
	// does not escalate, until the removal has lasted Input.RemovalHold from BeingRemovedSince (when
	// it began, or when this process first saw it).
	BeingRemovedBy    string
	BeingRemovedSince time.Time
	// Created is when the node object was created (zero: not known). A healthy node whose
	// conditions changed at least ReturnGrace after it was created came back (see Input.ReturnGrace);
	// one that turned healthy sooner joined the cluster.
	Created time.Time
	// SeenChanging is when this process's watch last showed the status of each condition type
	// change (on the decisions' clock), besides what the condition's lastTransitionTime says: a
	// node that came back counts as such whatever wrote its condition (kwok's stock stages keep the
	// creation time). Empty for changes before the process started: the timestamp alone counts then.
	SeenChanging map[corev1.NodeConditionType]time.Time
	// CountFrom is, for each condition whose lastTransitionTime is not to be trusted (its writer's
	// clock is off, or the time was forged: watch.ConditionChanges), when it counts from instead:
	// when this process saw it change, or first saw it. Nil: every time is trusted.
	CountFrom map[corev1.NodeConditionType]time.Time
	// CRs are the node's remediation CRs of this NodeHealthCheck as escalation sees them (for a
	// dry-run NodeHealthCheck without real CRs, its simulated ones): a running remediation's
	// escalation is decided over them and Input.Steps.
	CRs []StepCR
	// Simulated says CRs are a dry-run NodeHealthCheck's simulated remediations, not real CRs.
	Simulated bool
	// LeasedBy names another party (a maintenance operator, another NodeHealthCheck) that holds the
	// node's lease now, and LeasedUntil when that hold expires (zero: until it is released). Read
	// only for the nodes Input.MayAct names; no remediation starts or escalates meanwhile.
	LeasedBy    string
	LeasedUntil time.Time
	// Refused says why the API server refuses the node's remediation CRs for good (a remediator's
	// role or schema; recorded by the remediation controller after bounded retries), until
	// RefusedUntil: no remediation starts or escalates meanwhile. Read only for the nodes
	// Input.MayAct names.
	Refused      string
	RefusedUntil time.Time
	// EtcdGuard, for a control-plane node, says why disrupting it now could break etcd quorum
	// (OpenShift's etcd guard); empty when it may be disrupted or the guard does not apply. Read
	// only for the nodes Input.MayAct names; no remediation starts or escalates meanwhile.
	EtcdGuard string
	// Requested is the time of the node's pending remediation request (spec.allowRemediationRequests:
	// the node's request annotation, not answered yet, not expired, not dated after now); zero: none.
	// A node without a remediation counts as unhealthy since then, for its own remediation only
	// (NodeHealth.ByRequest).
	Requested time.Time
	// RunningRequest is the time of the request the node's running remediation answers (its CRs carry
	// it); zero: none. Until the remediation is answered (requestAnswered), the node counts as
	// unhealthy whatever its conditions say, so that its CR is not removed as recovered before the
	// remediator acted.
	RunningRequest time.Time
	// RequestBaseline is the node as the remediation answering RunningRequest found it (nil: not
	// recorded; the conditions' lastTransitionTime is then compared with the first CR's creation).
	RequestBaseline *RequestBaseline
}

// RequestBaseline is a node as the remediation answering its request found it.
type RequestBaseline struct {
	// At is when, on the decisions' clock.
	At time.Time
	// Conditions are the node's conditions of the types the unhealthy conditions name.
	Conditions []corev1.NodeCondition
}

// SkipReason says why an unhealthy node gets no new remediation.
type SkipReason string

// Skip reasons, in the order Decide applies them.
const (
	// SkipDisabled: the NodeHealthCheck is disabled (missing or invalid template, conflicting MHC).
	SkipDisabled SkipReason = "Disabled"
	// SkipPaused: spec.pauseRequests is set.
	SkipPaused SkipReason = "Paused"
	// SkipUpgrade: a cluster upgrade is in progress or its state is not known yet.
	SkipUpgrade SkipReason = "ClusterUpgrading"
	// SkipInvalidBudget: minHealthy or maxUnhealthy cannot be resolved against the selected nodes.
	SkipInvalidBudget SkipReason = "InvalidBudget"
	// SkipThreshold: fewer healthy nodes than the budget requires.
	SkipThreshold SkipReason = "HealthyNodeThreshold"
	// SkipStorm: storm recovery holds new remediations until its cooldown has passed.
	SkipStorm SkipReason = "StormRecovery"
	// SkipNodesReturning: the healthy-node threshold holds only thanks to nodes that came back less
	// than Input.ReturnGrace ago; new remediations wait, so that nodes still coming back after an
	// outage are not remediated.
	SkipNodesReturning SkipReason = "NodesReturning"
	// SkipMachineHealthCheck: the termination-handler MachineHealthCheck handles the node; it counts
	// healthy and is not listed in status (the public operator treats it as not matching).
	SkipMachineHealthCheck SkipReason = "HandledByMachineHealthCheck"
	// SkipExcluded: the node carries the exclude-from-remediation label.
	SkipExcluded SkipReason = "ExcludedFromRemediation"
	// SkipRepairBudget: the node was remediated Input.RepairBudget.Max times within its window.
	SkipRepairBudget SkipReason = "RepairBudgetExhausted"
	// SkipControlPlane: another control-plane node is being remediated.
	SkipControlPlane SkipReason = "ControlPlaneRemediationRunning"
	// SkipCoveredByMachineHealthCheck: a Cluster API MachineHealthCheck covers the node's Machine.
	SkipCoveredByMachineHealthCheck SkipReason = "CoveredByMachineHealthCheck"
	// SkipRemediatedElsewhere: another NodeHealthCheck remediates the node.
	SkipRemediatedElsewhere SkipReason = "RemediatedByAnotherNodeHealthCheck"
	// SkipLeased: another party holds the node's lease (Node.LeasedBy).
	SkipLeased SkipReason = "NodeLeased"
	// SkipCreateRefused: the API server refuses the node's CRs for good (Node.Refused).
	SkipCreateRefused SkipReason = "RemediationRefused"
	// SkipEtcdQuorum: disrupting the control-plane node could break etcd quorum (Node.EtcdGuard).
	SkipEtcdQuorum SkipReason = "EtcdQuorum"
	// SkipClockSkew: the manager's clock is too far from the API server's to judge durations
	// (a Blocker).
	SkipClockSkew SkipReason = "ClockSkew"
	// SkipInFlight: spec.maxInFlight nodes are under remediation already; the node waits until one
	// ends (the node that became unhealthy first goes first).
	SkipInFlight SkipReason = "RemediationsInFlight"
	// SkipBeingRemoved: the node is being removed (its deletion, the cluster autoscaler, Karpenter)
	// and spec.skipNodesBeingRemoved is set, for at most Input.RemovalHold.
	SkipBeingRemoved SkipReason = "NodeBeingRemoved"
	// SkipRequestThreshold: the node is unhealthy only for its remediation request (counted healthy),
	// and starting it would leave fewer healthy nodes than the threshold requires; it waits. A
	// node's own rule: running remediations still escalate.
	SkipRequestThreshold SkipReason = "RequestHeldByThreshold"
	// SkipFailureDomain: in the node's failure domain (spec.failureDomain) more selected nodes than
	// its bound are unhealthy or about to be; no new remediation starts there.
	SkipFailureDomain SkipReason = "FailureDomainUnhealthy"
	// SkipDryRun: the NodeHealthCheck is a dry run (Input.DryRun), and the node's remediation is a
	// real one that ran before dry-run was set: it is neither marked timed out (its remediator would
	// give up the running step) nor followed by its next step; it runs until it ends. Escalations
	// only: a dry run's new remediations are simulated.
	SkipDryRun SkipReason = "DryRun"
)

// Blocker keeps new remediations from starting, and running ones from escalating; running ones
// continue.
type Blocker struct {
	// Reason is the skip reason reported for the nodes it blocks.
	Reason SkipReason
	// Message explains it to an administrator.
	Message string
}

// Input is everything one NodeHealthCheck's decision depends on.
type Input struct {
	// Now is the current time.
	Now time.Time
	// Nodes are the nodes the selector selects.
	Nodes []Node
	// UnhealthyConditions are the spec's unhealthy conditions (defaults applied).
	UnhealthyConditions []remediationv1alpha1.UnhealthyCondition
	// MinHealthy and MaxUnhealthy are the spec's budget.
	MinHealthy, MaxUnhealthy *intstr.IntOrString
	// Blockers keep new remediations from starting and running ones from escalating, most important
	// first.
	Blockers []Blocker
	// Steps are the spec's remediation steps: a start carries the first one, and a running
	// remediation escalates through them.
	Steps []Step
	// HealthyDelay keeps a recovered node's CRs this long after it became healthy; negative: until an
	// administrator confirms the node; nil or zero: no delay.
	HealthyDelay *time.Duration
	// StormCooldown turns on storm recovery (nil: off); Storm is its state from the last decision.
	StormCooldown *time.Duration
	Storm         StormState
	// ControlPlaneElsewhere names a control-plane node that another NodeHealthCheck remediates: no
	// control-plane node starts here meanwhile (one at a time across all NodeHealthChecks).
	ControlPlaneElsewhere string
	// ControlPlaneUnknown, when set, says why a control-plane remediation elsewhere cannot be ruled
	// out (remediation CRs that cannot be listed): no control-plane node starts here meanwhile.
	ControlPlaneUnknown string
	// ReturnGrace turns on the returning-node hold (zero: off). A node "came back" when its
	// unhealthy-condition types last changed status less than ReturnGrace ago while it is healthy,
	// at least ReturnGrace after it was created. While the healthy-node threshold holds only by
	// counting such nodes, no new remediation starts: after an outage ends, the nodes still
	// unhealthy are likely coming back too (their kubelets start, the node lifecycle controller has
	// not seen them yet). The hold lasts until enough of them have been back for ReturnGrace, and
	// never touches a pool whose threshold holds without them: an isolated failure starts at once.
	ReturnGrace time.Duration
	// RepairBudget limits how often one node is remediated (nil: no limit): a node whose Repairs
	// fill it gets no new remediation until the oldest counted one leaves the window.
	RepairBudget *RepairBudget
	// MaxInFlight limits how many selected nodes are under remediation at once (nil: no limit): a
	// count, or a percentage of the selected nodes rounded up (at least one). A remediation that has
	// ended without the node recovering (NodeDecision.Stalled) holds no slot.
	MaxInFlight *intstr.IntOrString
	// InFlightUnselected counts the nodes the NodeHealthCheck no longer selects whose remediation CRs
	// are kept (a node deleted and replaced while its CR says PermanentNodeDeletionExpected, a CR a
	// remediator's finalizer keeps, a paused NodeHealthCheck's): under maxInFlight they hold a slot,
	// so a flood of replacements does not run above the bound.
	InFlightUnselected int
	// FailureDomain bounds the unhealthy nodes per failure domain (Node.Domain); nil: no bound.
	FailureDomain *FailureDomain
	// RemovalHold bounds how long a removal holds a node's remediation back (Node.BeingRemovedBy):
	// a removal that has not completed by then (a drain that never ends, a stuck finalizer) holds it
	// no longer, so a broken node is not left unremediated for ever. Zero: no bound.
	RemovalHold time.Duration
	// DryRun says the NodeHealthCheck creates no CR (spec.dryRun): its nodes' remediations are
	// simulated (Node.Simulated), and the real ones that ran before dry-run was set escalate no
	// further (SkipDryRun).
	DryRun bool
}

// FailureDomain bounds, in each failure domain, how many selected nodes may be unhealthy or about
// to be for a new remediation to start there: a count, or a percentage of the domain's selected
// nodes rounded up.
type FailureDomain struct {
	// TopologyKey names the label, for the messages.
	TopologyKey  string
	MaxUnhealthy intstr.IntOrString
}

// NoDomain is the failure domain of the nodes without the topology key's label: one domain of
// their own.
const NoDomain = ""

// Action is what to do about one node.
type Action int

const (
	// NoAction: the node is healthy and has no remediation.
	NoAction Action = iota
	// Wait: the node is soon unhealthy and has no remediation; look again at NodeHealth.Next.
	Wait
	// StartRemediation: the node is unhealthy, has no remediation, and nothing blocks one.
	StartRemediation
	// Skip: the node is unhealthy and has no remediation, but SkipReason blocks a new one.
	Skip
	// ContinueRemediation: the node is not healthy and its remediation runs; NodeDecision.Escalation
	// says whether a step times out and which step starts now.
	ContinueRemediation
	// Recovered: the node is healthy again and still has remediation CRs: remove them.
	Recovered
	// HealthyDelayed: the node is healthy again, but healthyDelay keeps its remediation CRs.
	HealthyDelayed
)

func (a Action) String() string {
	switch a {
	case NoAction:
		return "NoAction"
	case Wait:
		return "Wait"
	case StartRemediation:
		return "StartRemediation"
	case Skip:
		return "Skip"
	case ContinueRemediation:
		return "ContinueRemediation"
	case Recovered:
		return "Recovered"
	case HealthyDelayed:
		return "HealthyDelayed"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// NodeDecision is the decision about one node.
type NodeDecision struct {
	// Name is the node's name.
	Name string
	// Health is the node's health verdict.
	Health NodeHealth
	// Action is what to do.
	Action Action
	// SkipReason and SkipMessage say why Action is Skip, or, for ContinueRemediation, why an
	// escalation that is due is held (EscalationHeld).
	SkipReason  SkipReason
	SkipMessage string
	// Step is, for StartRemediation, the first step to create (nil when the spec has none).
	Step *Step
	// Escalation is, for ContinueRemediation, what the running remediation does now: the CRs to time
	// out and the next step. Held by a blocker (EscalationHeld), it times nothing out and starts
	// nothing, and Escalation.Withheld says what it would have done.
	Escalation Escalation
	// AwaitingConfirmation is set, for HealthyDelayed, when the delay lasts until an administrator
	// confirms the node (a negative healthyDelay).
	AwaitingConfirmation bool
}

// StallReason says why a remediation has ended without the node being done with: it holds no
// maxInFlight slot, and is reported so that it is not forgotten.
type StallReason string

const (
	// StallStepsExhausted: every step ran, and the last one timed out or failed (its CR is marked);
	// the node is still unhealthy and nothing is left to try (a machine dead for good).
	StallStepsExhausted StallReason = "StepsExhausted"
	// StallAwaitingConfirmation: the node is healthy again, and its CRs wait for an administrator's
	// manual confirmation (a negative healthyDelay).
	StallAwaitingConfirmation StallReason = "AwaitingConfirmation"
)

// Stalled says why the node's remediation has ended without the node being done with ("": it has
// not): every step exhausted, or waiting for manual confirmation.
func (n NodeDecision) Stalled() StallReason {
	switch {
	case n.Action == ContinueRemediation && n.Escalation.Exhausted && len(n.Escalation.TimeOut) == 0:
		return StallStepsExhausted
	case n.Action == HealthyDelayed && n.AwaitingConfirmation:
		return StallAwaitingConfirmation
	}
	return ""
}

// EscalationHeld reports whether a running remediation's escalation is due but held back by the
// rule that holds new remediations (SkipReason says which).
func (n NodeDecision) EscalationHeld() bool {
	return n.Action == ContinueRemediation && n.SkipReason != ""
}

// Decision is the verdict for one NodeHealthCheck.
type Decision struct {
	// Observed is the number of selected nodes.
	Observed int
	// Healthy is the number of selected nodes that are healthy and have no remediation left (and of
	// those left to the termination-handler MachineHealthCheck).
	Healthy int
	// MinHealthy is the resolved budget: new remediations start only while Healthy >= MinHealthy.
	MinHealthy int
	// BudgetErr is set when the budget cannot be resolved; no remediation starts then.
	BudgetErr error
	// Nodes holds a decision for every node that is not simply healthy (Action != NoAction), sorted
	// by name.
	Nodes []NodeDecision
	// Next is the earliest time the decision changes without a new event; zero when nothing is
	// pending. Controllers requeue at it.
	Next time.Time
	// Storm is storm recovery's new state (zero when it is off).
	Storm StormState
	// DomainsHeld are the failure domains (spec.failureDomain) over their bound, with why: no new
	// remediation starts there (nil without failure domains).
	DomainsHeld map[string]string
	// RemovalsOverdue are the nodes whose removal has lasted Input.RemovalHold or longer without
	// completing: it holds their remediation back no longer.
	RemovalsOverdue []RemovalOverdue
}

// RemovalOverdue is a node whose removal lasted longer than Input.RemovalHold.
type RemovalOverdue struct {
	// Node names the node, By who removes it, Since since when.
	Node, By string
	Since    time.Time
}

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

// Started returns the names of the nodes whose remediation starts now.
func (d *Decision) Started() []string { return d.names(StartRemediation) }

// Listed reports whether status.unhealthyNodes lists the node, as the public operator lists it: it
// matches an unhealthy condition for its duration (whether or not its remediation may start), is
// being remediated, or recovered while its CRs remain. A node left to the termination-handler
// MachineHealthCheck is not listed, nor is a soon-unhealthy one without CRs.
func (n NodeDecision) Listed() bool {
	switch n.Action {
	case StartRemediation, ContinueRemediation, Recovered, HealthyDelayed:
		return true
	case Skip:
		return n.SkipReason != SkipMachineHealthCheck
	}
	return false
}

// Held returns the running remediations whose escalation is due but held.
func (d *Decision) Held() []NodeDecision {
	var out []NodeDecision
	for _, n := range d.Nodes {
		if n.EscalationHeld() {
			out = append(out, n)
		}
	}
	return out
}

// Stalled returns the nodes whose remediation has ended without them being done with, with why
// (NodeDecision.Stalled).
func (d *Decision) Stalled() []NodeDecision {
	var out []NodeDecision
	for _, n := range d.Nodes {
		if n.Stalled() != "" {
			out = append(out, n)
		}
	}
	return out
}

// Skipped returns the nodes that need a remediation that may not start now.
func (d *Decision) Skipped() []NodeDecision {
	var out []NodeDecision
	for _, n := range d.Nodes {
		if n.Action == Skip {
			out = append(out, n)
		}
	}
	return out
}

func (d *Decision) names(a Action) []string {
	var out []string
	for _, n := range d.Nodes {
		if n.Action == a {
			out = append(out, n.Name)
		}
	}
	return out
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

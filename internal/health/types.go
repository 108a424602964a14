package health

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
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

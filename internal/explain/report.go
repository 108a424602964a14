package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/outcome"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// The shape of kubectl nhc explain -o json|yaml (docs/kubectl-nhc.md documents it field by field).
// It is versioned like a Kubernetes kind, though no API server serves it: a field is only added
// within a version; renaming or removing one, or changing its meaning, takes a new APIVersion.
const (
	// APIVersion is the apiVersion of every explanation.
	APIVersion = "explain.remediation.medik8s.io/v1alpha1"
	// NodeExplanationKind is the kind of kubectl nhc explain node's answer.
	NodeExplanationKind = "NodeExplanation"
	// NodeHealthCheckExplanationKind is the kind of kubectl nhc explain nhc's answer.
	NodeHealthCheckExplanationKind = "NodeHealthCheckExplanation"
)

// The output formats of Options.Output.
const (
	// OutputText is the text for people (the default, "").
	OutputText = ""
	// OutputJSON is the explanation as indented JSON.
	OutputJSON = "json"
	// OutputYAML is the explanation as YAML.
	OutputYAML = "yaml"
)

// NodeExplanation is kubectl nhc explain node's answer as data.
type NodeExplanation struct {
	metav1.TypeMeta `json:",inline"`
	// DecidedAt is the time the decisions were made at.
	DecidedAt metav1.Time `json:"decidedAt"`
	// Node is the node as read (Exists false: it is gone, and only recorded outcomes are given).
	Node NodeState `json:"node"`
	// NodeHealthChecks are those that select the node, own remediation CRs for it, or recorded how
	// its remediations ended, sorted by name.
	NodeHealthChecks []NodeVerdict `json:"nodeHealthChecks"`
	// NotSelectedBy are the other NodeHealthChecks, which have nothing to say about the node.
	NotSelectedBy []string `json:"notSelectedBy,omitempty"`
	// Settings are the operator's settings the decisions used, and whence (absent for a gone node).
	Settings *Settings `json:"settings,omitempty"`
	// Forbidden are the kinds the user may not read, taken as absent (a partial answer).
	Forbidden []string `json:"forbidden,omitempty"`
}

// NodeState is a node as explain read it.
type NodeState struct {
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
	// Conditions are the node's conditions: type, status and last transition.
	Conditions []NodeCondition `json:"conditions,omitempty"`
}

// NodeCondition is one of a node's conditions.
type NodeCondition struct {
	Type   corev1.NodeConditionType `json:"type"`
	Status corev1.ConditionStatus   `json:"status"`
	Since  *metav1.Time             `json:"since,omitempty"`
}

// NodeVerdict is one NodeHealthCheck's view of a node. For a NodeHealthCheck that only recorded
// outcomes (it does not select the node, or the node is gone) only Name, Selects and Outcomes are set.
type NodeVerdict struct {
	Name string `json:"name"`
	// Selects is whether its selector selects the node.
	Selects bool `json:"selects"`
	// Mode lists "dry-run" and "paused" where they apply.
	Mode   []string `json:"mode,omitempty"`
	Budget *Budget  `json:"budget,omitempty"`
	Health *Health  `json:"health,omitempty"`
	// Request is what became of the node's remediation request annotation, if it has one.
	Request  *RemediationRequest `json:"request,omitempty"`
	Decision *Decision           `json:"decision,omitempty"`
	// Remediations, Escalation and SimulatedRemediations are the node's remediation CRs, their
	// escalation, and a dry-run NodeHealthCheck's simulated remediations.
	Remediations          []Remediation                           `json:"remediations,omitempty"`
	Escalation            *Escalation                             `json:"escalation,omitempty"`
	SimulatedRemediations []remediationv1alpha1.DryRunRemediation `json:"simulatedRemediations,omitempty"`
	// Outcomes are how the node's last remediations ended, oldest first.
	Outcomes []remediationv1alpha1.EndedRemediation `json:"outcomes,omitempty"`
	Lease    *Lease                                 `json:"lease,omitempty"`
	// Blockers are what keeps new remediations of the node from starting, each as a sentence.
	Blockers []string `json:"blockers,omitempty"`
	// EtcdQuorumGuard is the etcd quorum guard's verdict on disrupting this control-plane node now
	// (OpenShift only).
	EtcdQuorumGuard string           `json:"etcdQuorumGuard,omitempty"`
	Overlaps        []health.Overlap `json:"overlaps,omitempty"`
	// ReportedConditions are the NodeHealthCheck's conditions the operator reports True (and
	// UpgradeInProgress when Unknown).
	ReportedConditions []metav1.Condition `json:"reportedConditions,omitempty"`
}

// NodeHealthCheckExplanation is kubectl nhc explain nhc's answer as data.
type NodeHealthCheckExplanation struct {
	metav1.TypeMeta `json:",inline"`
	DecidedAt       metav1.Time `json:"decidedAt"`
	Name            string      `json:"name"`
	Mode            []string    `json:"mode,omitempty"`
	// Selector is spec.selector as a label selector string ("(every node)" when empty, "(invalid)"
	// when it does not parse).
	Selector string `json:"selector"`
	Budget   Budget `json:"budget"`
	// Disabled is why the NodeHealthCheck cannot work, if it cannot.
	Disabled *Reason `json:"disabled,omitempty"`
	// Blockers hold every unhealthy node back.
	Blockers []Reason         `json:"blockers,omitempty"`
	Overlaps []health.Overlap `json:"overlaps,omitempty"`
	// NextChange is when the decision changes on its own, if it does.
	NextChange *metav1.Time `json:"nextChange,omitempty"`
	// Nodes are the nodes the decision lists (every selected node that is not healthy, or has CRs).
	Nodes []NodeDecision `json:"nodes,omitempty"`
	// IgnoredAnnotations are node annotations the operator refuses, and why.
	IgnoredAnnotations []IgnoredAnnotation `json:"ignoredAnnotations,omitempty"`
	// Orphans are nodes with CRs it no longer selects (their CRs are removed).
	Orphans []string `json:"orphans,omitempty"`
	// OutcomeCounts counts the recorded outcomes by outcome.
	OutcomeCounts      map[remediationv1alpha1.RemediationOutcome]int `json:"outcomeCounts,omitempty"`
	ReportedConditions []metav1.Condition                             `json:"reportedConditions,omitempty"`
	// Reported is the operator's last report of the budget (status).
	Reported *Reported `json:"reported,omitempty"`
	Settings *Settings `json:"settings,omitempty"`
	// Forbidden are the kinds the user may not read, taken as absent (a partial answer).
	Forbidden []string `json:"forbidden,omitempty"`
}

// Budget is the healthy-node budget: Healthy of Observed selected nodes healthy, MinHealthy required.
type Budget struct {
	Healthy    int `json:"healthy"`
	Observed   int `json:"observed"`
	MinHealthy int `json:"minHealthy"`
	// Spec is the rule it comes from, for example "minHealthy 51% (default)".
	Spec string `json:"spec"`
	// Error is why the budget cannot be computed, if it cannot.
	Error string `json:"error,omitempty"`
}

// Health is the verdict on a node's conditions.
type Health struct {
	// State is Healthy, SoonUnhealthy or Unhealthy.
	State string `json:"state"`
	// Reason names the matching condition, for example "Ready=Unknown for 300s".
	Reason string `json:"reason,omitempty"`
	// UnhealthySince is when an Unhealthy node became so; UnhealthyAt when a SoonUnhealthy one will.
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`
	UnhealthyAt    *metav1.Time `json:"unhealthyAt,omitempty"`
	// ByRequest: only its remediation request (Requested) makes it unhealthy.
	ByRequest bool         `json:"byRequest,omitempty"`
	Requested *metav1.Time `json:"requested,omitempty"`
	// Summary is the text kubectl nhc explain prints after "health: ".
	Summary string `json:"summary"`
}

// The states of a RemediationRequest.
const (
	// RequestCounted: the decision counts the request.
	RequestCounted = "Counted"
	// RequestIgnored: the operator refuses the annotation's value (Why says why).
	RequestIgnored = "Ignored"
	// RequestPending: answered by the running remediation, or waiting for its time.
	RequestPending = "Pending"
	// RequestAnswered: a remediation answered it (Handled).
	RequestAnswered = "Answered"
)

// RemediationRequest is what became of a node's remediation.medik8s.io/request-remediation annotation.
type RemediationRequest struct {
	// State is Counted, Ignored, Pending or Answered; empty when the node has no request but a
	// refused handled annotation.
	State string `json:"state,omitempty"`
	// Value is the annotation's value (a value that is not a time is quoted and cut).
	Value string `json:"value,omitempty"`
	// CountedAt is the request's time as the decision counts it (Counted).
	CountedAt *metav1.Time `json:"countedAt,omitempty"`
	// Why the value is ignored (Ignored).
	Why string `json:"why,omitempty"`
	// Handled is the request-remediation-handled annotation's value (Answered).
	Handled string `json:"handled,omitempty"`
	// HandledIgnored is the handled annotation the operator refuses, and why.
	HandledIgnored *IgnoredAnnotation `json:"handledIgnored,omitempty"`
}

// Decision is the decision about a node.
type Decision struct {
	// Action is the decision's action (NoAction, Wait, StartRemediation, Skip, ContinueRemediation,
	// Recovered, HealthyDelayed).
	Action string `json:"action"`
	// SkipReason and SkipMessage say why a Skip holds the node back, or why a continuing remediation
	// may not escalate (EscalationHeld).
	SkipReason     health.SkipReason `json:"skipReason,omitempty"`
	SkipMessage    string            `json:"skipMessage,omitempty"`
	EscalationHeld bool              `json:"escalationHeld,omitempty"`
	// Summary is the text kubectl nhc explain prints after "decision: ".
	Summary string `json:"summary"`
}

// NodeDecision is a node in a NodeHealthCheckExplanation.
type NodeDecision struct {
	Name string `json:"name"`
	// Action is the decision's action (as in Decision), Summary its text.
	Action      string            `json:"action"`
	Summary     string            `json:"summary"`
	Reason      string            `json:"reason,omitempty"`
	SkipReason  health.SkipReason `json:"skipReason,omitempty"`
	SkipMessage string            `json:"skipMessage,omitempty"`
	// UnhealthyAt is when a node that waits (Action Wait) becomes unhealthy.
	UnhealthyAt *metav1.Time `json:"unhealthyAt,omitempty"`
	// Requested is the remediation request the decision counts.
	Requested             *metav1.Time                            `json:"requested,omitempty"`
	Remediations          []Remediation                           `json:"remediations,omitempty"`
	Escalation            *Escalation                             `json:"escalation,omitempty"`
	SimulatedRemediations []remediationv1alpha1.DryRunRemediation `json:"simulatedRemediations,omitempty"`
}

// Remediation is a remediation CR.
type Remediation struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Template is the name of the template it was made from.
	Template string      `json:"template,omitempty"`
	Created  metav1.Time `json:"created"`
	// State is Running, TimedOut (at TimedOutAt, as the operator annotated it) or Deleting.
	State      string `json:"state"`
	TimedOutAt string `json:"timedOutAt,omitempty"`
}

// Escalation is where a continuing remediation's escalation stands.
type Escalation struct {
	// Step is the running step's template ("<kind>/<name>") and Order its order.
	Step  string `json:"step,omitempty"`
	Order int    `json:"order,omitempty"`
	// Deadline is when the running step times out.
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// Exhausted: every step timed out or failed; no template is left.
	Exhausted bool `json:"exhausted,omitempty"`
}

// Lease is the node's lease, where someone holds it.
type Lease struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Holder    string `json:"holder"`
	// HeldByThis: this NodeHealthCheck holds it. HoldsBack: someone else does, and this
	// NodeHealthCheck starts no remediation of the node until Until (nil: until released).
	HeldByThis bool         `json:"heldByThis,omitempty"`
	HoldsBack  bool         `json:"holdsBack,omitempty"`
	Until      *metav1.Time `json:"until,omitempty"`
}

// Reason is a reason and its message.
type Reason struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// IgnoredAnnotation is a node's annotation the operator refuses.
type IgnoredAnnotation struct {
	Node       string `json:"node,omitempty"`
	Annotation string `json:"annotation,omitempty"`
	// Value is quoted and cut to a short prefix.
	Value string `json:"value"`
	Why   string `json:"why"`
}

// Reported is the operator's last report in status.
type Reported struct {
	Healthy  *int         `json:"healthy,omitempty"`
	Observed *int         `json:"observed,omitempty"`
	At       *metav1.Time `json:"at,omitempty"`
}

// Settings are the operator's settings the decisions used.
type Settings struct {
	LeaseNamespace     string          `json:"leaseNamespace"`
	ReturningNodeGrace metav1.Duration `json:"returningNodeGrace"`
	// From says where they come from (the operator's published settings, the flags, or the
	// defaults and why).
	From string `json:"from"`
}

// write writes v in the format (OutputJSON or OutputYAML).
func write(w io.Writer, format string, v any) error {
	var out []byte
	var err error
	switch format {
	case OutputJSON:
		out, err = json.MarshalIndent(v, "", "  ")
		out = append(out, '\n')
	case OutputYAML:
		out, err = yaml.Marshal(v)
	default:
		return fmt.Errorf("unknown output format %q: want %s or %s", format, OutputJSON, OutputYAML)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// timeOf is t as an optional API time (nil when zero).
func timeOf(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: APIVersion, Kind: kind}
}

// modes lists the NodeHealthCheck's modes ("dry-run", "paused"), as modeNote prints them.
func modes(s *targets.Snapshot) []string {
	var out []string
	if s.DryRun() {
		out = append(out, "dry-run")
	}
	if len(s.NHC.Spec.PauseRequests) > 0 {
		out = append(out, "paused")
	}
	return out
}

func budgetOf(s *targets.Snapshot) Budget {
	d := s.Decision
	b := Budget{Healthy: d.Healthy, Observed: d.Observed, MinHealthy: d.MinHealthy, Spec: budgetSpec(s.NHC)}
	if d.BudgetErr != nil {
		b.Error = d.BudgetErr.Error()
	}
	return b
}

func settingsOf(o Options) *Settings {
	if o.SettingsFrom == "" {
		return nil
	}
	return &Settings{LeaseNamespace: o.LeaseNamespace, ReturningNodeGrace: metav1.Duration{Duration: o.ReturnGrace}, From: o.SettingsFrom}
}

func nodeState(node *corev1.Node) NodeState {
	st := NodeState{Name: node.Name, Exists: true}
	for _, c := range node.Status.Conditions {
		st.Conditions = append(st.Conditions, NodeCondition{Type: c.Type, Status: c.Status, Since: timeOf(c.LastTransitionTime.Time)})
	}
	return st
}

// nodeVerdict is explainNode's answer as data.
func nodeVerdict(s *targets.Snapshot, node *corev1.Node, lease *coordinationv1.Lease, etcd string) NodeVerdict {
	_, selects := s.SelectedNode(node.Name)
	budget := budgetOf(s)
	nd, found, h := nodeHealth(s, node)
	v := NodeVerdict{
		Name: s.Stored.Name, Selects: selects, Mode: modes(s), Budget: &budget,
		Health: &Health{State: h.State.String(), Reason: h.Reason, ByRequest: h.ByRequest, Requested: timeOf(h.Requested), Summary: healthText(h)},
		Decision: &Decision{Action: nd.Action.String(), SkipReason: nd.SkipReason, SkipMessage: nd.SkipMessage, EscalationHeld: found && nd.EscalationHeld(),
			Summary: decisionText(s, nd, found)},
		Request:         requestOf(s, node, nd.Health.Requested),
		Outcomes:        outcome.Of(s.Stored.Status.RemediationOutcomes, node.Name),
		Blockers:        blockers(s, node),
		EtcdQuorumGuard: etcd,
		Overlaps:        s.Overlaps,
	}
	switch h.State {
	case health.Unhealthy:
		v.Health.UnhealthySince = timeOf(h.UnhealthySince)
	case health.SoonUnhealthy:
		v.Health.UnhealthyAt = timeOf(h.Next)
	}
	v.Remediations, v.Escalation, v.SimulatedRemediations = crsOf(s, node.Name)
	if lease != nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		l := &Lease{Namespace: lease.Namespace, Name: lease.Name, Holder: *lease.Spec.HolderIdentity}
		held, until := nodelease.ForeignHold(lease, nodelease.Holder(s.Stored.Name), s.Now)
		l.HoldsBack, l.Until = held, timeOf(until)
		l.HeldByThis = !held && l.Holder == nodelease.Holder(s.Stored.Name)
		v.Lease = l
	}
	for _, c := range s.Stored.Status.Conditions {
		if c.Status == metav1.ConditionTrue || c.Type == remediationv1alpha1.ConditionTypeUpgradeInProgress && c.Status == metav1.ConditionUnknown {
			v.ReportedConditions = append(v.ReportedConditions, c)
		}
	}
	return v
}

// crsOf is the node's remediation CRs, their escalation and the simulated remediations, as
// explainCRs prints them.
func crsOf(s *targets.Snapshot, node string) ([]Remediation, *Escalation, []remediationv1alpha1.DryRunRemediation) {
	var out []Remediation
	for _, cr := range s.CRs[node] {
		r := Remediation{Kind: cr.GetKind(), Namespace: cr.GetNamespace(), Name: cr.GetName(),
			Template: cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation], Created: cr.GetCreationTimestamp(), State: "Running"}
		if ts := cr.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]; ts != "" {
			r.State, r.TimedOutAt = "TimedOut", ts
		}
		if !cr.GetDeletionTimestamp().IsZero() {
			r.State = "Deleting"
		}
		out = append(out, r)
	}
	var esc *Escalation
	if nd, ok := s.Node(node); ok && nd.Action == health.ContinueRemediation && len(out) > 0 {
		e := nd.Escalation
		if e.Current != nil && !e.Deadline.IsZero() {
			esc = &Escalation{Step: e.Current.StepKey.String(), Order: e.Current.Order, Deadline: timeOf(e.Deadline)}
		}
		if e.Exhausted {
			if esc == nil {
				esc = &Escalation{}
			}
			esc.Exhausted = true
		}
	}
	return out, esc, s.Simulated(node)
}

// nhcExplanation is NHC's answer as data.
func nhcExplanation(s *targets.Snapshot, c *partial, o Options) NodeHealthCheckExplanation {
	d := s.Decision
	sel, _ := metav1.LabelSelectorAsSelector(&s.NHC.Spec.Selector)
	x := NodeHealthCheckExplanation{
		TypeMeta: typeMeta(NodeHealthCheckExplanationKind), DecidedAt: metav1.NewTime(s.Now),
		Name: s.Stored.Name, Mode: modes(s), Selector: selectorText(sel), Budget: budgetOf(s),
		Overlaps: s.Overlaps, NextChange: timeOf(d.Next), Orphans: s.Orphans,
		Settings: settingsOf(o), Forbidden: c.Forbidden(),
	}
	if s.Problem != nil {
		x.Disabled = &Reason{Reason: s.Problem.Reason, Message: s.Problem.Message}
	}
	for _, b := range s.Input.Blockers {
		x.Blockers = append(x.Blockers, Reason{Reason: string(b.Reason), Message: b.Message})
	}
	for _, nd := range d.Nodes {
		n := NodeDecision{Name: nd.Name, Action: nd.Action.String(), Summary: actionText(nd.Action, s.DryRun()), Reason: nd.Health.Reason,
			SkipReason: nd.SkipReason, SkipMessage: nd.SkipMessage, Requested: timeOf(nd.Health.Requested)}
		if nd.Action == health.Wait {
			n.UnhealthyAt = timeOf(nd.Health.Next)
		}
		n.Remediations, n.Escalation, n.SimulatedRemediations = crsOf(s, nd.Name)
		x.Nodes = append(x.Nodes, n)
	}
	for _, r := range s.RefusedInputs() {
		x.IgnoredAnnotations = append(x.IgnoredAnnotations, IgnoredAnnotation{Node: r.Node, Annotation: r.Annotation, Value: r.Value, Why: r.Why})
	}
	for _, n := range s.Stored.Status.RemediationOutcomes {
		for _, e := range n.Outcomes {
			if x.OutcomeCounts == nil {
				x.OutcomeCounts = map[remediationv1alpha1.RemediationOutcome]int{}
			}
			x.OutcomeCounts[e.Outcome]++
		}
	}
	for _, cond := range s.Stored.Status.Conditions {
		if cond.Status == metav1.ConditionTrue {
			x.ReportedConditions = append(x.ReportedConditions, cond)
		}
	}
	if st := s.Stored.Status; st.ObservedNodes != nil || st.HealthyNodes != nil || st.LastUpdateTime != nil {
		x.Reported = &Reported{Healthy: st.HealthyNodes, Observed: st.ObservedNodes, At: st.LastUpdateTime}
	}
	return x
}

// nodeExplanation is Node's answer as data: the same NodeHealthChecks, in the same order, as the
// text gives.
func nodeExplanation(c *partial, checks []Check, node *corev1.Node, lease *coordinationv1.Lease, etcd string, o Options) NodeExplanation {
	x := NodeExplanation{TypeMeta: typeMeta(NodeExplanationKind), DecidedAt: metav1.NewTime(o.Now), Node: nodeState(node),
		NodeHealthChecks: []NodeVerdict{}, Settings: settingsOf(o)}
	for _, ch := range checks {
		s := ch.Snapshot
		if _, ok := s.SelectedNode(node.Name); !ok && len(s.CRs[node.Name]) == 0 {
			if outcomes := outcome.Of(s.Stored.Status.RemediationOutcomes, node.Name); len(outcomes) > 0 {
				x.NodeHealthChecks = append(x.NodeHealthChecks, NodeVerdict{Name: s.Stored.Name, Outcomes: outcomes})
			} else {
				x.NotSelectedBy = append(x.NotSelectedBy, s.Stored.Name)
			}
			continue
		}
		x.NodeHealthChecks = append(x.NodeHealthChecks, nodeVerdict(s, node, lease, etcd))
	}
	x.Forbidden = c.Forbidden()
	return x
}

// goneNodeExplanation is goneNode's answer as data: the NodeHealthChecks that recorded outcomes
// for the node (none: the caller says the node is not found).
func goneNodeExplanation(c *partial, checks []Check, name string, o Options) NodeExplanation {
	x := NodeExplanation{TypeMeta: typeMeta(NodeExplanationKind), DecidedAt: metav1.NewTime(o.Now), Node: NodeState{Name: name},
		NodeHealthChecks: []NodeVerdict{}}
	for _, ch := range checks {
		s := ch.Snapshot
		if outcomes := outcome.Of(s.Stored.Status.RemediationOutcomes, name); len(outcomes) > 0 {
			x.NodeHealthChecks = append(x.NodeHealthChecks, NodeVerdict{Name: s.Stored.Name, Outcomes: outcomes})
		}
	}
	x.Forbidden = c.Forbidden()
	return x
}

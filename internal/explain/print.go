package explain

import (
	"fmt"
	"io"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/nodeinput"
	"github.com/medik8s/node-healthcheck/internal/outcome"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

func explainNode(p *printer, s *targets.Snapshot, node *corev1.Node, lease *coordinationv1.Lease, etcd string, o Options) {
	d := s.Decision
	name := node.Name
	p.line(0, "NodeHealthCheck %s%s", s.Stored.Name, modeNote(s))
	p.line(1, "budget: %d of %d selected nodes healthy, %d required (%s)", d.Healthy, d.Observed, d.MinHealthy, budgetSpec(s.NHC))
	if d.BudgetErr != nil {
		p.line(1, "budget error: %v", d.BudgetErr)
	}
	nd, found, h := nodeHealth(s, node)
	p.line(1, "health: %s", healthText(h))
	explainRequest(p, requestOf(s, node, nd.Health.Requested))
	p.line(1, "decision: %s", decisionText(s, nd, found))
	explainCRs(p, s, name)
	explainOutcomes(p, s, name)
	if lease != nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		holder := *lease.Spec.HolderIdentity
		if held, until := nodelease.ForeignHold(lease, nodelease.Holder(s.Stored.Name), s.Now); held {
			p.line(1, "lease %s/%s: held by %s%s; this NodeHealthCheck starts no remediation of the node meanwhile", lease.Namespace, lease.Name, holder, untilText(until))
		} else if holder == nodelease.Holder(s.Stored.Name) {
			p.line(1, "lease %s/%s: held by this NodeHealthCheck", lease.Namespace, lease.Name)
		}
	}
	for _, b := range blockers(s, node) {
		p.line(1, "blocker: %s", b)
	}
	if etcd != "" {
		p.line(1, "etcd quorum guard: %s", etcd)
	}
	for _, ov := range s.Overlaps {
		p.line(1, "overlap: NodeHealthCheck %s selects %d of the same nodes; the first to take a node's lease remediates it", ov.NHC, ov.Nodes)
	}
	for _, c := range s.Stored.Status.Conditions {
		if c.Status == metav1.ConditionTrue || c.Type == remediationv1alpha1.ConditionTypeUpgradeInProgress && c.Status == metav1.ConditionUnknown {
			p.line(1, "reported condition %s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
}

// explainOutcomes prints how the node's last remediations ended, as the NodeHealthCheck recorded
// them (status.remediationOutcomes), oldest first.
func explainOutcomes(p *printer, s *targets.Snapshot, node string) {
	outcomes := outcome.Of(s.Stored.Status.RemediationOutcomes, node)
	if len(outcomes) == 0 {
		return
	}
	p.line(1, "last outcomes (oldest first, at most %d):", remediationv1alpha1.MaxOutcomesPerNode)
	for _, o := range outcomes {
		template := ""
		if o.Template != "" {
			template = " (template " + o.Template + ")"
		}
		p.line(2, "%s after step %d%s: started %s, ended %s, after %s", o.Outcome, o.Step, template, stamp(o.Started.Time), stamp(o.Ended.Time),
			o.Ended.Sub(o.Started.Time).Round(time.Second))
	}
}

// outcomeCounts summarises the outcomes a NodeHealthCheck recorded, by outcome ("" when none).
func outcomeCounts(record []remediationv1alpha1.NodeRemediationOutcomes) string {
	counts := map[remediationv1alpha1.RemediationOutcome]int{}
	for _, n := range record {
		for _, o := range n.Outcomes {
			counts[o.Outcome]++
		}
	}
	var parts []string
	for _, o := range remediationv1alpha1.RemediationOutcomes {
		if counts[o] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, counts[o]))
		}
	}
	return strings.Join(parts, ", ")
}

// nodeHealth is the decision about the node and the verdict on its health: the decision's own
// (condition times it does not trust, a request it counts); a node it does not list (found false) is
// healthy, or not selected (its CRs are orphans): judged by its conditions.
func nodeHealth(s *targets.Snapshot, node *corev1.Node) (health.NodeDecision, bool, health.NodeHealth) {
	nd, found := s.Node(node.Name)
	if !found {
		return nd, false, health.EvaluateNode(s.NHC.Spec.UnhealthyConditions, node.Status.Conditions, s.Now)
	}
	return nd, true, nd.Health
}

// healthText says the node's health, as explain prints it after "health: ".
func healthText(h health.NodeHealth) string {
	switch {
	case h.ByRequest:
		return fmt.Sprintf("unhealthy for its remediation request of %s only (its conditions find it healthy)", stamp(h.Requested))
	case h.State == health.Unhealthy:
		return fmt.Sprintf("unhealthy since %s (%s)", stamp(h.UnhealthySince), h.Reason)
	case h.State == health.SoonUnhealthy:
		return fmt.Sprintf("matches %s; unhealthy at %s", h.Reason, stamp(h.Next))
	}
	return "healthy (no unhealthy condition matches)"
}

// decisionText says the decision about the node, as explain prints it after "decision: ".
func decisionText(s *targets.Snapshot, nd health.NodeDecision, found bool) string {
	switch {
	case !found:
		return "nothing to do"
	case nd.Action == health.Skip:
		return fmt.Sprintf("held back (%s): %s", nd.SkipReason, nd.SkipMessage)
	case nd.EscalationHeld():
		return fmt.Sprintf("%s; %s (%s)", actionText(nd.Action, s.DryRun()), nd.SkipMessage, nd.SkipReason)
	}
	return actionText(nd.Action, s.DryRun())
}

// requestOf is what became of the node's remediation request (annotation
// remediation.medik8s.io/request-remediation): counted (requested is the time the decision
// counts), ignored and why, pending, or answered; and whether its handled annotation is refused.
// Nil when there is nothing to say.
func requestOf(s *targets.Snapshot, node *corev1.Node, requested time.Time) *RemediationRequest {
	value, ok := node.Annotations[remediationv1alpha1.RemediationRequestAnnotation]
	handled, hasHandled := node.Annotations[remediationv1alpha1.RemediationRequestHandledAnnotation]
	refusedHandled, handledRefused := s.RefusedInput(node.Name, remediationv1alpha1.RemediationRequestHandledAnnotation)
	r := &RemediationRequest{}
	switch ignored, isIgnored := s.RefusedInput(node.Name, remediationv1alpha1.RemediationRequestAnnotation); {
	case !ok:
	case !requested.IsZero():
		r.State, r.Value, r.CountedAt = RequestCounted, shownTime(value), timeOf(requested)
	case isIgnored:
		r.State, r.Value, r.Why = RequestIgnored, ignored.Value, ignored.Why
	case !hasHandled || handledRefused:
		r.State, r.Value = RequestPending, shownTime(value)
	default:
		r.State, r.Value, r.Handled = RequestAnswered, shownTime(value), shownTime(handled)
	}
	if handledRefused {
		r.HandledIgnored = &IgnoredAnnotation{Annotation: remediationv1alpha1.RemediationRequestHandledAnnotation, Value: refusedHandled.Value, Why: refusedHandled.Why}
	}
	if r.State == "" && r.HandledIgnored == nil {
		return nil
	}
	return r
}

// explainRequest prints what became of the node's remediation request (requestOf).
func explainRequest(p *printer, r *RemediationRequest) {
	if r == nil {
		return
	}
	switch r.State {
	case RequestCounted:
		p.line(1, "remediation request: at %s; the node counts as unhealthy until a remediation answers it", stamp(r.CountedAt.Time))
	case RequestIgnored:
		p.line(1, "remediation request: %s ignored: %s", r.Value, r.Why)
	case RequestPending:
		p.line(1, "remediation request: %s, answered by the running remediation, or waiting for its time", r.Value)
	case RequestAnswered:
		p.line(1, "remediation request: %s, answered (%s=%s)", r.Value, remediationv1alpha1.RemediationRequestHandledAnnotation, r.Handled)
	}
	if h := r.HandledIgnored; h != nil {
		p.line(1, "annotation %s=%s %s and is ignored", h.Annotation, h.Value, h.Why)
	}
}

// shownTime shows a time a node's annotation holds as it is, and any other value quoted and cut
// (nodeinput.Quote): whoever may patch the node wrote it.
func shownTime(v string) string {
	if _, err := nodeinput.Time(v); err == nil {
		return v
	}
	return nodeinput.Quote(v)
}

// blockers lists what keeps new remediations of the node from starting, besides the decision's own
// skip reason: each of them holds every unhealthy node back.
func blockers(s *targets.Snapshot, node *corev1.Node) []string {
	var out []string
	for _, b := range s.Input.Blockers {
		out = append(out, fmt.Sprintf("%s: %s", b.Reason, b.Message))
	}
	if s.Decision.Storm.Active {
		out = append(out, "storm recovery is active")
	}
	if s.DryRun() {
		out = append(out, "dry-run: no CR is created and no lease taken (spec.dryRun)")
	}
	if node.Labels[remediationv1alpha1.ExcludeFromRemediationLabel] == "true" {
		out = append(out, fmt.Sprintf("the node is excluded (%s=true)", remediationv1alpha1.ExcludeFromRemediationLabel))
	}
	if n, ok := inputNode(s, node.Name); ok && n.ControlPlane || remediationcr.IsControlPlane(node.Labels) {
		out = append(out, "control-plane node: one at a time across all NodeHealthChecks; on OpenShift the operator also checks the etcd quorum guard before it starts")
	}
	if b := s.NHC.Spec.RepairBudget; b != nil {
		out = append(out, fmt.Sprintf("repair budget: %d remediation(s) within %s; counted for this node: %d", b.MaxRemediations, b.Window.Duration, repairsCounted(s, node.Name)))
	}
	return out
}

// inputNode is the decision's input about the named node: whether it is a control-plane node also
// comes from its verified Machine.
func inputNode(s *targets.Snapshot, name string) (health.Node, bool) {
	for i := range s.Input.Nodes {
		if s.Input.Nodes[i].Name == name {
			return s.Input.Nodes[i], true
		}
	}
	return health.Node{}, false
}

// repairsCounted is how many of the node's remediations the repair budget counts (0 for a node the
// NodeHealthCheck no longer selects).
func repairsCounted(s *targets.Snapshot, name string) int {
	for i := range s.Input.Nodes {
		if s.Input.Nodes[i].Name == name {
			return len(s.Input.Nodes[i].Repairs)
		}
	}
	return 0
}

func explainCRs(p *printer, s *targets.Snapshot, node string) {
	crs := s.CRs[node]
	for i := range crs {
		cr := &crs[i]
		state := "running"
		if ts := cr.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]; ts != "" {
			state = "timed out at " + ts
		}
		if !cr.GetDeletionTimestamp().IsZero() {
			state = "being deleted"
		}
		p.line(1, "remediation: %s %s/%s from template %s, created %s, %s", cr.GetKind(), cr.GetNamespace(), cr.GetName(),
			cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation], stamp(cr.GetCreationTimestamp().Time), state)
	}
	if nd, ok := s.Node(node); ok && nd.Action == health.ContinueRemediation && len(crs) > 0 {
		e := nd.Escalation
		if e.Current != nil && !e.Deadline.IsZero() {
			p.line(1, "escalation: step %s (order %d) times out at %s", e.Current.StepKey, e.Current.Order, stamp(e.Deadline))
		}
		if e.Exhausted {
			p.line(1, "escalation: every step timed out or failed; no template is left")
		}
	}
	for _, r := range s.Simulated(node) {
		state := "would run"
		if r.TimedOut != nil {
			state = "would have timed out at " + stamp(r.TimedOut.Time)
		}
		p.line(1, "dry-run remediation: %s %s/%s since %s, %s", r.Template.Kind, r.Template.Namespace, r.Template.Name, stamp(r.Started.Time), state)
	}
}

func lastUpdate(st remediationv1alpha1.NodeHealthCheckStatus) string {
	if st.LastUpdateTime == nil {
		return "an unknown time"
	}
	return stamp(st.LastUpdateTime.Time)
}

func modeNote(s *targets.Snapshot) string {
	if notes := modes(s); len(notes) > 0 {
		return " (" + strings.Join(notes, ", ") + ")"
	}
	return ""
}

func budgetSpec(n *remediationv1alpha1.NodeHealthCheck) string {
	switch {
	case n.Spec.MaxUnhealthy != nil:
		return "maxUnhealthy " + n.Spec.MaxUnhealthy.String()
	case n.Spec.MinHealthy != nil:
		return "minHealthy " + n.Spec.MinHealthy.String()
	}
	return "minHealthy 51% (default)"
}

func actionText(a health.Action, dryRun bool) string {
	switch a {
	case health.StartRemediation:
		if dryRun {
			return "would start a remediation now (dry-run)"
		}
		return "starts a remediation now"
	case health.ContinueRemediation:
		if dryRun {
			return "would be remediating (dry-run)"
		}
		return "remediating"
	case health.Recovered:
		return "healthy again: its CRs are removed"
	case health.HealthyDelayed:
		return "healthy again: healthyDelay keeps its CRs"
	case health.Wait:
		return "soon unhealthy"
	}
	return a.String()
}

func selectorText(sel labels.Selector) string {
	if sel == nil {
		return "(invalid)"
	}
	if s := sel.String(); s != "" {
		return s
	}
	return "(every node)"
}

func untilText(t time.Time) string {
	if t.IsZero() {
		return " until released"
	}
	return " until " + stamp(t)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "(unknown)"
	}
	return t.UTC().Format(time.RFC3339)
}

// printer writes indented lines and keeps the first write error.
type printer struct {
	w      io.Writer
	indent int
	err    error
}

func (p *printer) line(depth int, format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, "%s%s\n", strings.Repeat("  ", depth+p.indent), fmt.Sprintf(format, args...))
}

// settingsNote says which lease namespace and returning-node grace the answer used, and whence.
func settingsNote(p *printer, o Options) {
	if o.SettingsFrom != "" {
		p.line(0, "")
		p.line(0, "Settings: lease namespace %s, returning-node grace %s (%s).", o.LeaseNamespace, o.ReturnGrace, o.SettingsFrom)
	}
}

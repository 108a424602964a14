// Package explain answers "why was this node (not) remediated?" from the live cluster, with the
// operator's own decision code: it gathers each NodeHealthCheck's snapshot with targets.Gatherer
// (reading the API server directly instead of a cache) and decides with health.Decide, so it cannot
// disagree with the operator about the same state. What only the operator's process knows (the
// upgrade gate's signals, a conflicting MachineHealthCheck) is taken from what the operator
// reports in status. kubectl nhc explain (cmd/kubectl-nhc) prints it.
package explain

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clusterapi"
	"github.com/medik8s/node-healthcheck/internal/health"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/nodeinput"
	"github.com/medik8s/node-healthcheck/internal/openshift"
	"github.com/medik8s/node-healthcheck/internal/outcome"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// Options are the operator's settings the decisions depend on; they must match the running
// operator's flags.
type Options struct {
	// Now is the time to decide at (zero: now).
	Now time.Time
	// LeaseNamespace is where node leases live (the operator's --lease-namespace).
	LeaseNamespace string
	// ReturnGrace is the operator's --returning-node-grace.
	ReturnGrace time.Duration
	// RemovalHold is the operator's --removal-hold (as it publishes it, else its default).
	RemovalHold time.Duration
	// SettingsFrom says where LeaseNamespace and ReturnGrace come from (the operator's published
	// settings, the flags, or the defaults and why), printed with the answer; empty: not printed.
	SettingsFrom string
}

// Check is one NodeHealthCheck's snapshot and decision.
type Check struct {
	Snapshot *targets.Snapshot
}

// Gather reads and decides every NodeHealthCheck (sorted by name).
func Gather(ctx context.Context, c client.Client, o Options) ([]Check, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	list := &remediationv1alpha1.NodeHealthCheckList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing NodeHealthChecks: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b remediationv1alpha1.NodeHealthCheck) int { return strings.Compare(a.Name, b.Name) })
	// The nodes Cluster API MachineHealthChecks cover, as the operator's detector finds them.
	coverage, err := clusterAPICoverage(ctx, c)
	if err != nil {
		return nil, err
	}
	// OpenShift's rules as the operator's detectors find them: OpenShift when its Infrastructure kind
	// is served (the Metal3 template rule, the etcd guard), and the Machine API's MachineHealthChecks
	// (a conflicting one disables, the termination handler takes terminating nodes).
	openShift, mhcs, err := openShiftView(ctx, c)
	if err != nil {
		return nil, err
	}
	gate := gateAsSeen{upgrade.Verdict{Known: true, OpenShift: openShift, MachineHealthChecks: mhcs, CoveredByMachineHealthCheck: coverage}}
	// Nodes' Machines straight from the API server, kinds from the RESTMapper alone (the user may not
	// be allowed to read CRDs).
	g := &targets.Gatherer{Reader: c, ReturnGrace: o.ReturnGrace, RemovalHold: o.RemovalHold, Gate: gate, Machines: &targets.Machines{Reader: c, Mapper: c.RESTMapper()},
		Leases: c, LeaseNamespace: o.LeaseNamespace, Etcd: &targets.EtcdReader{Reader: c, Mapper: c.RESTMapper()}}
	var out []Check
	for i := range list.Items {
		snap, err := g.Gather(ctx, &list.Items[i], o.Now, targets.Options{Templates: c, Mode: targets.Explaining})
		if err != nil {
			return nil, fmt.Errorf("NodeHealthCheck %s: %w", list.Items[i].Name, err)
		}
		out = append(out, Check{Snapshot: snap})
	}
	return out, nil
}

// gateAsSeen is the upgrade gate as explain sees it from outside the operator: known, with the
// Cluster API coverage it finds itself (clusterAPICoverage). What only the operator's detectors know
// (upgrade signals, a conflicting OpenShift MachineHealthCheck) comes from the operator's report in
// status (targets.Explaining). It is a targets.UpgradeGate that nothing writes.
type gateAsSeen struct{ v upgrade.Verdict }

// Verdict implements targets.UpgradeGate.
func (g gateAsSeen) Verdict() upgrade.Verdict { return g.v }

// NodeSince implements targets.UpgradeGate: explain sees no node-level detector on, and remembers
// nothing, so a signal without Since begins now.
func (g gateAsSeen) NodeSince(_ string, signals []upgrade.Signal, now time.Time) []upgrade.Signal {
	out := slices.Clone(signals)
	for i := range out {
		if out[i].Since.IsZero() {
			out[i].Since = now
		}
	}
	return out
}

// etcdVerdict is the etcd quorum guard's verdict on disrupting a control-plane node now, on
// OpenShift, as the operator would find it before it starts a remediation ("" for a worker, or
// off OpenShift).
func etcdVerdict(ctx context.Context, c client.Client, checks []Check, node *corev1.Node) string {
	controlPlane, openShift := remediationcr.IsControlPlane(node.Labels), false
	for _, ch := range checks {
		openShift = openShift || ch.Snapshot.Verdict.OpenShift
		if n, ok := inputNode(ch.Snapshot, node.Name); ok && n.ControlPlane {
			controlPlane = true
		}
	}
	if !controlPlane || !openShift {
		return ""
	}
	objections, err := (&targets.EtcdReader{Reader: c, Mapper: c.RESTMapper()}).Objections(ctx, []string{node.Name})
	switch {
	case err != nil:
		return "not known: " + err.Error()
	case objections[node.Name] != "":
		return objections[node.Name] + "; no remediation of the node starts meanwhile"
	}
	return "disrupting the node now keeps etcd quorum"
}

// openShiftView reports whether the cluster is OpenShift (its Infrastructure kind is served, as the
// operator's Infrastructure detector decides) and classifies its MachineHealthChecks as the
// operator's MachineHealthCheck detector does (none where the kind is not served).
func openShiftView(ctx context.Context, c client.Client) (bool, upgrade.MachineHealthChecks, error) {
	_, err := c.RESTMapper().RESTMapping(openshift.Infrastructure.GroupKind(), openshift.Infrastructure.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, upgrade.MachineHealthChecks{}, nil
	case err != nil:
		return false, upgrade.MachineHealthChecks{}, fmt.Errorf("finding OpenShift's Infrastructure kind: %w", err)
	}
	mapping, err := c.RESTMapper().RESTMapping(openshift.MachineHealthCheck.GroupKind(), openshift.MachineHealthCheck.Version)
	if meta.IsNoMatchError(err) {
		return true, upgrade.MachineHealthChecks{}, nil
	}
	if err != nil {
		return true, upgrade.MachineHealthChecks{}, fmt.Errorf("finding the Machine API's MachineHealthCheck kind: %w", err)
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind("MachineHealthCheckList"))
	if err := c.List(ctx, l); err != nil {
		return true, upgrade.MachineHealthChecks{}, fmt.Errorf("listing MachineHealthChecks: %w", err)
	}
	return true, upgrade.ClassifyMachineHealthChecks(l.Items), nil
}

// clusterAPICoverage lists Cluster API MachineHealthChecks and Machines (none where the kinds are not
// served) and returns the nodes they cover.
func clusterAPICoverage(ctx context.Context, c client.Client) (map[string]string, error) {
	var lists [2][]unstructured.Unstructured
	for i, gk := range []schema.GroupKind{clusterapi.MachineHealthCheck, clusterapi.Machine} {
		kind := gk.Kind
		mapping, err := c.RESTMapper().RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("finding Cluster API's %s kind: %w", kind, err)
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(kind + "List"))
		if err := c.List(ctx, l); err != nil {
			return nil, fmt.Errorf("listing Cluster API %ss: %w", kind, err)
		}
		lists[i] = l.Items
	}
	return upgrade.ClusterAPICoverage(lists[0], lists[1]), nil
}

// Node explains every NodeHealthCheck's view of the node to w, with how its last remediations
// ended (also for a node that no longer exists, or that a NodeHealthCheck no longer selects).
// Kinds the user may not read but NodeHealthChecks and Nodes are taken as absent, and the answer
// says so (partial).
func Node(ctx context.Context, userClient client.Client, name string, o Options, w io.Writer) error {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	c := &partial{Client: userClient}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); apierrors.IsNotFound(err) {
		return goneNode(ctx, c, name, err, o, w)
	} else if err != nil {
		return fmt.Errorf("getting node %s: %w", name, err)
	}
	checks, err := Gather(ctx, c, o)
	if err != nil {
		return err
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.LeaseNamespace, Name: nodelease.Name(name)}, lease); apierrors.IsNotFound(err) {
		lease = nil
	} else if err != nil {
		return fmt.Errorf("getting the node's lease: %w", err)
	}

	etcd := etcdVerdict(ctx, c, checks, node)

	p := &printer{w: w}
	p.line(0, "Node %s", name)
	for _, cond := range node.Status.Conditions {
		p.line(1, "%s=%s since %s", cond.Type, cond.Status, stamp(cond.LastTransitionTime.Time))
	}
	var selecting, others []string
	for _, ch := range checks {
		s := ch.Snapshot
		if _, ok := s.SelectedNode(name); !ok {
			if len(s.CRs[name]) == 0 {
				if len(outcome.Of(s.Stored.Status.RemediationOutcomes, name)) > 0 {
					p.line(0, "")
					p.line(0, "NodeHealthCheck %s: does not select the node", s.Stored.Name)
					explainOutcomes(p, s, name)
					continue
				}
				others = append(others, s.Stored.Name)
				continue
			}
		}
		selecting = append(selecting, s.Stored.Name)
		p.line(0, "")
		explainNode(p, s, node, lease, etcd, o)
	}
	p.line(0, "")
	if len(selecting) == 0 {
		p.line(0, "No NodeHealthCheck selects node %s.", name)
	}
	if len(others) > 0 {
		p.line(0, "Not selected by: %s", strings.Join(others, ", "))
	}
	forbiddenNote(p, c)
	settingsNote(p, o)
	return p.err
}

func explainNode(p *printer, s *targets.Snapshot, node *corev1.Node, lease *coordinationv1.Lease, etcd string, o Options) {
	d := s.Decision
	name := node.Name
	p.line(0, "NodeHealthCheck %s%s", s.Stored.Name, modeNote(s))
	p.line(1, "budget: %d of %d selected nodes healthy, %d required (%s)", d.Healthy, d.Observed, d.MinHealthy, budgetSpec(s.NHC))
	if d.BudgetErr != nil {
		p.line(1, "budget error: %v", d.BudgetErr)
	}
	// The decision's own verdict (condition times it does not trust, a request it counts); a node it
	// does not list is healthy, or not selected (its CRs are orphans): judged by its conditions.
	nd, found := s.Node(name)
	h := nd.Health
	if !found {
		h = health.EvaluateNode(s.NHC.Spec.UnhealthyConditions, node.Status.Conditions, s.Now)
	}
	switch {
	case h.ByRequest:
		p.line(1, "health: unhealthy for its remediation request of %s only (its conditions find it healthy)", stamp(h.Requested))
	case h.State == health.Unhealthy:
		p.line(1, "health: unhealthy since %s (%s)", stamp(h.UnhealthySince), h.Reason)
	case h.State == health.SoonUnhealthy:
		p.line(1, "health: matches %s; unhealthy at %s", h.Reason, stamp(h.Next))
	default:
		p.line(1, "health: healthy (no unhealthy condition matches)")
	}
	explainRequest(p, s, node, nd.Health.Requested)
	switch {
	case !found:
		p.line(1, "decision: nothing to do")
	case nd.Action == health.Skip:
		p.line(1, "decision: held back (%s): %s", nd.SkipReason, nd.SkipMessage)
	case nd.EscalationHeld():
		p.line(1, "decision: %s; %s (%s)", actionText(nd.Action, s.DryRun()), nd.SkipMessage, nd.SkipReason)
	default:
		p.line(1, "decision: %s", actionText(nd.Action, s.DryRun()))
	}
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

// goneNode answers for a node that does not exist: how its last remediations ended, as each
// NodeHealthCheck recorded them, or notFound when none did.
func goneNode(ctx context.Context, c *partial, name string, notFound error, o Options, w io.Writer) error {
	checks, err := Gather(ctx, c, o)
	if err != nil {
		return err
	}
	p := &printer{w: w}
	found := false
	for _, ch := range checks {
		s := ch.Snapshot
		if len(outcome.Of(s.Stored.Status.RemediationOutcomes, name)) == 0 {
			continue
		}
		if !found {
			p.line(0, "Node %s does not exist", name)
		}
		found = true
		p.line(0, "")
		p.line(0, "NodeHealthCheck %s", s.Stored.Name)
		explainOutcomes(p, s, name)
	}
	if !found {
		return fmt.Errorf("getting node %s: %w", name, notFound)
	}
	forbiddenNote(p, c)
	return p.err
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

// explainRequest says what became of the node's remediation request (annotation
// remediation.medik8s.io/request-remediation), if it has one: acted on (requested is the time the
// decision counts), ignored and why, or answered.
func explainRequest(p *printer, s *targets.Snapshot, node *corev1.Node, requested time.Time) {
	value, ok := node.Annotations[remediationv1alpha1.RemediationRequestAnnotation]
	handled, hasHandled := node.Annotations[remediationv1alpha1.RemediationRequestHandledAnnotation]
	refusedHandled, handledRefused := s.RefusedInput(node.Name, remediationv1alpha1.RemediationRequestHandledAnnotation)
	switch ignored, isIgnored := s.RefusedInput(node.Name, remediationv1alpha1.RemediationRequestAnnotation); {
	case !ok:
	case !requested.IsZero():
		p.line(1, "remediation request: at %s; the node counts as unhealthy until a remediation answers it", stamp(requested))
	case isIgnored:
		p.line(1, "remediation request: %s ignored: %s", ignored.Value, ignored.Why)
	case !hasHandled || handledRefused:
		p.line(1, "remediation request: %s, answered by the running remediation, or waiting for its time", shownTime(value))
	default:
		p.line(1, "remediation request: %s, answered (%s=%s)", shownTime(value), remediationv1alpha1.RemediationRequestHandledAnnotation, shownTime(handled))
	}
	if handledRefused {
		p.line(1, "annotation %s=%s %s and is ignored", remediationv1alpha1.RemediationRequestHandledAnnotation, refusedHandled.Value, refusedHandled.Why)
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

// NHC summarises one NodeHealthCheck to w: its budget, every node it lists or holds back, and why.
// Kinds the user may not read but NodeHealthChecks and Nodes are taken as absent, and the answer
// says so (partial).
func NHC(ctx context.Context, userClient client.Client, name string, o Options, w io.Writer) error {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	c := &partial{Client: userClient}
	checks, err := Gather(ctx, c, o)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(checks, func(ch Check) bool { return ch.Snapshot.Stored.Name == name })
	if i < 0 {
		return fmt.Errorf("NodeHealthCheck %s not found", name)
	}
	s := checks[i].Snapshot
	d := s.Decision
	p := &printer{w: w}
	p.line(0, "NodeHealthCheck %s%s", name, modeNote(s))
	sel, _ := metav1.LabelSelectorAsSelector(&s.NHC.Spec.Selector)
	p.line(1, "selector: %s", selectorText(sel))
	p.line(1, "budget: %d of %d selected nodes healthy, %d required (%s)", d.Healthy, d.Observed, d.MinHealthy, budgetSpec(s.NHC))
	if s.Problem != nil {
		p.line(1, "disabled (%s): %s", s.Problem.Reason, s.Problem.Message)
	}
	for _, b := range s.Input.Blockers {
		p.line(1, "blocker: %s: %s", b.Reason, b.Message)
	}
	for _, ov := range s.Overlaps {
		p.line(1, "overlap: NodeHealthCheck %s selects %d of the same nodes", ov.NHC, ov.Nodes)
	}
	if !d.Next.IsZero() {
		p.line(1, "next decision change: %s", stamp(d.Next))
	}
	if len(d.Nodes) == 0 && len(s.Orphans) == 0 {
		p.line(1, "every selected node is healthy")
	}
	for _, nd := range d.Nodes {
		switch nd.Action {
		case health.Skip:
			p.line(1, "node %s: held back (%s): %s", nd.Name, nd.SkipReason, nd.SkipMessage)
		case health.Wait:
			p.line(1, "node %s: %s; unhealthy at %s", nd.Name, nd.Health.Reason, stamp(nd.Health.Next))
		default:
			p.line(1, "node %s: %s (%s)", nd.Name, actionText(nd.Action, s.DryRun()), nd.Health.Reason)
		}
		if !nd.Health.Requested.IsZero() {
			p.line(2, "remediation requested at %s", stamp(nd.Health.Requested))
		}
		explainCRs(&printer{w: w, indent: 1}, s, nd.Name)
	}
	for _, refused := range s.RefusedInputs() {
		if refused.Annotation == remediationv1alpha1.RemediationRequestAnnotation {
			p.line(1, "node %s: remediation request %s ignored: %s", refused.Node, refused.Value, refused.Why)
		} else {
			p.line(1, "node %s: annotation %s=%s %s and is ignored", refused.Node, refused.Annotation, refused.Value, refused.Why)
		}
	}
	for _, orphan := range s.Orphans {
		p.line(1, "node %s: no longer selected; its CRs are removed", orphan)
	}
	if counts := outcomeCounts(s.Stored.Status.RemediationOutcomes); counts != "" {
		p.line(1, "recorded outcomes (the last %d of each of %d node(s); kubectl nhc explain node <name> shows them): %s",
			remediationv1alpha1.MaxOutcomesPerNode, len(s.Stored.Status.RemediationOutcomes), counts)
	}
	for _, c := range s.Stored.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			p.line(1, "reported condition %s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if st := s.Stored.Status; st.ObservedNodes != nil && st.HealthyNodes != nil && (*st.ObservedNodes != d.Observed || *st.HealthyNodes != d.Healthy) {
		p.line(1, "note: the operator last reported %d of %d healthy (at %s); this decision is newer", *st.HealthyNodes, *st.ObservedNodes, lastUpdate(st))
	}
	forbiddenNote(p, c)
	settingsNote(p, o)
	return p.err
}

func lastUpdate(st remediationv1alpha1.NodeHealthCheckStatus) string {
	if st.LastUpdateTime == nil {
		return "an unknown time"
	}
	return stamp(st.LastUpdateTime.Time)
}

func modeNote(s *targets.Snapshot) string {
	var notes []string
	if s.DryRun() {
		notes = append(notes, "dry-run")
	}
	if len(s.NHC.Spec.PauseRequests) > 0 {
		notes = append(notes, "paused")
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
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

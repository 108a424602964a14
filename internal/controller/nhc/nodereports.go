package nhc

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/nodeinput"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// nodeReport names what the controller reports once about one node's own input: the empty exclusion
// label, a remediation request it acts on, or a refused value of one of the annotations it reads
// (the annotation's key: a fixed, small set).
type nodeReport string

const (
	reportEmptyExclusion nodeReport = "empty-exclusion-label"
	reportRequestSeen    nodeReport = "request-seen"
	reportRemovalOverdue nodeReport = "removal-overdue"
)

// nodeReports remembers, per NodeHealthCheck and selected node, what was last reported about each of
// the node's inputs, as a short hash of the value (nodeinput.Hash), never the value: a node that writes
// a new value every second costs one entry, reported once per value. A node's entries are forgotten
// when it is no longer selected (or gone), a NodeHealthCheck's when it is deleted, and an entry when
// its input is gone.
type nodeReports struct {
	mu sync.Mutex
	// m: NodeHealthCheck name -> node name -> report -> hash.
	m map[string]map[string]map[nodeReport]string
}

// first records the value's hash for the report and tells whether it differs from the one recorded
// (so the report is due).
func (r *nodeReports) first(nhc, node string, report nodeReport, hash string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]map[string]map[nodeReport]string{}
	}
	nodes := r.m[nhc]
	if nodes == nil {
		nodes = map[string]map[nodeReport]string{}
		r.m[nhc] = nodes
	}
	reports := nodes[node]
	if reports == nil {
		reports = map[nodeReport]string{}
		nodes[node] = reports
	}
	if was, ok := reports[report]; ok && was == hash {
		return false
	}
	reports[report] = hash
	return true
}

// keep forgets, for the NodeHealthCheck, the reports of nodes it does not select and the reports
// not in current (by node) of the nodes it does.
func (r *nodeReports) keep(nhc string, current map[string]map[nodeReport]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for node, reports := range r.m[nhc] {
		now, selected := current[node]
		if !selected {
			delete(r.m[nhc], node)
			continue
		}
		for report := range reports {
			if !now[report] {
				delete(reports, report)
			}
		}
		if len(reports) == 0 {
			delete(r.m[nhc], node)
		}
	}
}

// forget drops everything recorded for a deleted NodeHealthCheck.
func (r *nodeReports) forget(nhc string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, nhc)
}

// size is how many entries are recorded for a NodeHealthCheck (tests).
func (r *nodeReports) size(nhc string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, reports := range r.m[nhc] {
		n += len(reports)
	}
	return n
}

// reportNodeInputs emits, once per value, what the decision made of the selected nodes' own inputs:
// an empty exclusion label (a likely mistake, which does not exclude the node), a remediation request
// it counts, and every value it refused (a remediation request it ignores, a repair-budget reset or
// handled record it refuses), so that whoever wrote it learns that it did not take effect and why;
// and, once per removal, a removal that outlasted the removal hold.
// Events quote only a short prefix of a value; memory keeps one hash per node and input.
func (r *Reconciler) reportNodeInputs(snap *targets.Snapshot) {
	name := snap.Stored.Name
	current := map[string]map[nodeReport]bool{}
	due := func(node string, report nodeReport, hash string) bool {
		if current[node] == nil {
			current[node] = map[nodeReport]bool{}
		}
		current[node][report] = true
		return r.reports.first(name, node, report, hash)
	}
	current[nhcItself] = nil
	for _, n := range snap.Nodes {
		current[n.Name] = nil
		if value, ok := n.Labels[remediationv1alpha1.ExcludeFromRemediationLabel]; ok && value == "" && due(n.Name, reportEmptyExclusion, "") {
			r.Recorder.Eventf(n, snap.Stored, corev1.EventTypeWarning, remediationv1alpha1.EventReasonInvalidNodeLabel, "Validate",
				"Label %s has an empty value and is ignored; set it to \"true\" to exclude the node from remediation", remediationv1alpha1.ExcludeFromRemediationLabel)
		}
	}
	for _, in := range snap.Input.Nodes {
		if in.Requested.IsZero() {
			continue
		}
		value := in.Requested.UTC().Format(time.RFC3339)
		if !due(in.Name, reportRequestSeen, nodeinput.Hash(value)) {
			continue
		}
		if n, ok := snap.SelectedNode(in.Name); ok {
			r.Recorder.Eventf(n, snap.Stored, corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationRequested, "Request",
				"Remediation of node %s requested at %s (annotation %s): NodeHealthCheck %s counts it as unhealthy and remediates it when no rule holds it back (see status.unhealthyNodes)",
				in.Name, value, remediationv1alpha1.RemediationRequestAnnotation, name)
		}
	}
	for _, r2 := range snap.Decision.RemovalsOverdue {
		n, ok := snap.SelectedNode(r2.Node)
		if !ok || !due(r2.Node, reportRemovalOverdue, nodeinput.Hash(r2.By+"/"+r2.Since.String())) {
			continue
		}
		r.Recorder.Eventf(n, snap.Stored, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemovalHoldExpired, "Remove",
			"Node %s has been being removed by %s since %s, longer than the removal hold (%s, --removal-hold): the removal holds its remediation back no longer",
			r2.Node, r2.By, r2.Since.UTC().Format(time.RFC3339), snap.Input.RemovalHold)
	}
	for _, refused := range snap.RefusedInputs() {
		n, ok := snap.SelectedNode(refused.Node)
		// Once per value and rule: the reason's wording quotes the time, which moves.
		if !ok || !due(refused.Node, nodeReport(refused.Annotation), refused.Hash+"/"+refused.Rule) {
			continue
		}
		switch refused.Annotation {
		case remediationv1alpha1.RemediationRequestAnnotation:
			r.Recorder.Eventf(n, snap.Stored, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationRequestIgnored, "Request",
				"Remediation request %s=%s of node %s is ignored: %s", refused.Annotation, refused.Value, refused.Node, refused.Why)
		case remediationv1alpha1.RepairBudgetResetAnnotation:
			r.Recorder.Eventf(n, snap.Stored, corev1.EventTypeWarning, remediationv1alpha1.EventReasonInvalidNodeAnnotation, "Validate",
				"Annotation %s=%s on node %s is ignored: %s", refused.Annotation, refused.Value, refused.Node, refused.Why)
		default:
			r.Recorder.Eventf(n, snap.Stored, corev1.EventTypeWarning, remediationv1alpha1.EventReasonInvalidNodeAnnotation, "Validate",
				"Annotation %s=%s %s and is ignored by NodeHealthCheck %s", refused.Annotation, refused.Value, refused.Why, name)
		}
	}
	// The NodeHealthCheck's own reset annotation: once per refusal, on the NodeHealthCheck.
	for _, why := range snap.ResetRefusals() {
		if due(nhcItself, nodeReport(remediationv1alpha1.RepairBudgetResetAnnotation+"/"+nodeinput.Hash(why)), "") {
			r.Recorder.Eventf(snap.Stored, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonInvalidAnnotation, "Validate",
				"Annotation %s of NodeHealthCheck %s: %s; it is ignored", remediationv1alpha1.RepairBudgetResetAnnotation, name, why)
		}
	}
	r.reports.keep(name, current)
}

// nhcItself keys the reports about the NodeHealthCheck's own annotations (no node has an empty name).
const nhcItself = ""

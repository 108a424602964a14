package remediation

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// reportHold says, once per holder, why a node the remediation controller would remediate now is
// held back by the node's own state: a lease another party holds, or the etcd guard. (The nhc
// controller reports every skip reason in status and its own event.)
func (r *Reconciler) reportHold(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) {
	n, ok := nodeInput(snap, d.Name)
	if !ok {
		return
	}
	switch d.SkipReason {
	case health.SkipLeased:
		r.leaseBusy(snap.Stored, d.Name, leaseResult{otherHolder: n.LeasedBy, expires: n.LeasedUntil})
	case health.SkipEtcdQuorum:
		r.reportOnce(ctx, snap.Stored, d.Name, onceEtcd, n.EtcdGuard, "Not remediating control-plane node %s yet: %s", d.Name, n.EtcdGuard)
	}
}

// reportDryRun emits a WouldRemediate event about the node once per NodeHealthCheck, node and
// what (the step it would escalate to).
func (r *Reconciler) reportDryRun(nhc *remediationv1alpha1.NodeHealthCheck, node, what, format string, args ...any) {
	if r.memory.first(nhc.UID, node, onceDryRun, what) {
		r.nodeRelatedEvent(nhc, node, corev1.EventTypeNormal, remediationv1alpha1.EventReasonWouldRemediate, "DryRun", format, args...)
	}
}

// capitalize returns the note with its first letter in upper case (events start with a capital).
func capitalize(note string) string {
	if note == "" {
		return note
	}
	return strings.ToUpper(note[:1]) + note[1:]
}

// leaseBusy reports, once per holder, that another party holds the node's lease.
func (r *Reconciler) leaseBusy(nhc *remediationv1alpha1.NodeHealthCheck, node string, lease leaseResult) {
	if !r.memory.first(nhc.UID, node, onceLease, lease.otherHolder) {
		return
	}
	until := "it releases it (the lease has no expiry)"
	if !lease.expires.IsZero() {
		until = lease.expires.UTC().Format(time.RFC3339)
	}
	r.Recorder.Eventf(nhc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationSkipped, "Skip",
		"Node %s is leased by %s until %s (for example for maintenance); remediation waits for the lease", node, lease.otherHolder, until)
}

// reportRefusal emits a RemediationRefused warning (regarding the NodeHealthCheck, related to the
// node), once per distinct note.
func (r *Reconciler) reportRefusal(nhc *remediationv1alpha1.NodeHealthCheck, node, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	if !r.memory.first(nhc.UID, node, onceRefused, msg) {
		return
	}
	r.nodeRelatedEvent(nhc, node, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationRefused, skipAction(msg), "%s", msg)
}

// reportOnce emits a warning RemediationSkipped event regarding the NodeHealthCheck, related to the
// node, with an action of its own (skipAction), and logs it, once per NodeHealthCheck, node, kind and
// value (memory).
func (r *Reconciler) reportOnce(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, kind onceKind, value, note string, args ...any) {
	if !r.memory.first(nhc.UID, node, kind, value) {
		return
	}
	msg := fmt.Sprintf(note, args...)
	ctrl.LoggerFrom(ctx).Info(msg, "node", node)
	r.Recorder.Eventf(nhc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationSkipped, skipAction(msg), "%s", msg)
}

// skipAction is the action of a RemediationSkipped event: "Skip-" and a hash of its note. The event
// recorder merges events of one type, reason, action, regarding and related object into one series
// that keeps the first note; a node skipped for another cause later (the etcd budget, then the guard
// pod) must show its new note.
func skipAction(note string) string {
	h := fnv.New32a()
	h.Write([]byte(note))
	return fmt.Sprintf("Skip-%08x", h.Sum32())
}

func (r *Reconciler) event(nhc *remediationv1alpha1.NodeHealthCheck, eventType, reason, action, note string, args ...any) {
	r.Recorder.Eventf(nhc, nil, eventType, reason, action, note, args...)
}

// nodeRelatedEvent emits an event regarding the NodeHealthCheck, as the public operator does, related
// to the node: the event recorder merges events of one reason, action, regarding and related object
// into one series that keeps the first note, which without the node would hide every other node's.
// One event per action: issue 15 counts every request a failure costs.
func (r *Reconciler) nodeRelatedEvent(nhc *remediationv1alpha1.NodeHealthCheck, node, eventType, reason, action, note string, args ...any) {
	r.Recorder.Eventf(nhc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, eventType, reason, action, note, args...)
}

// nodeEvent emits what happens to the node's remediation (a CR created, a CR removed) as
// nodeRelatedEvent does and, for the first of a burst (eventseries.Recorder.Mirrorf), also regarding
// the Node, related to the NodeHealthCheck, so that the node's own events show it.
func (r *Reconciler) nodeEvent(nhc *remediationv1alpha1.NodeHealthCheck, node, eventType, reason, action, note string, args ...any) {
	r.Recorder.Mirrorf(nhc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, eventType, reason, action, note, args...)
}

package remediation

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// releaseConfirmation removes the manually-confirmed-healthy annotation from a node whose
// remediation is being cleared, so the next remediation of the node gets its delay again.
func (r *Reconciler) releaseConfirmation(ctx context.Context, nodeName string) error {
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, ok := node.Annotations[remediationv1alpha1.ManuallyConfirmedHealthyAnnotation]; !ok {
		return nil
	}
	if err := remediationcr.PatchAnnotation(ctx, r.Client, node, remediationv1alpha1.ManuallyConfirmedHealthyAnnotation, nil); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the manual confirmation from node %s: %w", nodeName, err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed manual confirmation", "node", nodeName)
	return nil
}

// deleteAll deletes the node's CRs: each once, however many looks the cache shows it to before it
// shows the delete (in a mass recovery each node's event makes its NodeHealthCheck look again), and
// each delete reported once (a CR found gone already is not reported again). asRead: the decision
// depended on the CRs' own state (their conditions: KeptOrphanCR), so each is deleted only as the
// decision read it (its resourceVersion); one its remediator changed since is left for the look its
// change brings (CREvents), which sees the change.
func (r *Reconciler) deleteAll(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, crs []unstructured.Unstructured, why string, asRead bool) error {
	var errs []error
	now := r.Wall.Now()
	for i := range crs {
		cr := &crs[i]
		if !cr.GetDeletionTimestamp().IsZero() {
			continue // being deleted; the remediator's finalizer decides when it is gone
		}
		if r.memory.made(nhc.UID, node, ownWrite{writeDelete, cr.GetUID()}, now) {
			continue // deleted by an earlier look; the cache does not show it yet
		}
		preconditions := client.Preconditions{UID: ptr.To(cr.GetUID())}
		if asRead {
			preconditions.ResourceVersion = ptr.To(cr.GetResourceVersion())
		}
		err := r.Delete(ctx, cr, client.PropagationPolicy(metav1.DeletePropagationBackground), preconditions)
		if apierrors.IsNotFound(err) {
			r.Wiring.Gatherer.Forget(cr.GetUID())
			continue
		}
		if asRead && apierrors.IsConflict(err) {
			ctrl.LoggerFrom(ctx).Info("Not deleting a remediation changed since it was read; looking again with the change",
				"node", node, "kind", cr.GetKind(), "name", cr.GetName())
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting %s %s/%s: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err))
			continue
		}
		r.memory.record(nhc.UID, node, ownWrite{writeDelete, cr.GetUID()}, now)
		r.Wiring.Gatherer.Forget(cr.GetUID())
		ctrl.LoggerFrom(ctx).Info("Deleted remediation", "node", node, "kind", cr.GetKind(), "name", cr.GetName(), "why", why)
		r.nodeEvent(nhc, node, corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationRemoved, "Delete", "Deleted %s %s/%s of node %s: %s", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node, why)
	}
	return errors.Join(errs...)
}

// deletePrevious deletes the CRs made for an earlier Node object of the node's name (Snapshot.Previous:
// the Node was deleted and created again): they are no remediation of this node, which is judged
// afresh. The node's lease goes with them when no remediation of the node runs or starts.
func (r *Reconciler) deletePrevious(ctx context.Context, snap *targets.Snapshot, node string) error {
	err := r.deleteAll(ctx, snap.Stored, node, snap.Previous[node], "it was made for an earlier Node of that name, which was deleted and created again", true)
	if d, listed := snap.Node(node); err != nil || len(snap.CRs[node]) > 0 || (listed && d.Action == health.StartRemediation) {
		return err
	}
	return r.release(ctx, snap, node)
}

// deleteOrphans deletes the CRs of a node the NodeHealthCheck does not select (deleted, or no
// longer matched, as the cache shows it now), except CRs whose remediator deletes the node for good
// and is not done yet.
func (r *Reconciler) deleteOrphans(ctx context.Context, snap *targets.Snapshot, node string) error {
	var orphans []unstructured.Unstructured
	for _, cr := range snap.CRs[node] {
		if remediationcr.Condition(&cr, remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected) == metav1.ConditionTrue &&
			remediationcr.Condition(&cr, remediationv1alpha1.RemediationConditionSucceeded) != metav1.ConditionTrue {
			continue // targets.KeptOrphanCR: its remediator deletes the node for good and is not done
		}
		orphans = append(orphans, cr)
	}
	if len(orphans) == 0 {
		return nil
	}
	if err := r.answerRequests(ctx, snap, node, orphans); err != nil {
		return err
	}
	return r.deleteAll(ctx, snap.Stored, node, orphans, "the node is gone or no longer selected", true)
}

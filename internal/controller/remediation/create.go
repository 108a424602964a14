package remediation

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// create creates the node's remediation CR of the step from its template as the snapshot read it
// (never read again: the CR is what the decision saw); requested is the time of the remediation
// request the remediation answers (zero: none), recorded on the CR and, once it is created, on the
// node (answerRequests).
func (r *Reconciler) create(ctx context.Context, snap *targets.Snapshot, node string, step health.Step, requested time.Time) error {
	nhc := snap.Stored
	ref := step.Template
	template, read := snap.Template(ref)
	if !read {
		// Reconcile gathers the templates before any decision that creates; a snapshot without
		// them is a bug, never a reason to read the template now.
		return fmt.Errorf("template %s %s/%s of node %s's next CR was not read with the decision", ref.Kind, ref.Namespace, ref.Name, node)
	}
	target, ok := snap.SelectedNode(node)
	if !ok {
		return nil // no longer selected; the next reconcile decides again
	}
	machine, err := r.machineOf(ctx, snap, target, template.GetNamespace())
	if err != nil {
		return err
	}
	cr, err := remediationcr.Build(template, nhc, target, machine)
	if err != nil {
		return err
	}
	if fd := snap.NHC.Spec.FailureDomain; fd != nil {
		// The node's domain as the remediation found it: it counts there while the remediation runs,
		// wherever the node's label says it is later (targets.DomainMemory).
		annotations := cr.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[remediationv1alpha1.FailureDomainAnnotation] = remediationcr.FailureDomainValue(fd.TopologyKey, target.Labels[fd.TopologyKey])
		cr.SetAnnotations(annotations)
	}
	if !requested.IsZero() {
		if requested.After(snap.Now) {
			requested = snap.Now // never record a time later than the operator's (the decision passes none)
		}
		annotations := cr.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[remediationv1alpha1.RemediationRequestedAtAnnotation] = requested.UTC().Format(time.RFC3339)
		if baseline, first := snap.RequestBaseline(node); first {
			// The first CR: the node as the remediation finds it, to tell when it changed.
			annotations[remediationv1alpha1.RemediationRequestBaselineAnnotation] = remediationcr.EncodeBaseline(baseline)
		}
		cr.SetAnnotations(annotations)
	}
	if cr.GetName() == "" {
		exists, err := r.stepCRExists(ctx, nhc, node, cr)
		if err != nil || exists {
			return err
		}
	}
	err = r.Create(ctx, cr)
	if apierrors.IsAlreadyExists(err) {
		return r.explainExisting(ctx, nhc, cr)
	}
	if targets.RefusedForGood(err) {
		return r.refused(ctx, snap, node, cr, err)
	}
	if err != nil {
		return fmt.Errorf("creating %s for node %s: %w", cr.GetKind(), node, err)
	}
	r.Refusals.Clear(nhc.UID, node)
	r.recordCreated(cr)
	ctrl.LoggerFrom(ctx).Info("Created remediation", "node", node, "kind", cr.GetKind(), "name", cr.GetName())
	if requested.IsZero() {
		r.nodeEvent(nhc, node, corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationCreated, "Create", "Created %s %s/%s for node %s", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node)
		return nil
	}
	r.nodeEvent(nhc, node, corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationCreated, "Create", "Created %s %s/%s for node %s, as requested at %s",
		cr.GetKind(), cr.GetNamespace(), cr.GetName(), node, requested.UTC().Format(time.RFC3339))
	return r.answerRequests(ctx, snap, node, []unstructured.Unstructured{*cr})
}

// answerRequests records, in the node's remediation-request-handled annotation, the remediation
// request that the node's remediation (its CRs) answers (targets.AnsweredRequest): once when the
// remediation starts, and again before its CRs go, so that a request is never acted on twice, nor
// lost when the write fails (the CRs stay until it succeeds). A node that is gone needs nothing; a
// dry-run NodeHealthCheck, which ignores requests, changes no node, nor does one that does not take
// requests unless its CRs answer one (it took them before).
func (r *Reconciler) answerRequests(ctx context.Context, snap *targets.Snapshot, nodeName string, crs []unstructured.Unstructured) error {
	if snap.DryRun() || (!snap.NHC.Spec.AllowRemediationRequests && remediationcr.RequestOf(crs).IsZero()) {
		return nil
	}
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	value, write := snap.AnsweredRequest(node, crs)
	if !write {
		return nil
	}
	if err := remediationcr.PatchAnnotation(ctx, r.Client, node, remediationv1alpha1.RemediationRequestHandledAnnotation, &value); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("recording the remediation request answered on node %s: %w", nodeName, err)
	}
	ctrl.LoggerFrom(ctx).Info("Recorded the remediation request answered", "node", nodeName, "request", value)
	return nil
}

// refused handles a create the API server refused for good: it says so (once per answer), retries
// with the controller's backoff up to targets.RefusalAttempts times, and then holds the start back
// for targets.RefusalHold, releasing the node's lease when no CR of the NodeHealthCheck is on the
// node (a running remediation keeps its lease). The decisions of both controllers read the record.
func (r *Reconciler) refused(ctx context.Context, snap *targets.Snapshot, node string, cr *unstructured.Unstructured, err error) error {
	nhc := snap.Stored
	rec := r.Refusals.Record(nhc.UID, node, cr.GetKind(), err, snap.Now)
	name := cr.GetName()
	if name == "" {
		name = cr.GetGenerateName() + "*"
	}
	if rec.Until.IsZero() {
		r.reportRefusal(nhc, node, "Node %s: the API server refused to create %s %s/%s (attempt %d of %d): %v", node, cr.GetKind(), cr.GetNamespace(), name, rec.Attempts, targets.RefusalAttempts, err)
		return fmt.Errorf("creating %s for node %s: %w", cr.GetKind(), node, err)
	}
	r.reportRefusal(nhc, node, "Node %s: the API server refused to create %s %s/%s %d times in a row: %v; the node's remediation waits until %s",
		node, cr.GetKind(), cr.GetNamespace(), name, rec.Attempts, err, rec.Until.UTC().Format(time.RFC3339))
	ctrl.LoggerFrom(ctx).Error(err, "Remediation refused for good; held back", "node", node, "kind", cr.GetKind(), "until", rec.Until)
	if len(snap.CRs[node]) == 0 {
		return r.release(ctx, snap, node)
	}
	return nil
}

// recordCreated makes the CR just created count in every decision from now on: the snapshots count
// it from a record until the cache shows it (targets.Gatherer.Created), so that the next decision of
// this NodeHealthCheck, the nhc controller's status, and every decision that starts a
// control-plane remediation after it (they are serialized) count it, without the reconcile waiting
// for the cache to show it. (It waited, polling the cache, until issue 36: at 25,000 nodes the
// 1% failure's 250 starts, 32 at a time, waited twice for a cache round trip each.) Decisions of
// other NodeHealthChecks made meanwhile may not see it: the node lease keeps them off the node.
func (r *Reconciler) recordCreated(cr *unstructured.Unstructured) {
	r.Wiring.Gatherer.Created(cr)
}

// stepCRExists reports, reading around the cache, whether the NodeHealthCheck already has a CR of
// this kind and template for the node.
func (r *Reconciler) stepCRExists(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, cr *unstructured.Unstructured) (bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(cr.GroupVersionKind().GroupVersion().WithKind(cr.GetKind() + "List"))
	if err := r.APIReader.List(ctx, list, client.InNamespace(cr.GetNamespace())); err != nil {
		return false, fmt.Errorf("listing %s: %w", cr.GetKind(), err)
	}
	template := cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]
	for i := range list.Items {
		existing := &list.Items[i]
		if _, uid, ok := remediationcr.ControllerNHC(existing); ok && uid == nhc.UID && remediationcr.NodeName(existing) == node &&
			existing.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation] == template {
			return true, nil
		}
	}
	return false, nil
}

// explainExisting handles a CR whose name is taken:
//   - by a CR of ours from the same template: our cache is behind; nothing to do;
//   - by a CR of ours from another template of the same kind (the templates changed during the
//     remediation): once that CR timed out it is deleted, so the step that replaces it gets its
//     name; until then it is what runs (escalation holds the node meanwhile);
//   - by another NodeHealthCheck's CR, which then remediates the node first ("first wins").
func (r *Reconciler) explainExisting(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, cr *unstructured.Unstructured) error {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(cr.GroupVersionKind())
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cr), existing); err != nil {
		return client.IgnoreNotFound(err) // gone meanwhile; the next reconcile creates it
	}
	node := remediationcr.NodeName(cr)
	name, uid, ok := remediationcr.ControllerNHC(existing)
	switch {
	case ok && uid == nhc.UID:
		oldTemplate := existing.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]
		newTemplate := cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]
		if oldTemplate == newTemplate {
			ctrl.LoggerFrom(ctx).V(1).Info("Remediation exists already; the cache is behind", "node", node, "kind", cr.GetKind(), "name", cr.GetName())
			return nil
		}
		if _, timedOut := existing.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]; !timedOut || !existing.GetDeletionTimestamp().IsZero() {
			r.reportOnce(ctx, nhc, node, onceExists, string(existing.GetUID()),
				"Node %s: cannot create %s %s/%s from template %s: the CR of that name, from template %s, still runs", node, cr.GetKind(), cr.GetNamespace(), cr.GetName(), newTemplate, oldTemplate)
			return nil
		}
		return r.deleteAll(ctx, nhc, node, []unstructured.Unstructured{*existing},
			fmt.Sprintf("it timed out, and the CR from template %s that replaces it needs its name", newTemplate), false)
	case ok:
		r.reportOnce(ctx, nhc, node, onceFirstWins, string(existing.GetUID()),
			"Node %s is already remediated by NodeHealthCheck %s (%s %s/%s); do the NodeHealthChecks select overlapping nodes?",
			node, name, existing.GetKind(), existing.GetNamespace(), existing.GetName())
	default:
		r.reportOnce(ctx, nhc, node, onceForeign, string(existing.GetUID()),
			"Node %s: cannot create %s %s/%s: an object of that name that no NodeHealthCheck controls exists", node, cr.GetKind(), cr.GetNamespace(), cr.GetName())
	}
	return nil
}

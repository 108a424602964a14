package remediation

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// escalate carries out the decision's escalation of a running remediation: while it is due and
// not held, it takes the node's lease for the step that runs from now on, marks the step that timed
// out, failed or is overdue with the nhc-timed-out annotation and creates the next step's CR. A lease
// someone else holds stops it exactly as it stops a first step; a held escalation (the gate of new
// remediations is closed, or the NodeHealthCheck is a dry run) changes nothing but renews the lease
// of the running step. It returns when the node's lease is renewed.
func (r *Reconciler) escalate(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (renewAt time.Time, err error) {
	nhc, node, crs, now := snap.Stored, d.Name, snap.CRs[d.Name], snap.Now
	e := d.Escalation
	stepCRs := make([]health.StepCR, len(crs))
	for i := range crs {
		stepCRs[i] = remediationcr.StepCR(&crs[i])
	}
	for _, i := range e.Stale {
		r.reportOnce(ctx, nhc, node, onceStale, string(crs[i].GetUID()),
			"Node %s: %s %s/%s was created from template %s, which the spec no longer references; no other remediation starts for the node until it ends",
			node, crs[i].GetKind(), crs[i].GetNamespace(), crs[i].GetName(), stepCRs[i].TemplateName)
	}
	switch {
	case d.SkipReason == health.SkipDryRun:
		// Dry-run escalates none of the CRs that ran before it was set (the decision holds them):
		// they keep running, and keep their lease, until they end. Turning dry-run off escalates at
		// the next reconcile (the spec changed).
		switch w := e.Withheld; {
		case w.Next != nil:
			ref := w.Next.Template
			r.reportDryRun(nhc, node, ref.Kind+"/"+ref.Name,
				"Dry run: would escalate node %s to %s %s/%s; no CR is created and the running one is not marked timed out", node, ref.Kind, ref.Namespace, ref.Name)
		case w.Exhausted:
			r.reportDryRun(nhc, node, "exhausted",
				"Dry run: would mark node %s's last remediation timed out (no remediation template is left); it is not marked", node)
		}
	case d.EscalationHeld():
		r.reportOnce(ctx, nhc, node, onceHeld, string(d.SkipReason)+"/"+e.Started.String(),
			"%s; the running remediation continues, and the next step is decided again once nothing holds it (%s)", capitalize(d.SkipMessage), d.SkipReason)
	}

	// Hold the node's lease for the step that runs from now on (as the decision says), before
	// anything is marked or created.
	if term := e.Lease(now); term.For > 0 {
		lease, err := r.getLease(ctx, node, false)
		if err != nil {
			return time.Time{}, err
		}
		held, err := r.holdLease(ctx, nhc, node, lease, term.For, term.From, now)
		if err != nil {
			return time.Time{}, err
		}
		if !held.held {
			// A lease someone else holds stops an escalation exactly as it stops a first step:
			// nothing is marked and nothing is created while they hold it.
			r.leaseBusy(nhc, node, held)
			return held.retryAt, nil
		}
		renewAt = held.renewAt
	}

	for _, i := range e.TimeOut {
		cr := &crs[i]
		mark := ownWrite{writeTimedOut, cr.GetUID()}
		if r.memory.made(nhc.UID, node, mark, r.Wall.Now()) {
			continue // marked by an earlier look; the cache does not show it yet
		}
		if err := remediationcr.PatchAnnotation(ctx, r.Client, cr, remediationv1alpha1.NHCTimedOutAnnotation, ptr.To(now.UTC().Format(time.RFC3339))); err != nil {
			return renewAt, fmt.Errorf("marking %s %s/%s timed out: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
		}
		r.memory.record(nhc.UID, node, mark, r.Wall.Now())
		ctrl.LoggerFrom(ctx).Info("Remediation timed out", "node", node, "kind", cr.GetKind(), "name", cr.GetName(), "overdue", e.Overdue)
		if e.Exhausted {
			r.event(nhc, corev1.EventTypeWarning, remediationv1alpha1.EventReasonNoTemplateLeft, "Escalate",
				"Node %s is still unhealthy and its last remediation (%s) timed out or failed: no remediation template is left; the node stays listed until it recovers or is deleted",
				node, cr.GetKind())
		}
	}
	if e.Next != nil {
		return renewAt, r.create(ctx, snap, node, *e.Next, d.Health.Requested)
	}
	return renewAt, nil
}

// flagOld flags, once, each running CR older than OldRemediationAge with an annotation, a metric and
// a warning event; it returns when the next CR comes of that age.
func (r *Reconciler) flagOld(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, crs []unstructured.Unstructured, now time.Time) (time.Time, error) {
	var next time.Time
	for i := range crs {
		cr := &crs[i]
		if _, flagged := cr.GetAnnotations()[remediationv1alpha1.OldRemediationCRAnnotation]; flagged || !cr.GetDeletionTimestamp().IsZero() {
			continue
		}
		due := cr.GetCreationTimestamp().Add(OldRemediationAge)
		if now.Before(due) {
			next = health.Earliest(next, due)
			continue
		}
		if err := remediationcr.PatchAnnotation(ctx, r.Client, cr, remediationv1alpha1.OldRemediationCRAnnotation, ptr.To(remediationv1alpha1.OldRemediationCRFlag)); err != nil {
			return next, fmt.Errorf("flagging %s %s/%s as old: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
		}
		if !r.memory.first(nhc.UID, node, onceOld, string(cr.GetUID())) {
			continue // flagged before the cache showed it
		}
		oldRemediationCR.WithLabelValues(node, "").Inc()
		r.event(nhc, corev1.EventTypeWarning, remediationv1alpha1.EventReasonOldRemediationCR, "Flag",
			"%s %s/%s for node %s has been running for more than %s; check its remediator", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node, OldRemediationAge)
	}
	return next, nil
}

// markHealthyDelay records on each CR when its node's healthy delay started (empty: removes the
// record), so that remediators can tell a delayed CR from a running one.
func (r *Reconciler) markHealthyDelay(ctx context.Context, crs []unstructured.Unstructured, since string) error {
	for i := range crs {
		cr := &crs[i]
		current, has := cr.GetAnnotations()[remediationv1alpha1.HealthyDelayAnnotation]
		if (since == "" && !has) || (since != "" && current == since) || !cr.GetDeletionTimestamp().IsZero() {
			continue
		}
		var value *string
		if since != "" {
			value = &since
		}
		if err := remediationcr.PatchAnnotation(ctx, r.Client, cr, remediationv1alpha1.HealthyDelayAnnotation, value); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("annotating %s %s/%s: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
		}
	}
	return nil
}

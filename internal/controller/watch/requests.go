package watch

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// NHCRequests lists the NodeHealthChecks (from the cache) and returns a request for each that
// matches (nil match: every one); match sees the cache's objects and must not modify them. A listing error is logged; it enqueues nothing.
func NHCRequests(ctx context.Context, c client.Reader, match func(*remediationv1alpha1.NodeHealthCheck) bool) []reconcile.Request {
	list := &remediationv1alpha1.NodeHealthCheckList{}
	// Read only: a node event maps through every NodeHealthCheck, and copying them all (with their
	// status) for each event was a fifth of the heap in the scale benchmark's outage.
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing NodeHealthChecks")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if match == nil || match(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return reqs
}

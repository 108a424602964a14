package testutil

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// remediationKinds are the remediation CR kinds of the test remediators (test/crds).
var remediationKinds = []schema.GroupVersionKind{TestRemediationKind, ClusterTestRemediationKind, SelfNodeRemediationKind}

// collectGarbage stands in for the garbage collector, which envtest does not run: every interval it
// deletes the remediation CRs whose NodeHealthCheck owners are all gone, as a cluster would. Without
// it CRs of the specs before would stay and count (one control-plane node at a time counts every
// CR labelled as a control-plane node's, whatever its owner).
func collectGarbage(ctx context.Context, c client.Client, interval time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		nhcs := &remediationv1alpha1.NodeHealthCheckList{}
		if err := c.List(ctx, nhcs); err != nil {
			continue
		}
		alive := map[types.UID]bool{}
		for _, n := range nhcs.Items {
			alive[n.UID] = true
		}
		for _, gvk := range remediationKinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list); err != nil {
				continue // not installed in this suite (no match), or try again
			}
			for i := range list.Items {
				// The NodeHealthChecks were listed before the CRs: one created in between, with its
				// CRs, is looked up again before anything is deleted.
				if orphaned(&list.Items[i], alive) && ownersGone(ctx, c, &list.Items[i]) {
					_ = client.IgnoreNotFound(c.Delete(ctx, &list.Items[i], client.PropagationPolicy("Background")))
				}
			}
		}
	}
}

// orphaned reports whether the CR has NodeHealthCheck owners and none of them exists.
func orphaned(cr *unstructured.Unstructured, alive map[types.UID]bool) bool {
	owned := false
	for _, o := range cr.GetOwnerReferences() {
		if o.Kind != "NodeHealthCheck" {
			continue
		}
		owned = true
		if alive[o.UID] {
			return false
		}
	}
	return owned && cr.GetDeletionTimestamp() == nil
}

// ownersGone reports, reading each from the API, whether every NodeHealthCheck owner of the CR is gone.
func ownersGone(ctx context.Context, c client.Client, cr *unstructured.Unstructured) bool {
	for _, o := range cr.GetOwnerReferences() {
		if o.Kind != "NodeHealthCheck" {
			continue
		}
		n := &remediationv1alpha1.NodeHealthCheck{}
		err := c.Get(ctx, client.ObjectKey{Name: o.Name}, n)
		if err == nil && n.UID == o.UID || err != nil && !apierrors.IsNotFound(err) {
			return false
		}
	}
	return true
}

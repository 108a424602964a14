package e2e

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func clientKey(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}

// leaseHolder returns a function reading the holder of the leader-election Lease id ("" when none).
func leaseHolder(ctx context.Context, id string) func() string {
	return func() string {
		lease := &coordinationv1.Lease{}
		if err := k8s.Get(ctx, clientKey(leaseNamespace, id), lease); err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
}

// leaseRenewed returns a function reading when the leader-election Lease id was last renewed (zero
// when never).
func leaseRenewed(ctx context.Context, id string) func() time.Time {
	return func() time.Time {
		lease := &coordinationv1.Lease{}
		if err := k8s.Get(ctx, clientKey(leaseNamespace, id), lease); err != nil || lease.Spec.RenewTime == nil {
			return time.Time{}
		}
		return lease.Spec.RenewTime.Time
	}
}

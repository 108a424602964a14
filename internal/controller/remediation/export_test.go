package remediation

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// CreateInLeaseNamespace is how a start creates a node's lease (takeLease), for the suite.
func (r *Reconciler) CreateInLeaseNamespace(ctx context.Context, lease *coordinationv1.Lease) error {
	return r.createInLeaseNamespace(ctx, lease)
}

package remediation

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
)

// A step starts when its CR is created (the API server's clock, whole seconds), a moment after the
// lease was taken for it: that is not a new step, and the lease is not renewed for it. A step that
// starts later is, and the lease is acquired again for it.
func TestTakeLeaseKeepsTheStepItWasTakenFor(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	nhc := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "workers", UID: "uid"}}
	holder, duration := leaseHolder(nhc), nodelease.Duration(0)
	taken := now.Add(-2 * time.Second).Add(-300 * time.Millisecond) // this controller's clock
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: nodelease.DefaultNamespace, Name: nodelease.Name("node")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(nodelease.Seconds(duration)),
			AcquireTime: &metav1.MicroTime{Time: taken}, RenewTime: &metav1.MicroTime{Time: taken}},
	}
	updates := 0
	c := fake.NewClientBuilder().WithObjects(lease).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, Leases: c}
	stored := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(lease), stored); err != nil {
		t.Fatal(err)
	}

	crCreated := taken.Truncate(time.Second).Add(time.Second) // the CR, a moment later, in whole seconds
	res, err := r.takeLease(ctx, nhc, "node", stored, duration, crCreated, now)
	if err != nil || !res.held || updates != 0 {
		t.Fatalf("held %v, %d updates, %v; want the lease kept as it is for the step it was taken for", res.held, updates, err)
	}

	next := now.Add(5 * time.Minute) // the next escalation step's CR
	res, err = r.takeLease(ctx, nhc, "node", stored, duration, next, next.Add(time.Second))
	if err != nil || !res.held || updates != 1 {
		t.Fatalf("held %v, %d updates, %v; want the lease acquired again for the next step", res.held, updates, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(lease), stored); err != nil {
		t.Fatal(err)
	}
	if !stored.Spec.AcquireTime.Time.Equal(next) {
		t.Fatalf("acquireTime %v, want the next step's start %v", stored.Spec.AcquireTime, next)
	}
}

package remediation

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
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

// The lease cache's mapper maps Leases and their lists as namespaced, in coordination.k8s.io/v1,
// cheaply (the cache asks on every read), and refuses every other kind.
func TestLeaseMapperMapsLeasesAlone(t *testing.T) {
	m := leaseMapper()
	gvk := coordinationv1.SchemeGroupVersion.WithKind("Lease")
	mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil || mapping.Resource != coordinationv1.SchemeGroupVersion.WithResource("leases") || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("the Lease mapping: %+v, %v; want leases, namespaced", mapping, err)
	}
	lease := &coordinationv1.Lease{}
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if namespaced, err := apiutil.IsObjectNamespaced(lease, scheme, m); err != nil || !namespaced {
			t.Fatalf("IsObjectNamespaced(Lease) = %t, %v", namespaced, err)
		}
	}); allocs > 4 {
		t.Errorf("a lease cache read asks the mapper with %v allocations, want at most 4", allocs)
	}
	if namespaced, err := apiutil.IsObjectNamespaced(&coordinationv1.LeaseList{}, scheme, m); err != nil || !namespaced {
		t.Errorf("IsObjectNamespaced(LeaseList) = %t, %v; the lease cache's List asks it", namespaced, err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); !meta.IsNoMatchError(err) {
		t.Errorf("a ConfigMap through the lease mapper: %v, want a no-match error", err)
	}
}

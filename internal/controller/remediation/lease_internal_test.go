package remediation

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
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

// A lease this process wrote is read through the cache only once the cache shows the write: the
// start creates its CR and its reconcile ends while the lease cache catches up (leaseShown), and a
// read of the node's lease meanwhile (a refused create releasing it, the next reconcile's release
// when the node recovers at once) waits for it instead of finding no lease and leaving the new one
// to expire.
func TestGetLeaseWaitsForTheCacheToShowOurWrite(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	nhc := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "workers", UID: "uid"}}
	api := fake.NewClientBuilder().WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", UID: "node-uid"}}).Build()
	// The lease cache shows the API server's lease from the second time the write's wait (the
	// only reader with a deadline: wait.PollUntilContextTimeout's) asks for it.
	var mu sync.Mutex
	var reads []string
	waitReads := 0
	cache := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			mu.Lock()
			_, fromTheWait := ctx.Deadline()
			if fromTheWait {
				if waitReads++; waitReads == 2 {
					written := &coordinationv1.Lease{}
					if err := api.Get(ctx, key, written); err != nil {
						mu.Unlock()
						return err
					}
					written.ResourceVersion = ""
					if err := c.Create(ctx, written); err != nil {
						mu.Unlock()
						return err
					}
				}
			}
			err := c.Get(ctx, key, obj, opts...)
			reads = append(reads, fmt.Sprintf("wait %t, found %t", fromTheWait, err == nil))
			mu.Unlock()
			return err
		},
	}).Build()
	r := &Reconciler{Client: api, Leases: cache}

	// The reconcile that wrote it ends (its context is canceled) before the cache shows it.
	reconcileCtx, endReconcile := context.WithCancel(ctx)
	res, err := r.takeLease(reconcileCtx, nhc, "node", nil, time.Minute, now, now)
	endReconcile()
	if err != nil || !res.held {
		t.Fatalf("held %v, %v: want the lease created", res.held, err)
	}
	lease, err := r.getLease(ctx, "node", false)
	mu.Lock()
	defer mu.Unlock()
	if err != nil || lease == nil {
		t.Fatalf("the lease through the cache: %v, %v; want the lease written (reads: %v)", lease, err, reads)
	}
	if last := reads[len(reads)-1]; last != "wait false, found true" || waitReads < 2 {
		t.Errorf("reads %v: want the read after the wait's reads, the last of which found it", reads)
	}
}

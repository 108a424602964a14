package remediation

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

func TestLeaseName(t *testing.T) {
	if got := leaseName("worker-1"); got != "node-worker-1" {
		t.Errorf("short name: %q", got)
	}
	long := strings.Repeat("a", 200) + "." + strings.Repeat("b", 52) // 253 characters, the longest node name
	other := strings.Repeat("a", 200) + "." + strings.Repeat("b", 51) + "c"
	for _, node := range []string{long, other, strings.Repeat("x", 249), strings.Repeat("y", 244) + "." + "zzzzzzzz"} {
		name := leaseName(node)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("lease name of %d-character node %q is invalid: %v", len(node), name, errs)
		}
	}
	if leaseName(long) == leaseName(other) {
		t.Error("two long node names share one lease")
	}
	if leaseName(long) != leaseName(long) {
		t.Error("not deterministic")
	}
}

func TestLeaseDurations(t *testing.T) {
	if got := leaseDuration(0); got != 11*time.Minute {
		t.Errorf("single template: %v", got)
	}
	if got := leaseDuration(5 * time.Minute); got != 6*time.Minute {
		t.Errorf("5m step: %v", got)
	}
	// A timeout beyond what a lease holds (or near the largest Duration) neither overflows the
	// duration nor the int32 seconds.
	for _, timeout := range []time.Duration{100 * 365 * 24 * time.Hour, time.Duration(1<<63 - 1)} {
		d := leaseDuration(timeout)
		if d <= 0 || d > maxLeaseDuration {
			t.Errorf("timeout %v: lease duration %v", timeout, d)
		}
		if s := leaseSeconds(d); s <= 0 {
			t.Errorf("timeout %v: %d seconds", timeout, s)
		}
	}
}

func TestForeignHold(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, seconds *int32, renewed *time.Time) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: seconds}}
		if renewed != nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: *renewed}
		}
		return l
	}
	recent, old := now.Add(-time.Minute), now.Add(-time.Hour)
	tests := []struct {
		name    string
		lease   *coordinationv1.Lease
		held    bool
		expires time.Time
	}{
		{name: "no lease", lease: nil},
		{name: "ours", lease: lease("NodeHealthCheck-a", ptr.To[int32](600), &recent)},
		{name: "nobody's", lease: lease("", ptr.To[int32](600), &recent)},
		{name: "another's, valid", lease: lease("maintenance", ptr.To[int32](600), &recent), held: true, expires: recent.Add(10 * time.Minute)},
		{name: "another's, expired", lease: lease("maintenance", ptr.To[int32](600), &old), expires: old.Add(10 * time.Minute)},
		{name: "another's without a duration is held until released", lease: lease("maintenance", nil, &old), held: true},
		{name: "another's without a renew time is held until released", lease: lease("maintenance", ptr.To[int32](600), nil), held: true},
	}
	for _, tt := range tests {
		held, expires := foreignHold(tt.lease, "NodeHealthCheck-a", now)
		if held != tt.held || !expires.Equal(tt.expires) {
			t.Errorf("%s: held %v until %v, want %v until %v", tt.name, held, expires, tt.held, tt.expires)
		}
	}
}

func TestLeaseOverdue(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("NodeHealthCheck-a"), LeaseDurationSeconds: ptr.To[int32](600),
		AcquireTime: &metav1.MicroTime{Time: now.Add(-30 * time.Minute)}}}
	if leaseOverdue(l, "NodeHealthCheck-a", now) {
		t.Error("overdue at exactly three durations")
	}
	if !leaseOverdue(l, "NodeHealthCheck-a", now.Add(time.Second)) {
		t.Error("not overdue after three durations")
	}
	if leaseOverdue(l, "NodeHealthCheck-b", now.Add(time.Hour)) || leaseOverdue(nil, "NodeHealthCheck-a", now) {
		t.Error("overdue for another holder or no lease")
	}
}

// A step starts when its CR is created (the API server's clock, whole seconds), a moment after the
// lease was taken for it: that is not a new step, and the lease is not renewed for it. A step that
// starts later is, and the lease is acquired again for it.
func TestTakeLeaseKeepsTheStepItWasTakenFor(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	nhc := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "workers", UID: "uid"}}
	holder, duration := leaseHolder(nhc), leaseDuration(0)
	taken := now.Add(-2 * time.Second).Add(-300 * time.Millisecond) // this controller's clock
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultLeaseNamespace, Name: leaseName("node")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(leaseSeconds(duration)),
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

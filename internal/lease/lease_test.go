package lease

import (
	"math"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

func TestName(t *testing.T) {
	if got := Name("worker-1"); got != "node-worker-1" {
		t.Errorf("short name: %q", got)
	}
	long := strings.Repeat("a", 200) + "." + strings.Repeat("b", 52) // 253 characters, the longest node name
	other := strings.Repeat("a", 200) + "." + strings.Repeat("b", 51) + "c"
	for _, node := range []string{long, other, strings.Repeat("x", 249), strings.Repeat("y", 244) + "." + "zzzzzzzz"} {
		name := Name(node)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("lease name of %d-character node %q is invalid: %v", len(node), name, errs)
		}
	}
	if Name(long) == Name(other) {
		t.Error("two long node names share one lease")
	}
	if Name(long) != Name(long) {
		t.Error("not deterministic")
	}
}

func TestDurations(t *testing.T) {
	if got := Duration(0); got != 11*time.Minute {
		t.Errorf("single template: %v", got)
	}
	if got := Duration(5 * time.Minute); got != 6*time.Minute {
		t.Errorf("5m step: %v", got)
	}
	if got := Overdue(0); got != 33*time.Minute {
		t.Errorf("single template overdue after %v, want 3 lease durations", got)
	}
	if got := Overdue(10 * time.Minute); got != 33*time.Minute {
		t.Errorf("10m step overdue after %v", got)
	}
	// A timeout beyond what a lease holds (or near the largest Duration) neither overflows the
	// duration, the int32 seconds nor the overdue time.
	for _, timeout := range []time.Duration{100 * 365 * 24 * time.Hour, time.Duration(math.MaxInt64)} {
		d := Duration(timeout)
		if d <= 0 || d > MaxDuration {
			t.Errorf("timeout %v: lease duration %v", timeout, d)
		}
		if s := Seconds(d); s <= 0 {
			t.Errorf("timeout %v: %d seconds", timeout, s)
		}
		if o := Overdue(timeout); o < d {
			t.Errorf("timeout %v: overdue after %v", timeout, o)
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
		held, expires := ForeignHold(tt.lease, Holder("a"), now)
		if held != tt.held || !expires.Equal(tt.expires) {
			t.Errorf("%s: held %v until %v, want %v until %v", tt.name, held, expires, tt.held, tt.expires)
		}
	}
}

func TestRenew(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const d = 6 * time.Minute // a third: 2m
	lease := func(holder string, acquired, renewed time.Time, duration time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(Seconds(duration)),
			AcquireTime: &metav1.MicroTime{Time: acquired}, RenewTime: &metav1.MicroTime{Time: renewed}}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		return l
	}
	step := now.Add(-5 * time.Minute) // when the running step started
	for _, tc := range []struct {
		name  string
		lease *coordinationv1.Lease
		start time.Time
		want  Renewal
	}{
		{"ours, renewed a minute ago: nothing to write, renew a third after the renewal", lease("me", step, now.Add(-time.Minute), d), step,
			Renewal{AcquireTime: step, RenewAt: now.Add(time.Minute)}},
		{"ours, its step started within the slack after the acquisition: the same step", lease("me", step, now.Add(-time.Minute), d), step.Add(StepStartSlack),
			Renewal{AcquireTime: step, RenewAt: now.Add(time.Minute)}},
		{"ours, a third has passed: renew, keep the acquisition", lease("me", step, now.Add(-2*time.Minute), d), step,
			Renewal{Write: true, AcquireTime: step, RenewAt: now.Add(2 * time.Minute)}},
		{"ours, another duration (the step changed its timeout): renew", lease("me", step, now.Add(-time.Minute), time.Minute), step,
			Renewal{Write: true, AcquireTime: step, RenewAt: now.Add(2 * time.Minute)}},
		{"ours, a later step started: acquired anew at its start", lease("me", step, now.Add(-time.Minute), d), now.Add(-time.Second),
			Renewal{Write: true, AcquireTime: now.Add(-time.Second), RenewAt: now.Add(2 * time.Minute)}},
		{"free: taken from the step's start", lease("", time.Time{}, now.Add(-time.Hour), d), step,
			Renewal{Write: true, AcquireTime: step, RenewAt: now.Add(2 * time.Minute)}},
		{"another's, expired: taken from the step's start", lease("maintenance", now.Add(-time.Hour), now.Add(-time.Hour), d), step,
			Renewal{Write: true, AcquireTime: step, RenewAt: now.Add(2 * time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Renew(tc.lease, "me", d, tc.start, now); got != tc.want {
				t.Errorf("Renew = %+v, want %+v", got, tc.want)
			}
		})
	}
}

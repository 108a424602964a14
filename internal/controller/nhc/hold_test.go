package nhc

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

func TestHoldWrite(t *testing.T) {
	wall := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Reconciler{StatusBatch: 2 * time.Second, Wall: wall}
	stored := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "pool", UID: "u1", ResourceVersion: "1"}}
	stored.Status.HealthyNodes = ptr.To(3)
	report := func(healthy int, listed ...string) *remediationv1alpha1.NodeHealthCheckStatus {
		st := &remediationv1alpha1.NodeHealthCheckStatus{HealthyNodes: ptr.To(healthy), LastUpdateTime: &metav1.Time{Time: wall.Now()}}
		for _, n := range listed {
			st.UnhealthyNodes = append(st.UnhealthyNodes, remediationv1alpha1.UnhealthyNode{Name: n})
		}
		return st
	}
	if hold, write := r.holdWrite(stored, report(2, "a")); !write || hold != 0 {
		t.Fatalf("first change: hold %v, write %v; want it written at once", hold, write)
	}
	written := stored.DeepCopy()
	written.ResourceVersion, written.Status = "2", *report(2, "a")
	r.wrote(stored, written)

	// The cache still shows the status the write replaced.
	wall.SetTime(wall.Now().Add(5 * time.Second))
	if hold, write := r.holdWrite(stored, report(2, "a")); write || hold != 0 {
		t.Fatalf("the status last written, the cache behind: hold %v, write %v; want no write and no hold", hold, write)
	}
	// Someone else wrote the status meanwhile: the report is written again.
	edited := stored.DeepCopy()
	edited.ResourceVersion, edited.Status = "3", *report(4)
	if _, write := r.holdWrite(edited, report(2, "a")); !write {
		t.Fatal("a status someone else wrote is not rewritten")
	}
	// A NodeHealthCheck of the same name, created again, is another object.
	again := stored.DeepCopy()
	again.UID = "u2"
	if _, write := r.holdWrite(again, report(2, "a")); !write {
		t.Fatal("a new NodeHealthCheck of the same name is not written")
	}

	// A second change 5 s after the write: a quiet StatusBatch, written at once.
	if hold, write := r.holdWrite(written, report(1, "a", "b")); !write || hold != 0 {
		t.Fatalf("a change after a quiet StatusBatch: hold %v, write %v; want it written at once", hold, write)
	}
	next := written.DeepCopy()
	next.ResourceVersion, next.Status = "4", *report(1, "a", "b")
	r.wrote(written, next)
	// Changes within StatusBatch of the write wait for its end; after a write that was not held
	// (no burst), a change of the counts alone too (issue 36: an isolated change within 2 s).
	wall.SetTime(wall.Now().Add(500 * time.Millisecond))
	if hold, write := r.holdWrite(next, report(2, "a", "b")); write || hold != 1500*time.Millisecond {
		t.Fatalf("the counts alone changed 500ms after an isolated write: hold %v, write %v; want it held 1.5s", hold, write)
	}
	if hold, write := r.holdWrite(next, report(0, "a", "b", "c")); write || hold != 1500*time.Millisecond {
		t.Fatalf("a change 500ms after the last write: hold %v, write %v; want it held 1.5s", hold, write)
	}
	wall.SetTime(wall.Now().Add(1500 * time.Millisecond))
	if hold, write := r.holdWrite(next, report(0, "a", "b", "c")); !write || hold != 0 {
		t.Fatalf("StatusBatch after the last write: hold %v, write %v; want it written", hold, write)
	}

	written = next.DeepCopy()
	written.ResourceVersion, written.Status = "5", *report(0, "a", "b", "c")
	r.wrote(next, written)
	// That write had been held: a burst. A change of the counts alone now waits up to
	// countsOnlyBatches StatusBatches, unless something else changes too.
	wall.SetTime(wall.Now().Add(2500 * time.Millisecond))
	if hold, write := r.holdWrite(written, report(1, "a", "b", "c")); write || hold != 3500*time.Millisecond {
		t.Fatalf("the counts alone changed 2.5s after the last write: hold %v, write %v; want it held 3.5s", hold, write)
	}
	if hold, write := r.holdWrite(written, report(1, "a", "b")); !write || hold != 0 {
		t.Fatalf("a node no longer listed 2.5s after the last write: hold %v, write %v; want it written", hold, write)
	}

	// A new remediation start in the repair budget's history is written at once, whenever the last
	// write: a start recorded late is forgotten if its CR goes first.
	wall.SetTime(wall.Now().Add(500 * time.Millisecond))
	started := report(0, "a", "b", "c")
	started.RemediationHistory = []remediationv1alpha1.NodeRemediationHistory{{Name: "a", Started: []metav1.Time{{Time: wall.Now()}}}}
	if hold, write := r.holdWrite(written, started); !write || hold != 0 {
		t.Fatalf("a new start 500ms after the last write: hold %v, write %v; want it written at once", hold, write)
	}

	r.forget("pool")
	if _, kept := r.written["pool"]; kept {
		t.Fatal("a deleted NodeHealthCheck's last write is kept")
	}
}

package nhc

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

func TestAwaitStarts(t *testing.T) {
	stored := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "pool"}}
	snapshot := func(starting int, withCR ...string) *targets.Snapshot {
		s := &targets.Snapshot{Stored: stored, NHC: stored, CRs: map[string][]unstructured.Unstructured{}}
		for i := range starting {
			s.Decision.Nodes = append(s.Decision.Nodes, health.NodeDecision{Name: fmt.Sprintf("n%d", i), Action: health.StartRemediation})
		}
		for _, n := range withCR {
			s.CRs[n] = []unstructured.Unstructured{{}}
		}
		return s
	}
	wall := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Reconciler{StartWait: 2 * time.Second, Wall: wall}
	if w := r.awaitStarts(snapshot(1)); w != 2*time.Second {
		t.Fatalf("one node starting: wait %v, want 2s for its CR", w)
	}
	wall.SetTime(wall.Now().Add(500 * time.Millisecond))
	if w := r.awaitStarts(snapshot(awaitMaxStarts)); w != 1500*time.Millisecond {
		t.Fatalf("%d nodes starting, the first seen 500ms ago: wait %v, want 1.5s (the first bounds them all)", awaitMaxStarts, w)
	}
	if w := r.awaitStarts(snapshot(awaitMaxStarts, "n0", "n1", "n2")); w != 0 {
		t.Fatalf("every CR there: wait %v, want none", w)
	}
	if w := r.awaitStarts(snapshot(awaitMaxStarts + 1)); w != 0 {
		t.Fatalf("%d nodes starting at once: wait %v, want none (the status lists them now)", awaitMaxStarts+1, w)
	}
	if _, kept := r.starting[stored.Name]; kept {
		t.Fatal("a NodeHealthCheck that does not wait keeps its starting nodes")
	}
	// Four starting, three of them with a CR already: one is waited for.
	if w := r.awaitStarts(snapshot(awaitMaxStarts+1, "n0", "n1", "n2")); w != 2*time.Second {
		t.Fatalf("one node left without a CR: wait %v, want 2s", w)
	}
	wall.SetTime(wall.Now().Add(3 * time.Second))
	if w := r.awaitStarts(snapshot(awaitMaxStarts+1, "n0", "n1", "n2")); w != 0 {
		t.Fatalf("one node left without a CR for 3s: wait %v, want none (StartWait is over)", w)
	}
	dry := stored.DeepCopy()
	dry.Spec.DryRun = true
	s := snapshot(1)
	s.NHC = dry
	if w := (&Reconciler{StartWait: 2 * time.Second, Wall: wall}).awaitStarts(s); w != 0 {
		t.Fatalf("dry-run: wait %v, want none (no CR comes)", w)
	}
}

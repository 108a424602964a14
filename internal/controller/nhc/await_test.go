package nhc

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	r := &Reconciler{StartWait: 2 * time.Second}
	if w := r.awaitStarts(snapshot(1)); w <= 0 || w > 2*time.Second {
		t.Fatalf("one node starting: wait %v, want up to 2s for its CR", w)
	}
	if w := r.awaitStarts(snapshot(awaitMaxStarts)); w <= 0 || w > 2*time.Second {
		t.Fatalf("%d nodes starting: wait %v, want up to 2s for their CRs", awaitMaxStarts, w)
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
	if w := r.awaitStarts(snapshot(awaitMaxStarts+1, "n0", "n1", "n2")); w <= 0 {
		t.Fatalf("one node left without a CR: wait %v, want a wait", w)
	}
	dry := stored.DeepCopy()
	dry.Spec.DryRun = true
	s := snapshot(1)
	s.NHC = dry
	if w := (&Reconciler{StartWait: 2 * time.Second}).awaitStarts(s); w != 0 {
		t.Fatalf("dry-run: wait %v, want none (no CR comes)", w)
	}
}

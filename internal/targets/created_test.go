package targets

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func cr(kind, name string, uid types.UID) unstructured.Unstructured {
	u := unstructured.Unstructured{}
	u.SetAPIVersion("test.medik8s.io/v1alpha1")
	u.SetKind(kind)
	u.SetName(name)
	u.SetUID(uid)
	return u
}

// A CR this process created counts until the cache shows it, once, and only for its kind.
func TestCreatedCountsUntilTheCacheShowsIt(t *testing.T) {
	g := &Gatherer{}
	mine := cr("TestRemediation", "cp-0", "uid-1")
	g.Created(&mine)
	gvk := mine.GroupVersionKind()

	if got := g.withCreated(gvk, nil, shownIn(nil), nil); len(got) != 1 || got[0].GetUID() != "uid-1" {
		t.Fatalf("before the cache shows it: %v, want the created CR", got)
	}
	other := cr("OtherRemediation", "x", "uid-2")
	if got := g.withCreated(other.GroupVersionKind(), nil, shownIn(nil), nil); len(got) != 0 {
		t.Fatalf("another kind: %v, want none", got)
	}
	if got := g.withCreated(gvk, []unstructured.Unstructured{mine}, shownIn([]unstructured.Unstructured{mine}), nil); len(got) != 1 {
		t.Fatalf("once the cache shows it: %d CRs, want it once", len(got))
	}
	if got := g.withCreated(gvk, nil, shownIn(nil), nil); len(got) != 0 {
		t.Fatalf("after the cache showed it: %v, want it forgotten", got)
	}
}

// A CR this process deleted is not counted from its record.
func TestForgetDropsTheRecord(t *testing.T) {
	g := &Gatherer{}
	mine := cr("TestRemediation", "cp-0", "uid-1")
	g.Created(&mine)
	g.Forget("uid-1")
	if got := g.withCreated(mine.GroupVersionKind(), nil, shownIn(nil), nil); len(got) != 0 {
		t.Fatalf("after Forget: %v, want none", got)
	}
}

// A record the cache never confirms (the CR was deleted by someone else before the cache showed
// it) counts for createdTTL of real time, then is dropped.
func TestCreatedRecordExpires(t *testing.T) {
	wall := clocktesting.NewFakePassiveClock(time.Now())
	g := &Gatherer{Wall: wall}
	mine := cr("TestRemediation", "cp-0", "uid-1")
	g.Created(&mine)
	wall.SetTime(wall.Now().Add(createdTTL))
	if got := g.withCreated(mine.GroupVersionKind(), nil, shownIn(nil), nil); len(got) != 1 {
		t.Fatalf("at createdTTL: %v, want it still counted", got)
	}
	wall.SetTime(wall.Now().Add(time.Second))
	if got := g.withCreated(mine.GroupVersionKind(), nil, shownIn(nil), nil); len(got) != 0 {
		t.Fatalf("past createdTTL: %v, want it dropped", got)
	}
}

// The records of a NodeHealthCheck that is gone are dropped with it.
func TestForgetNHCDropsItsRecords(t *testing.T) {
	g := &Gatherer{}
	owned := func(name string, uid, owner types.UID) *unstructured.Unstructured {
		u := cr("TestRemediation", name, uid)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "remediation.medik8s.io/v1alpha1", Kind: "NodeHealthCheck", Name: "nhc", UID: owner}})
		return &u
	}
	g.Created(owned("a", "uid-1", "nhc-a"))
	g.Created(owned("b", "uid-2", "nhc-b"))
	g.ForgetNHC("nhc-a")
	if got := g.withCreated(owned("a", "", "").GroupVersionKind(), nil, shownIn(nil), nil); len(got) != 1 || got[0].GetName() != "b" || g.Recorded() != 1 {
		t.Fatalf("after ForgetNHC(nhc-a): %v, want b's record only", got)
	}
}

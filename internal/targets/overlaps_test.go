package targets

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// The overlaps are computed again exactly when what they depend on changed: the node labels (the
// node source's epoch), the NodeHealthCheck's own selector, another's selector or deletion, another
// NodeHealthCheck. A stale result after a change, or a result computed again without one (shown by
// a relabel that the epoch does not tell yet), fails.
func TestOverlapsAreKeptUntilWhatTheyDependOnChanges(t *testing.T) {
	nhc := func(name string, generation int64, pool string) *remediationv1alpha1.NodeHealthCheck {
		n := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: generation}}
		n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}}
		return n
	}
	n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}}}
	nodes := []*corev1.Node{n1}
	self := nhc("self", 1, "a")
	others := []*remediationv1alpha1.NodeHealthCheck{self, nhc("b", 1, "a"), nhc("c", 1, "x")}
	g := &Gatherer{}
	var epoch uint64
	want := func(step string, names ...string) {
		t.Helper()
		r := &reading{stored: self, nodes: nodes, nhcs: others, labelEpoch: epoch, epochKnown: true}
		g.knownOverlaps(r)
		var got []string
		for _, o := range r.overlaps {
			got = append(got, o.NHC)
		}
		if !r.overlapsKnown || !slices.Equal(got, names) {
			t.Fatalf("%s: overlaps %v (known %t), want %v", step, got, r.overlapsKnown, names)
		}
	}
	want("first", "b")
	n1.Labels = map[string]string{"pool": "x"} // relabelled in the cache, its event not routed yet
	want("a relabel the epoch does not tell yet", "b")
	slices.Reverse(others)
	want("the same NodeHealthChecks in another order (the cache's order is none)", "b")
	slices.Reverse(others)
	epoch++
	want("after the node event", "c")
	others[2] = nhc("c", 2, "y")
	want("another's selector changed")
	others[1] = nhc("b", 2, "x")
	want("another's selector changed again", "b")
	deleted := metav1.NewTime(time.Now())
	others[1].DeletionTimestamp = &deleted
	want("another being deleted")
	others[1].DeletionTimestamp = nil
	want("the deletion gone (a recreated one of the same name)", "b")
	others = append(others, nhc("d", 1, "x"))
	want("a new one", "b", "d")
	self.Generation, nodes = 2, nil // its new selector selects no node
	want("its own selector changed")
	if len(g.overlaps) != 1 {
		t.Fatalf("%d kept; want one, its own", len(g.overlaps))
	}
}

// nhcIndexes serves a NodeHealthCheck store besides storeIndexes'.
type nhcIndexes struct {
	storeIndexes
	nhcs toolscache.Store
}

func (x nhcIndexes) NodeHealthChecks() (toolscache.Store, bool) { return x.nhcs, true }

// A decision reads the NodeHealthChecks as the informer's store holds them: its objects, not copies.
func TestNodeHealthChecksAreTheCachesOwn(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	var want []string
	for i := range 20 {
		name := fmt.Sprintf("nhc-%02d", 19-i)
		want = append([]string{name}, want...)
		if err := store.Add(&remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	g := &Gatherer{Indexes: nhcIndexes{nhcs: store}}
	got, err := g.nodeHealthChecks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
		if cached, _, _ := store.GetByKey(o.Name); cached != any(o) {
			t.Fatalf("read a copy of %s, want the store's object", o.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("read %v, want %v", names, want)
	}
}

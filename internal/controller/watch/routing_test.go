package watch

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

func selecting(name string, sel metav1.LabelSelector) remediationv1alpha1.NodeHealthCheck {
	return remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: remediationv1alpha1.NodeHealthCheckSpec{Selector: sel}}
}

func names(reqs []reconcile.Request) []string {
	var out []string
	for _, r := range reqs {
		if !slices.Contains(out, r.Name) {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestAffected(t *testing.T) {
	ctx := context.Background()
	scheme := testutil.Scheme()
	nhc := func(name string, sel metav1.LabelSelector) *remediationv1alpha1.NodeHealthCheck {
		h := selecting(name, sel)
		h.UID, h.Generation = types.UID("uid-"+name), 1
		return &h
	}
	pool := func(p string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{"pool": p}}
	}
	workerB := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-b", Labels: map[string]string{"pool": "b"}}}
	a := NewAffected(fake.NewClientBuilder().WithScheme(scheme).WithObjects(workerB).Build())
	informer := a.handler()
	for _, h := range []*remediationv1alpha1.NodeHealthCheck{nhc("pool-a", pool("a")), nhc("pool-b", pool("b")), nhc("everything", metav1.LabelSelector{}),
		nhc("invalid", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}})} {
		informer.OnAdd(h, true)
	}
	all := []string{"everything", "invalid", "pool-a", "pool-b"}
	expect := func(what string, got []reconcile.Request, want ...string) {
		t.Helper()
		if !slices.Equal(names(got), want) {
			t.Errorf("%s: %v, want %v", what, names(got), want)
		}
	}

	expect("a pool-a worker", a.ByNode(map[string]string{"pool": "a"}), "everything", "invalid", "pool-a")
	expect("an unlabelled node", a.ByNode(nil), "everything", "invalid")
	expect("a control-plane node in no pool", a.ByNode(map[string]string{remediationcr.ControlPlaneRoleLabel: ""}), all...)
	expect("a master node", a.ByNode(map[string]string{remediationcr.MasterRoleLabel: "", "pool": "a"}), all...)

	// A new spec (generation) is parsed again; a status update (same generation) is not.
	moved := nhc("pool-a", pool("c"))
	moved.Generation = 2
	informer.OnUpdate(nhc("pool-a", pool("a")), moved)
	expect("a pool-a worker after pool-a moved to pool c", a.ByNode(map[string]string{"pool": "a"}), "everything", "invalid")
	expect("a pool-c worker", a.ByNode(map[string]string{"pool": "c"}), "everything", "invalid", "pool-a")
	sameGeneration := nhc("pool-a", pool("d"))
	sameGeneration.Generation = 2
	informer.OnUpdate(moved, sameGeneration)
	expect("a pool-c worker after a status update", a.ByNode(map[string]string{"pool": "c"}), "everything", "invalid", "pool-a")
	recreated := nhc("pool-a", pool("d"))
	recreated.UID, recreated.Generation = "uid-recreated", 2
	informer.OnUpdate(sameGeneration, recreated)
	expect("a pool-d worker after pool-a was recreated at the same generation", a.ByNode(map[string]string{"pool": "d"}), "everything", "invalid", "pool-a")

	// Deleted NodeHealthChecks are forgotten, also when the informer missed the deletion.
	informer.OnDelete(nhc("pool-b", pool("b")))
	informer.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "invalid", Obj: nhc("invalid", metav1.LabelSelector{})})
	expect("after pool-b and invalid were deleted", a.ByNode(map[string]string{"pool": "b"}), "everything")
	informer.OnAdd(nhc("pool-b", pool("b")), false)

	cr := func(node, owner string, labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("test.medik8s.io/v1alpha1")
		u.SetKind("TestRemediation")
		u.SetName(node)
		u.SetLabels(labels)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: remediationv1alpha1.GroupVersion.String(), Kind: "NodeHealthCheck", Name: owner, UID: types.UID("uid-" + owner)}})
		return u
	}
	all = []string{"everything", "pool-a", "pool-b"}
	expect("a CR of a pool-b worker, owned by pool-a", a.ByCR(ctx, cr("worker-b", "pool-a", nil)), all...)
	expect("a CR of a pool-b worker, owned by everything", a.ByCR(ctx, cr("worker-b", "everything", nil)), "everything", "pool-b")
	expect("a CR of a node that is gone", a.ByCR(ctx, cr("gone", "everything", nil)), all...)
	expect("a control-plane node's CR", a.ByCR(ctx, cr("worker-b", "everything", map[string]string{remediationv1alpha1.ControlPlaneCRLabel: ""})), all...)
}

func TestAffectedSelectsFromTheNodeStore(t *testing.T) {
	ctx := context.Background()
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	node := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
	}
	for _, n := range []*corev1.Node{node("a2", "a"), node("a1", "a"), node("b1", "b")} {
		if err := store.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	a := NewAffected(nil)
	a.nodes = store
	events := a.NodeEvents()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	selA, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}})
	selected := func(generation int64, sel labels.Selector) []string {
		t.Helper()
		nodes, ok := a.Selected(&metav1.ObjectMeta{Name: "pool-a", UID: "uid-pool-a", Generation: generation}, sel)
		if !ok {
			t.Fatal("Selected cannot tell with a node store")
		}
		var out []string
		for _, n := range nodes {
			out = append(out, n.Name)
		}
		return out
	}
	expect := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	expect("built from the store, sorted", selected(1, selA), "a1", "a2")
	if n, _, _ := store.GetByKey("a1"); n.(*corev1.Node) != mustSelected(t, a, selA)[0] {
		t.Error("Selected copies the store's nodes; it should share them")
	}

	// b1 joins pool a: the store changes first, then the event arrives.
	joined := node("b1", "a")
	_ = store.Update(joined)
	expect("before the event", selected(1, selA), "a1", "a2")
	events.Update(ctx, event.UpdateEvent{ObjectOld: node("b1", "b"), ObjectNew: joined}, q)
	expect("after the event", selected(1, selA), "a1", "a2", "b1")

	// a2 leaves: not counted from the moment the store shows it, event or not.
	left := node("a2", "c")
	_ = store.Update(left)
	expect("a node whose labels left the selector in the store", selected(1, selA), "a1", "b1")
	events.Update(ctx, event.UpdateEvent{ObjectOld: node("a2", "a"), ObjectNew: left}, q)
	expect("after its event", selected(1, selA), "a1", "b1")

	// An update that keeps the labels (a condition that turns) moves no node and keeps the label
	// epoch; a relabel changes it.
	epoch := a.LabelEpoch()
	sick := node("b1", "a")
	sick.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	_ = store.Update(sick)
	events.Update(ctx, event.UpdateEvent{ObjectOld: joined, ObjectNew: sick}, q)
	if a.LabelEpoch() != epoch {
		t.Errorf("an update that keeps the labels: epoch %d -> %d; want it kept", epoch, a.LabelEpoch())
	}
	expect("after an update that keeps the labels", selected(1, selA), "a1", "b1")
	events.Update(ctx, event.UpdateEvent{ObjectOld: node("a2", "c"), ObjectNew: node("a2", "d")}, q)
	if a.LabelEpoch() == epoch {
		t.Error("a relabel kept the label epoch")
	}

	// a1 is deleted.
	_ = store.Delete(node("a1", "a"))
	events.Delete(ctx, event.DeleteEvent{Object: node("a1", "a")}, q)
	expect("after a deletion", selected(1, selA), "b1")
	events.Create(ctx, event.CreateEvent{Object: node("a1", "a")}, q)
	expect("a node the store does not hold is not returned", selected(1, selA), "b1")
	_ = store.Add(node("a1", "a"))
	expect("once the store holds it", selected(1, selA), "a1", "b1")

	// A new generation's selector is built again from the store, and so is a new object's.
	selC, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"pool": "c"}})
	expect("a new selector", selected(2, selC), "a2")
	recreated, _ := a.Selected(&metav1.ObjectMeta{Name: "pool-a", UID: "uid-recreated", Generation: 2}, selA)
	if len(recreated) != 2 || recreated[0].Name != "a1" || recreated[1].Name != "b1" {
		t.Errorf("a NodeHealthCheck recreated under the same name at the same generation: %v, want a1 and b1", recreated)
	}

	// A deleted NodeHealthCheck's membership is dropped; without a store Selected cannot tell.
	gone := selecting("pool-a", metav1.LabelSelector{})
	a.handler().OnDelete(&gone)
	if len(a.members) != 0 {
		t.Errorf("memberships left after the NodeHealthCheck was deleted: %v", a.members)
	}
	if n, exists, known := a.Node("b1"); !known || !exists || n.Labels["pool"] != "a" {
		t.Errorf("Node(b1) = %v, %v, %v; want the store's b1", n, exists, known)
	}
	if _, exists, known := a.Node("gone"); !known || exists {
		t.Errorf("Node(gone) exists %v, known %v; want known not to exist", exists, known)
	}
	if _, _, known := NewAffected(nil).Node("b1"); known {
		t.Error("Node without a node store claims to know")
	}
	if _, ok := NewAffected(nil).Selected(&metav1.ObjectMeta{Name: "pool-a", Generation: 1}, selA); ok {
		t.Error("Selected without a node store claims to know")
	}
}

func mustSelected(t *testing.T, a *Affected, sel labels.Selector) []*corev1.Node {
	t.Helper()
	nodes, _ := a.Selected(&metav1.ObjectMeta{Name: "pool-a", UID: "uid-pool-a", Generation: 1}, sel)
	if len(nodes) == 0 {
		t.Fatal("nothing selected")
	}
	return nodes
}

// A reconcile of a NodeHealthCheck deleted a moment before (its delete event, which drops its
// membership, came first) keeps no membership: none outlives its NodeHealthCheck. Nor does one of a
// NodeHealthCheck the informer has not shown yet.
func TestAffectedKeepsNoMembershipOfANodeHealthCheckItDoesNotKnow(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if err := store.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a1", Labels: map[string]string{"pool": "a"}}}); err != nil {
		t.Fatal(err)
	}
	a := NewAffected(nil)
	a.nodes, a.tracking = store, true // as Track sets it
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}
	nhc := selecting("pool-a", sel)
	nhc.UID, nhc.Generation = "uid-pool-a", 1
	selector, _ := metav1.LabelSelectorAsSelector(&sel)
	selected := func() int {
		t.Helper()
		nodes, ok := a.Selected(&nhc, selector)
		if !ok {
			t.Fatal("Selected cannot tell with a node store")
		}
		return len(nodes)
	}

	if n := selected(); n != 1 || len(a.members) != 0 {
		t.Fatalf("not shown by the informer yet: %d selected, %d memberships kept; want 1 and none", n, len(a.members))
	}
	a.handler().OnAdd(&nhc, false)
	if n := selected(); n != 1 || len(a.members) != 1 {
		t.Fatalf("shown: %d selected, %d memberships kept; want 1 and 1", n, len(a.members))
	}
	a.handler().OnDelete(&nhc)
	if n := selected(); n != 1 || len(a.members) != 0 {
		t.Fatalf("a reconcile after the delete event: %d selected, %d memberships kept; want 1 and none", n, len(a.members))
	}
}

package targets

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// Reading a kind's CRs from its indexes (crLookup) decides as reading every CR of it does: for
// random CRs of three NodeHealthChecks (and of none) on random nodes, some of them control-plane
// nodes, some gone, some CRs made before their node was or before it became a control-plane node,
// sortByOwner gives the same CRs of ours by node, the same orphans and earlier nodes' CRs, the same
// control-plane labels, the same "remediated elsewhere" of every selected node, and
// controlPlaneElsewhere the same node.
func TestIndexedCRsDecideAsEveryCR(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(36, 2))
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	nhcs := []*remediationv1alpha1.NodeHealthCheck{
		{ObjectMeta: metav1.ObjectMeta{Name: "ours", UID: "uid-ours"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "uid-b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "uid-c"}},
	}
	var readFull, readIndexed int
	for run := range 400 {
		nodes := make([]*corev1.Node, 2+rng.IntN(30))
		nodeStore := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, NodeIndexers())
		for i := range nodes {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i),
				CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(rng.IntN(3)) * time.Minute))}}
			switch rng.IntN(8) {
			case 0:
				n.Labels = map[string]string{remediationcr.ControlPlaneRoleLabel: ""}
			case 1:
				n.Labels = map[string]string{remediationcr.MasterRoleLabel: ""}
			}
			nodes[i] = n
			if err := nodeStore.Add(n); err != nil {
				t.Fatal(err)
			}
		}
		var selected []*corev1.Node
		for _, n := range nodes {
			if rng.IntN(2) == 0 {
				selected = append(selected, n)
			}
		}
		store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, CRIndexers())
		var all []unstructured.Unstructured
		for i := range rng.IntN(1 + rng.IntN(40)) { // mostly few: a decision then rests on fewer CRs
			target := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gone-%d", rng.IntN(3))}}
			if rng.IntN(6) > 0 {
				target = nodes[rng.IntN(len(nodes))]
			}
			template := indexTestTemplate(fmt.Sprintf("ns-%d", rng.IntN(2)))
			cr, err := remediationcr.Build(template, nhcs[rng.IntN(len(nhcs))], target, remediationcr.Machine{ControlPlane: rng.IntN(10) == 0})
			if err != nil {
				t.Fatal(err)
			}
			cr.SetName(fmt.Sprintf("%s-%d", target.Name, i))
			cr.SetUID(types.UID(fmt.Sprintf("cr-%d", i)))
			cr.SetCreationTimestamp(metav1.NewTime(t0.Add(time.Duration(rng.IntN(3)) * time.Minute)))
			switch rng.IntN(8) {
			case 0: // made before its node became a control-plane node
				labels := cr.GetLabels()
				delete(labels, remediationv1alpha1.ControlPlaneCRLabel)
				cr.SetLabels(labels)
			case 1: // no NodeHealthCheck's
				cr.SetOwnerReferences(nil)
			}
			if err := store.Add(cr); err != nil {
				t.Fatal(err)
			}
			if _, _, owned := remediationcr.ControllerNHC(cr); owned { // what remediationCRs keeps of a list
				all = append(all, *cr)
			}
		}
		cp, err := controlPlaneNodes(nodeStore)
		if err != nil {
			t.Fatal(err)
		}
		indexed, _, err := crLookup{uid: nhcs[0].UID, selected: selected, controlPlane: cp}.read(store)
		if err != nil {
			t.Fatal(err)
		}
		readFull, readIndexed = readFull+len(all), readIndexed+len(indexed)

		want, got := sortByOwner(all, nhcs[0].UID, selected), sortByOwner(indexed, nhcs[0].UID, selected)
		where := fmt.Sprintf("run %d (%d nodes, %d selected, %d CRs, %d read from the indexes)", run, len(nodes), len(selected), len(all), len(indexed))
		if !sameCRsByNode(want.ours, got.ours) || !sameCRsByNode(want.previous, got.previous) {
			t.Fatalf("%s: ours %v, previous %v; every CR gives %v, %v", where, crNames(got.ours), crNames(got.previous), crNames(want.ours), crNames(want.previous))
		}
		if !slices.Equal(want.orphans, got.orphans) || !maps.Equal(want.labelledControlPlane, got.labelledControlPlane) {
			t.Fatalf("%s: orphans %v, labelled %v; every CR gives %v, %v", where, got.orphans, got.labelledControlPlane, want.orphans, want.labelledControlPlane)
		}
		for _, n := range selected {
			if (want.elsewhere[n.Name] == "") != (got.elsewhere[n.Name] == "") {
				t.Fatalf("%s: node %s remediated elsewhere by %q; every CR gives %q", where, n.Name, got.elsewhere[n.Name], want.elsewhere[n.Name])
			}
		}
		g := &Gatherer{Nodes: storeNodes{nodeStore}}
		wantCP, err := g.controlPlaneElsewhere(ctx, want.elsewhere, want.labelledControlPlane, want.orphans)
		if err != nil {
			t.Fatal(err)
		}
		gotCP, err := g.controlPlaneElsewhere(ctx, got.elsewhere, got.labelledControlPlane, got.orphans)
		if err != nil || gotCP != wantCP {
			t.Fatalf("%s: control-plane node elsewhere %q, %v; every CR gives %q", where, gotCP, err, wantCP)
		}
	}
	if readIndexed >= readFull {
		t.Fatalf("the indexes gave %d CRs of %d: every one", readIndexed, readFull)
	}
}

// A decision reads from the indexes its own CRs, other NodeHealthChecks' of its nodes and of
// control-plane nodes (one made before its node was labelled as one), and nothing else: 5 of the 45
// CRs of an incident in another pool.
func TestIndexedCRsReadOnlyWhatADecisionNeeds(t *testing.T) {
	ours := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "ours", UID: "uid-ours"}}
	other := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "uid-other"}}
	nodeStore := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, NodeIndexers())
	node := func(name string, labels map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err := nodeStore.Add(n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	cp := node("cp-0", map[string]string{remediationcr.ControlPlaneRoleLabel: ""})
	labelledLater := node("cp-1", nil)
	var workers, selected []*corev1.Node
	for i := range 100 {
		workers = append(workers, node(fmt.Sprintf("worker-%d", i), nil))
	}
	selected = workers[:10]
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, CRIndexers())
	add := func(owner *remediationv1alpha1.NodeHealthCheck, n *corev1.Node) {
		cr, err := remediationcr.Build(indexTestTemplate("ns"), owner, n, remediationcr.Machine{})
		if err != nil {
			t.Fatal(err)
		}
		if n == labelledLater { // the CR made before its node became a control-plane node
			labelled := labelledLater.DeepCopy() // a new object, as an informer stores it
			labelled.Labels = map[string]string{remediationcr.MasterRoleLabel: ""}
			if err := nodeStore.Update(labelled); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Add(cr); err != nil {
			t.Fatal(err)
		}
	}
	add(ours, workers[0])
	add(ours, workers[1])
	add(other, workers[5])
	add(other, cp)
	add(other, labelledLater)
	for _, n := range workers[50:90] {
		add(other, n)
	}
	names, err := controlPlaneNodes(nodeStore)
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"cp-0", "cp-1"}) {
		t.Fatalf("control-plane nodes %v, %v; want cp-0, cp-1", names, err)
	}
	read, wants, err := crLookup{uid: ours.UID, selected: selected, controlPlane: names}.read(store)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cr := range read {
		got = append(got, cr.GetName())
	}
	slices.Sort(got)
	want := []string{"cp-0", "cp-1", "worker-0", "worker-1", "worker-5"}
	if !slices.Equal(got, want) {
		t.Fatalf("read %v of %d CRs; want %v", got, len(store.List()), want)
	}
	// A CR this process created that the store does not show yet is wanted by the same rule: those
	// the read would include, and no other.
	for _, obj := range store.List() {
		cr := obj.(*unstructured.Unstructured)
		if w := wants(cr); w != slices.Contains(want, cr.GetName()) {
			t.Errorf("wants(%s) = %v; the read includes it: %v", cr.GetName(), w, !w)
		}
	}
}

// indexTestTemplate is a TestRemediationTemplate in the namespace.
func indexTestTemplate(namespace string) *unstructured.Unstructured {
	t := &unstructured.Unstructured{}
	t.SetAPIVersion("test.medik8s.io/v1alpha1")
	t.SetKind("TestRemediationTemplate")
	t.SetNamespace(namespace)
	t.SetName("template")
	_ = unstructured.SetNestedMap(t.Object, map[string]any{"spec": map[string]any{"strategy": "reboot"}}, "spec", "template")
	return t
}

// sameCRsByNode reports whether two maps of CRs by node hold the same CRs (by namespace and name).
func sameCRsByNode(a, b map[string][]unstructured.Unstructured) bool {
	return maps.EqualFunc(crNames(a), crNames(b), slices.Equal[[]string])
}

// crNames returns the sorted namespace/name of the CRs, by node.
func crNames(crs map[string][]unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	for node, list := range crs {
		for _, cr := range list {
			out[node] = append(out[node], cr.GetNamespace()+"/"+cr.GetName())
		}
		slices.Sort(out[node])
	}
	return out
}

// storeIndexes serves one kind's store as the cache's indexes.
type storeIndexes struct{ store toolscache.Indexer }

func (s storeIndexes) CRs(context.Context, schema.GroupVersionKind) (toolscache.Indexer, bool, error) {
	return s.store, true, nil
}

func (s storeIndexes) Nodes() (toolscache.Indexer, bool) { return nil, false }

// A CR this process created counts from its record until a read shows it: when the cache shows it
// a moment after the read of the indexes, before the records are merged, that read still counts
// it once (from the record), never zero times.
func TestARecordedCRCountsInTheReadThatMissedIt(t *testing.T) {
	ours := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "ours", UID: "uid-ours"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}
	created, err := remediationcr.Build(indexTestTemplate("ns"), ours, node, remediationcr.Machine{})
	if err != nil {
		t.Fatal(err)
	}
	created.SetUID("uid-cr")
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, CRIndexers())
	g := &Gatherer{Indexes: storeIndexes{store}}
	g.Created(created)

	crs, shown, wants, served, err := g.readKind(context.Background(), created.GroupVersionKind(), &crLookup{uid: ours.UID, selected: []*corev1.Node{node}})
	if err != nil || !served || len(crs) != 0 {
		t.Fatalf("read %d CRs, served %v, %v; want none yet", len(crs), served, err)
	}
	if err := store.Add(created.DeepCopy()); err != nil { // the cache catches up
		t.Fatal(err)
	}
	if got := g.withCreated(created.GroupVersionKind(), crs, shown, wants); len(got) != 1 || got[0].GetUID() != "uid-cr" {
		t.Fatalf("the read that missed the CR counts %d CRs; want it once, from its record", len(got))
	}
	crs, shown, wants, _, _ = g.readKind(context.Background(), created.GroupVersionKind(), &crLookup{uid: ours.UID, selected: []*corev1.Node{node}})
	if got := g.withCreated(created.GroupVersionKind(), crs, shown, wants); len(got) != 1 || g.Recorded() != 0 {
		t.Fatalf("the next read: %d CRs, %d records; want the CR once, from the cache, and the record dropped", len(got), g.Recorded())
	}
}

package health

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

func selecting(name string, sel metav1.LabelSelector) *remediationv1alpha1.NodeHealthCheck {
	return &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: remediationv1alpha1.NodeHealthCheckSpec{Selector: sel}}
}

func TestOverlaps(t *testing.T) {
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"pool": "a", "zone": "1"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w2", Labels: map[string]string{"pool": "a", "zone": "2"}}},
	}
	deleted := selecting("deleted", metav1.LabelSelector{})
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	got := Overlaps("self", nodes, []*remediationv1alpha1.NodeHealthCheck{
		selecting("self", metav1.LabelSelector{}),
		selecting("zone-2", metav1.LabelSelector{MatchLabels: map[string]string{"zone": "2"}}),
		selecting("everything", metav1.LabelSelector{}),
		selecting("pool-b", metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}),
		selecting("invalid", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}),
		deleted,
	})
	want := []Overlap{{NHC: "everything", Nodes: 2}, {NHC: "zone-2", Nodes: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Overlaps = %v, want %v (sorted; not itself, a disjoint, an invalid or a deleted one)", got, want)
	}
}

// TestSelectorsOverlapsAsEverySelectorMatched: the index finds exactly what matching every selector
// against every node finds, for selectors of every operator (values listed twice among them), and
// for nodes with and without the labels they require.
func TestSelectorsOverlapsAsEverySelectorMatched(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	keys, values := []string{"pool", "zone"}, []string{"a", "b", "c"}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	for iteration := range 2000 {
		var nhcs []*remediationv1alpha1.NodeHealthCheck
		for i := range 1 + rng.IntN(6) {
			sel := metav1.LabelSelector{}
			if rng.IntN(3) == 0 {
				sel.MatchLabels = map[string]string{pick(keys): pick(values)}
			}
			for range rng.IntN(3) {
				r := metav1.LabelSelectorRequirement{Key: pick(keys), Operator: ops[rng.IntN(len(ops))]}
				if r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpNotIn {
					for range 1 + rng.IntN(3) {
						r.Values = append(r.Values, pick(values))
					}
				}
				sel.MatchExpressions = append(sel.MatchExpressions, r)
			}
			nhcs = append(nhcs, selecting(fmt.Sprintf("nhc-%d", i), sel))
		}
		var nodes []*corev1.Node
		for i := range rng.IntN(8) {
			l := map[string]string{}
			for _, k := range keys {
				if rng.IntN(4) > 0 {
					l[k] = pick(values)
				}
			}
			nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: l}})
		}
		var want []Overlap
		for i := range nhcs {
			sel, err := metav1.LabelSelectorAsSelector(&nhcs[i].Spec.Selector)
			if err != nil || nhcs[i].Name == "nhc-0" {
				continue
			}
			n := 0
			for _, node := range nodes {
				if sel.Matches(labels.Set(node.Labels)) {
					n++
				}
			}
			if n > 0 {
				want = append(want, Overlap{NHC: nhcs[i].Name, Nodes: n})
			}
		}
		if got := NewSelectors(nhcs).Overlaps("nhc-0", nodes); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("iteration %d: Overlaps = %v, want %v\nselectors %+v\nnodes %v", iteration, got, want, nhcs, nodes)
		}
	}
}

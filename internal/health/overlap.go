package health

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Overlap is another NodeHealthCheck whose selector selects some of the same nodes.
type Overlap struct {
	// NHC is the other NodeHealthCheck's name.
	NHC string
	// Nodes is how many of the nodes both select.
	Nodes int
}

// Overlaps returns the NodeHealthChecks among others (but self and those being deleted) whose
// selectors select some of nodes, sorted by name, with how many. Which NodeHealthCheck remediates a
// node both select stays "first wins": the one that takes the node's lease first; the other holds
// back while the lease is held. An invalid selector selects nothing here (the webhook refuses it, the
// controller reports it).
func Overlaps(self string, nodes []*corev1.Node, others []remediationv1alpha1.NodeHealthCheck) []Overlap {
	var out []Overlap
	for i := range others {
		o := &others[i]
		if o.Name == self || !o.DeletionTimestamp.IsZero() {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&o.Spec.Selector)
		if err != nil {
			continue
		}
		n := 0
		for j := range nodes {
			if sel.Matches(labels.Set(nodes[j].Labels)) {
				n++
			}
		}
		if n > 0 {
			out = append(out, Overlap{NHC: o.Name, Nodes: n})
		}
	}
	slices.SortFunc(out, func(a, b Overlap) int { return cmp.Compare(a.NHC, b.NHC) })
	return out
}

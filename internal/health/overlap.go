package health

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

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
func Overlaps(self string, nodes []*corev1.Node, others []*remediationv1alpha1.NodeHealthCheck) []Overlap {
	return NewSelectors(others).Overlaps(self, nodes)
}

// Selectors are NodeHealthChecks' parsed selectors, indexed so that the ones that may select a node
// are found from its labels: Overlaps costs O(nodes), not O(nodes × NodeHealthChecks), for selectors
// that require a label value (matchLabels, or an In expression), as pools' selectors do. At 25,000
// nodes in 250 pools, matching every selector against every selected node was a sixth of the
// manager's CPU after a NodeHealthCheck was created. Read only once built: share it.
type Selectors struct {
	// names are the NodeHealthChecks' names, by index.
	names []string
	// selectors are their parsed selectors, by index.
	selectors []labels.Selector
	// byValue holds, by label key and value, the NodeHealthChecks whose selector requires the key
	// to have that value (its first such requirement): only they can select a node with that label.
	byValue map[string]map[string][]int
	// rest are the NodeHealthChecks whose selector requires no label value (empty, Exists, NotIn,
	// DoesNotExist alone): any node may match.
	rest []int
}

// NewSelectors parses and indexes the selectors of nhcs, but those being deleted and those that do
// not parse (they select nothing).
func NewSelectors(nhcs []*remediationv1alpha1.NodeHealthCheck) *Selectors {
	x := &Selectors{byValue: map[string]map[string][]int{}}
	for _, o := range nhcs {
		if !o.DeletionTimestamp.IsZero() {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&o.Spec.Selector)
		if err != nil {
			continue
		}
		j := len(x.names)
		x.names, x.selectors = append(x.names, o.Name), append(x.selectors, sel)
		if key, values, ok := requiredValues(sel); ok {
			if x.byValue[key] == nil {
				x.byValue[key] = map[string][]int{}
			}
			slices.Sort(values)
			for _, v := range slices.Compact(values) { // a value listed twice counts a node once
				x.byValue[key][v] = append(x.byValue[key][v], j)
			}
			continue
		}
		x.rest = append(x.rest, j)
	}
	return x
}

// requiredValues returns a label key the selector requires and the values it allows (its first
// requirement with the operator =, == or In); ok is false when it has none.
func requiredValues(sel labels.Selector) (key string, values []string, ok bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return "", nil, false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			return r.Key(), slices.Clone(r.ValuesUnsorted()), true
		}
	}
	return "", nil, false
}

// Overlaps returns the NodeHealthChecks (but self) whose selectors select some of nodes, sorted by
// name, with how many.
func (x *Selectors) Overlaps(self string, nodes []*corev1.Node) []Overlap {
	counts := map[int]int{}
	for _, n := range nodes {
		set := labels.Set(n.Labels)
		for key, byValue := range x.byValue {
			v, has := n.Labels[key]
			if !has {
				continue
			}
			for _, j := range byValue[v] {
				if x.selectors[j].Matches(set) {
					counts[j]++
				}
			}
		}
		for _, j := range x.rest {
			if x.selectors[j].Matches(set) {
				counts[j]++
			}
		}
	}
	var out []Overlap
	for j, n := range counts {
		if x.names[j] != self {
			out = append(out, Overlap{NHC: x.names[j], Nodes: n})
		}
	}
	slices.SortFunc(out, func(a, b Overlap) int { return cmp.Compare(a.NHC, b.NHC) })
	return out
}

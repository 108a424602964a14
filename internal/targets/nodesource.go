package targets

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// NodeSource finds the nodes a NodeHealthCheck selects, and nodes by name, without listing every
// node (Gatherer.Nodes). The controllers' is watch.Affected (internal/controller/watch), which keeps
// each selector's nodes up to date from the node events it routes.
type NodeSource interface {
	// Node returns the named node as the cache holds it (read only), whether it exists, and false
	// when it cannot tell.
	Node(name string) (node *corev1.Node, exists, known bool)
	// Selected returns the nodes that sel, the selector of the NodeHealthCheck as read, selects,
	// sorted by name and shared with the cache (read only); false when it cannot tell (the caller
	// lists them).
	Selected(nhc metav1.Object, sel labels.Selector) ([]*corev1.Node, bool)
}

// ConditionChangeSource tells what this process's node watch showed of a node's conditions
// (watch.ConditionChanges), brought up to the node object the decision reads first: when the status
// of each of its conditions was seen changing (seen), and, for each condition whose
// lastTransitionTime is not to be trusted, when it counts from instead (untrusted,
// health.Node.CountFrom). Nil maps: none. The maps are read only.
type ConditionChangeSource interface {
	For(n *corev1.Node) (seen, untrusted map[corev1.NodeConditionType]time.Time)
}

// selectedNodes returns the nodes the NodeHealthCheck's selector selects, sorted by name: from
// the NodeSource when there is one (the cache's own objects), else listed from c. Read only.
func (g *Gatherer) selectedNodes(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck) ([]*corev1.Node, error) {
	sel, err := metav1.LabelSelectorAsSelector(&nhc.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("parsing selector: %w", err)
	}
	if g.Nodes != nil {
		if nodes, ok := g.Nodes.Selected(nhc, sel); ok {
			return nodes, nil
		}
	}
	list := &corev1.NodeList{}
	if err := g.Reader.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes, nil
}

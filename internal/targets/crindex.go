package targets

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// The indexes a remediation kind's informer keeps (CRIndexers), so that a decision looks up the CRs
// it depends on instead of listing and sorting every CR of the cluster: in a 30% failure of 25,000
// nodes that was 4,500 CRs on each of thousands of decisions, a fifth of the manager's CPU.
const (
	// CROwnerIndex is the UID of the NodeHealthCheck that owns the CR (remediationcr.ControllerNHC).
	CROwnerIndex = "remediation.medik8s.io/owner-uid"
	// CRNodeIndex is the CR's node (remediationcr.NodeName).
	CRNodeIndex = "remediation.medik8s.io/node"
	// CRControlPlaneIndex is "true" for a CR labelled as a control-plane node's.
	CRControlPlaneIndex = "remediation.medik8s.io/control-plane"
	// NodeControlPlaneIndex, a Node informer's, is "true" for a node with a control-plane role label.
	NodeControlPlaneIndex = "remediation.medik8s.io/control-plane-node"
)

// CRIndexers are the indexes a remediation kind's informer keeps for Gatherer.Indexes. Only CRs a
// NodeHealthCheck owns are indexed by node and label: nothing else is read.
func CRIndexers() toolscache.Indexers {
	owned := func(obj any) (*unstructured.Unstructured, types.UID, bool) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, "", false
		}
		_, uid, ok := remediationcr.ControllerNHC(u)
		return u, uid, ok
	}
	return toolscache.Indexers{
		CROwnerIndex: func(obj any) ([]string, error) {
			if _, uid, ok := owned(obj); ok {
				return []string{string(uid)}, nil
			}
			return nil, nil
		},
		CRNodeIndex: func(obj any) ([]string, error) {
			if u, _, ok := owned(obj); ok {
				return []string{remediationcr.NodeName(u)}, nil
			}
			return nil, nil
		},
		CRControlPlaneIndex: func(obj any) ([]string, error) {
			if u, _, ok := owned(obj); ok {
				if _, cp := remediationcr.Label(u, remediationv1alpha1.ControlPlaneCRLabel); cp {
					return []string{"true"}, nil
				}
			}
			return nil, nil
		},
	}
}

// NodeIndexers are the indexes the Node informer keeps for Gatherer.Indexes.
func NodeIndexers() toolscache.Indexers {
	return toolscache.Indexers{
		NodeControlPlaneIndex: func(obj any) ([]string, error) {
			if n, ok := obj.(*corev1.Node); ok && remediationcr.IsControlPlane(n.Labels) {
				return []string{"true"}, nil
			}
			return nil, nil
		},
	}
}

// Indexes are the cache's indexed stores (watch.Indexes): their objects are the cache's, read only.
type Indexes interface {
	// CRs returns the store of a remediation kind's informer, with CRIndexers' indexes; false when
	// it has none (the kind's CRs are then listed whole).
	CRs(ctx context.Context, gvk schema.GroupVersionKind) (toolscache.Indexer, bool, error)
	// Nodes returns the Node informer's store, with NodeIndexers' indexes; false when it has none.
	Nodes() (toolscache.Indexer, bool)
}

// crLookup is what a decision needs of the CRs of other NodeHealthChecks, besides its own: those of
// its selected nodes (another NodeHealthCheck remediates the node), and those of control-plane nodes
// (one control-plane node at a time, cluster-wide): nodes labelled as one, and the nodes of CRs
// labelled as one's. sortByOwner sorts them as it sorts every CR of the cluster, with the same
// result but for elsewhere, which names only those nodes: the only ones a decision reads it for
// (TestIndexedCRsDecideAsEveryCR).
type crLookup struct {
	uid          types.UID
	selected     []*corev1.Node
	controlPlane []string
}

// read returns the CRs of one kind's store the decision depends on (the store's objects, read only),
// each once, and wants, which tells those CRs by the same rule (for the CRs this process created that
// the store does not show yet: Gatherer.withCreated).
func (l crLookup) read(store toolscache.Indexer) ([]unstructured.Unstructured, func(*unstructured.Unstructured) bool, error) {
	var out []unstructured.Unstructured
	keys := map[string]bool{} // a few CRs are found twice (ours on a control-plane node, say)
	add := func(objs []any, err error) error {
		if err != nil {
			return err
		}
		for _, obj := range objs {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			key := u.GetNamespace() + "/" + u.GetName()
			if keys[key] {
				continue
			}
			keys[key] = true
			out = append(out, *u)
		}
		return nil
	}
	if err := add(store.ByIndex(CROwnerIndex, string(l.uid))); err != nil {
		return nil, nil, err
	}
	labelled, err := store.ByIndex(CRControlPlaneIndex, "true")
	if err != nil {
		return nil, nil, err
	}
	// Every CR of a control-plane node: of the nodes of CRs labelled as one's (whoever they are now),
	// and of the nodes labelled as one now (a CR made before the label was is not labelled).
	nodes := slices.Clone(l.controlPlane)
	for _, obj := range labelled {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			nodes = append(nodes, remediationcr.NodeName(u))
		}
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	for _, name := range nodes {
		if err := add(store.ByIndex(CRNodeIndex, name)); err != nil {
			return nil, nil, err
		}
	}
	for _, n := range l.selected {
		// Mostly nothing: a map lookup per selected node, no allocation.
		objs, err := store.ByIndex(CRNodeIndex, n.Name)
		if err != nil {
			return nil, nil, err
		}
		for _, obj := range objs {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				if _, uid, _ := remediationcr.ControllerNHC(u); uid != l.uid {
					if err := add([]any{u}, nil); err != nil {
						return nil, nil, err
					}
				}
			}
		}
	}
	var selected map[string]bool // made when a CR in flight needs it
	wants := func(cr *unstructured.Unstructured) bool {
		_, uid, owned := remediationcr.ControllerNHC(cr)
		if !owned {
			return false // not indexed: never read
		}
		if _, cp := remediationcr.Label(cr, remediationv1alpha1.ControlPlaneCRLabel); cp || uid == l.uid {
			return true
		}
		node := remediationcr.NodeName(cr)
		if _, found := slices.BinarySearch(nodes, node); found {
			return true
		}
		if selected == nil {
			selected = make(map[string]bool, len(l.selected))
			for _, n := range l.selected {
				selected[n.Name] = true
			}
		}
		return selected[node]
	}
	return out, wants, nil
}

// controlPlaneNodes returns the names of the nodes labelled as control-plane nodes in the store.
func controlPlaneNodes(store toolscache.Indexer) ([]string, error) {
	objs, err := store.ByIndex(NodeControlPlaneIndex, "true")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, obj := range objs {
		if n, ok := obj.(*corev1.Node); ok {
			names = append(names, n.Name)
		}
	}
	return names, nil
}

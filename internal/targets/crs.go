package targets

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// RemediationKinds returns the remediation CR kinds a NodeHealthCheck uses: those of the templates
// it references now, then those of the CRs its status lists (the templates may have changed since).
// Remediation kinds are custom resources: kinds of the core group are left out, so that a status
// entry cannot make the operator watch Pods or Secrets.
func RemediationKinds(nhc *remediationv1alpha1.NodeHealthCheck) []schema.GroupVersionKind {
	kinds := templateKinds(nhc)
	add := func(gvk schema.GroupVersionKind) {
		if gvk.Kind != "" && gvk.Group != "" && !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	for _, e := range nhc.Status.UnhealthyNodes {
		for _, r := range e.Remediations {
			add(r.Resource.GroupVersionKind())
		}
	}
	return kinds
}

// kindsOf is RemediationKinds of a NodeHealthCheck the cache holds (read only), computed once per
// resourceVersion: every decision reads the kinds of every NodeHealthCheck, and parsing each CR
// reference their statuses list was a tenth of the manager's CPU in a 25,000-node 1% failure (250
// NodeHealthChecks, hundreds of listed CRs). nhcs are every NodeHealthCheck, to forget those gone.
func (g *Gatherer) kindsOf(nhc *remediationv1alpha1.NodeHealthCheck, nhcs []*remediationv1alpha1.NodeHealthCheck) []schema.GroupVersionKind {
	if nhc.ResourceVersion == "" { // not the cache's
		return RemediationKinds(nhc)
	}
	if v, ok := g.kindMemo.byNHC.Load(nhc.UID); ok {
		if k := v.(nhcKinds); k.resourceVersion == nhc.ResourceVersion {
			return k.kinds
		}
	}
	kinds := RemediationKinds(nhc)
	if _, known := g.kindMemo.byNHC.Swap(nhc.UID, nhcKinds{resourceVersion: nhc.ResourceVersion, kinds: kinds}); !known &&
		g.kindMemo.n.Add(1) > int64(2*len(nhcs)+16) {
		current := make(map[types.UID]bool, len(nhcs))
		for _, o := range nhcs {
			current[o.UID] = true
		}
		g.kindMemo.byNHC.Range(func(uid, _ any) bool {
			if !current[uid.(types.UID)] {
				g.kindMemo.byNHC.Delete(uid)
				g.kindMemo.n.Add(-1)
			}
			return true
		})
	}
	return kinds
}

// kindsMemo is kindsOf's memory: by NodeHealthCheck UID, its kinds at a resourceVersion (nhcKinds),
// and about how many it holds.
type kindsMemo struct {
	byNHC sync.Map
	n     atomic.Int64
}

// nhcKinds are a NodeHealthCheck's remediation kinds at a resourceVersion (shared: read only).
type nhcKinds struct {
	resourceVersion string
	kinds           []schema.GroupVersionKind
}

// kindsRead says what remediationCRs could not read: the problem of a kind the NodeHealthCheck uses
// (not watchable, or unavailable), a kind whose CRs were never listed, and every kind in use whose
// CRs cannot be read now (unknown: whatever runs of it is unseen).
type kindsRead struct {
	problem  *Problem
	unlisted string
	unknown  []schema.GroupVersionKind
}

// remediationCRs reads, from the cache, the remediation CRs that NodeHealthChecks control, in every
// kind any NodeHealthCheck uses or used since the process started, across namespaces: every one, or,
// from a kind's indexes (Indexes), those a decision of nhc, which selects the nodes, depends on
// (crLookup). A kind the operator may not list and watch is not read (its informer would never
// sync), nor is one whose CRs cannot be listed now (kindReadable); when nhc uses it (its templates,
// or the CRs its status lists), the returned problem says so. nhcs are every NodeHealthCheck, as the
// cache holds them (read only).
func (g *Gatherer) remediationCRs(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, nhcs []*remediationv1alpha1.NodeHealthCheck, selected []*corev1.Node) ([]unstructured.Unstructured, kindsRead, error) {
	kinds := RemediationKinds(nhc)
	// Its status's kinds too: a NodeHealthCheck that cannot read the CRs it lists cannot tell
	// whether they still run (Unknown is not free), and starts nothing meanwhile.
	own := slices.Clone(kinds)
	for _, o := range nhcs {
		for _, gvk := range g.kindsOf(o, nhcs) {
			if !slices.Contains(kinds, gvk) {
				kinds = append(kinds, gvk)
			}
		}
	}
	inUse := slices.Clone(kinds) // by a NodeHealthCheck now, not only read since the process started
	g.mu.Lock()
	for _, gvk := range kinds {
		if !slices.Contains(g.seen, gvk) {
			g.seen = append(g.seen, gvk)
		}
	}
	for _, gvk := range g.seen {
		if !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	g.mu.Unlock()
	var read kindsRead
	var out []unstructured.Unstructured
	lookup, err := g.crLookup(nhc.UID, selected)
	if err != nil {
		return nil, read, err
	}
	for _, gvk := range kinds {
		if g.Access != nil {
			served, watchable, err := g.Access.Check(ctx, gvk)
			if err != nil {
				return nil, read, err
			}
			if !served {
				continue // no CR of a kind that is not served exists
			}
			if !watchable {
				if slices.Contains(inUse, gvk) {
					read.unknown = append(read.unknown, gvk)
				}
				if read.problem == nil && slices.Contains(own, gvk) {
					read.problem = &Problem{remediationv1alpha1.ConditionReasonDisabledRemediationNotWatchable,
						fmt.Sprintf("The operator may not list and watch %s.%s, so it cannot tell which nodes are remediated; the remediator's ClusterRole labelled %s=true must grant get, list, watch, create, update, patch and delete on them",
							gvk.Kind, gvk.Group, remediationv1alpha1.AggregateToExtRemediationLabel)}
				}
				continue
			}
		}
		if g.Watch != nil {
			served, err := g.Watch(gvk)
			if err != nil {
				return nil, read, err
			}
			if !served {
				continue
			}
		}
		if nr := g.kindReadable(ctx, gvk, slices.Contains(inUse, gvk)); nr != nil {
			if read.problem == nil && slices.Contains(own, gvk) {
				read.problem = &Problem{remediationv1alpha1.ConditionReasonDisabledRemediationUnavailable,
					fmt.Sprintf("The remediation CRs of kind %s.%s cannot be read, so the operator cannot tell which nodes are remediated: %s", gvk.Kind, gvk.Group, nr.Why)}
			}
			// A kind no NodeHealthCheck uses any more (its CRD deleted, say) holds nothing back.
			if slices.Contains(inUse, gvk) {
				if read.unlisted == "" {
					read.unlisted = gvk.Kind + "." + gvk.Group
				}
				read.unknown = append(read.unknown, gvk)
			}
			continue
		}
		// The cache's own objects, not copies: only this NodeHealthCheck's are copied below, the
		// others are only read.
		crs, shown, wants, served, err := g.readKind(ctx, gvk, lookup)
		if err != nil {
			return nil, read, err
		}
		if !served {
			continue // not served (any more): no CR of it exists
		}
		for _, cr := range g.withCreated(gvk, crs, shown, wants) {
			if _, uid, ok := remediationcr.ControllerNHC(&cr); ok {
				if uid == nhc.UID {
					cr = *cr.DeepCopy() // acted on: patched, deleted
				}
				out = append(out, cr)
			}
		}
	}
	return out, read, nil
}

// templateKinds returns the remediation CR kinds of the templates the NodeHealthCheck references;
// like RemediationKinds, never kinds of the core group (CheckTemplates disables such a spec).
func templateKinds(nhc *remediationv1alpha1.NodeHealthCheck) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	for _, ref := range nhc.Spec.TemplateRefs() {
		if gvk := remediationcr.GVK(ref); gvk.Kind != "" && gvk.Group != "" && !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	return kinds
}

// unknownState is what a snapshot cannot tell because some remediation kinds in use cannot be read
// now (Unknown is not free: state the operator cannot read is "unknown, maybe busy", never
// "nothing there").
type unknownState struct {
	// kinds are the kinds in use whose CRs cannot be read now.
	kinds []schema.GroupVersionKind
	// own names one of them that the NodeHealthCheck uses itself (its templates, or CRs its status
	// lists), "" when none: a CR of it may run on any of its nodes unseen.
	own string
	// nodes are, per node, the NodeHealthChecks whose stored status lists it with CRs of such a
	// kind, and the kind (the first in the cache's order).
	nodes map[string]unknownNode
}

// unknownNode is a NodeHealthCheck whose stored status lists a node with CRs of a kind that cannot
// be read now.
type unknownNode struct {
	nhc  string
	ours bool
	kind string
}

// unknownOf finds, in every NodeHealthCheck's stored status (ours as read, the others as the cache
// holds them), the nodes listed with CRs of a kind that cannot be read now.
func unknownOf(r *reading) unknownState {
	u := unknownState{kinds: r.kinds.unknown}
	if len(u.kinds) == 0 {
		return u
	}
	for _, gvk := range RemediationKinds(r.stored) {
		if slices.Contains(u.kinds, gvk) {
			u.own = gvk.Kind + "." + gvk.Group
			break
		}
	}
	list := func(nhc *remediationv1alpha1.NodeHealthCheck, ours bool) {
		for _, e := range nhc.Status.UnhealthyNodes {
			if _, seen := u.nodes[e.Name]; seen {
				continue
			}
			for _, rem := range e.Remediations {
				if gvk := rem.Resource.GroupVersionKind(); slices.Contains(u.kinds, gvk) {
					if u.nodes == nil {
						u.nodes = map[string]unknownNode{}
					}
					u.nodes[e.Name] = unknownNode{nhc: nhc.Name, ours: ours, kind: gvk.Kind + "." + gvk.Group}
					break
				}
			}
		}
	}
	list(r.stored, true)
	for _, o := range r.nhcs {
		if o.UID != r.stored.UID {
			list(o, false)
		}
	}
	return u
}

// elsewhere says why another NodeHealthCheck may remediate the node unseen: its stored status lists
// the node with CRs of a kind that cannot be read now; "" when none does (health.Node.ElsewhereUnknown).
func (u unknownState) elsewhere(node string) string {
	n, ok := u.nodes[node]
	if !ok || n.ours {
		return ""
	}
	return fmt.Sprintf("node %s may be remediated by NodeHealthCheck %s: its status lists CRs of kind %s for the node, which cannot be read now, so whether they still run is unknown",
		node, n.nhc, n.kind)
}

// Unreadable reports whether the CRs of the kind are in use and cannot be read now: the status
// writer keeps the entries it listed of them as they were.
func (s *Snapshot) Unreadable(gvk schema.GroupVersionKind) bool {
	return slices.Contains(s.unknown.kinds, gvk)
}

// LeaseUnknown says why whether a remediation runs on the node, and so whether the
// NodeHealthCheck's lease of it is in use, cannot be told now; "" when it can. Unknown is not free:
// such a lease is neither released nor swept. It cannot be told when a kind the NodeHealthCheck uses
// cannot be read (a CR of it may run on any of its nodes, one the status does not list yet too), or
// when some NodeHealthCheck's stored status lists the node with CRs of a kind that cannot be read.
func (s *Snapshot) LeaseUnknown(node string) string {
	if s.unknown.own != "" {
		return fmt.Sprintf("the remediation CRs of kind %s, which NodeHealthCheck %s uses, cannot be read now", s.unknown.own, s.Stored.Name)
	}
	if n, ok := s.unknown.nodes[node]; ok {
		return fmt.Sprintf("NodeHealthCheck %s lists node %s with CRs of kind %s, which cannot be read now", n.nhc, node, n.kind)
	}
	return ""
}

// crLookup returns what a decision of the NodeHealthCheck with uid, which selects the nodes, reads
// from the kinds' indexes; nil when the Gatherer has no indexes (every CR is listed).
func (g *Gatherer) crLookup(uid types.UID, selected []*corev1.Node) (*crLookup, error) {
	if g.Indexes == nil {
		return nil, nil
	}
	nodes, indexed := g.Indexes.Nodes()
	if !indexed {
		return nil, nil
	}
	cp, err := controlPlaneNodes(nodes)
	if err != nil {
		return nil, fmt.Errorf("reading the control-plane nodes' index: %w", err)
	}
	return &crLookup{uid: uid, selected: selected, controlPlane: cp}, nil
}

// readKind reads the CRs of one kind from the cache (its own objects, read only): those lookup
// names from the kind's indexes when there is a lookup and the kind has them, else every one.
// shown tells whether the cache shows a CR, and wants whether the read would include it (both for
// withCreated; wants nil: every CR); served is false when the kind is not served (any more), so no
// CR of it exists.
func (g *Gatherer) readKind(ctx context.Context, gvk schema.GroupVersionKind, lookup *crLookup) (crs []unstructured.Unstructured, shown, wants func(*unstructured.Unstructured) bool, served bool, err error) {
	if lookup != nil {
		store, ok, err := g.Indexes.CRs(ctx, gvk)
		if meta.IsNoMatchError(err) {
			return nil, nil, nil, false, nil
		}
		if err != nil {
			return nil, nil, nil, false, fmt.Errorf("reading the index of %s: %w", gvk.Kind, err)
		}
		if ok {
			crs, wants, err := lookup.read(store)
			if err != nil {
				return nil, nil, nil, false, fmt.Errorf("reading the index of %s: %w", gvk.Kind, err)
			}
			// Shown means shown in what was read, not in the store now: a record dropped because the
			// cache showed its CR a moment after the read would leave the CR counted nowhere (a
			// second start, or one more in flight than maxInFlight allows).
			return crs, shownIn(crs), wants, true, nil
		}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := g.Reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil, nil, false, nil
		}
		return nil, nil, nil, false, fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	return list.Items, shownIn(list.Items), nil, true, nil
}

// shownIn tells whether a CR is among those listed. A few CRs in flight against every CR of the
// kind: each is looked up rather than the list indexed.
func shownIn(listed []unstructured.Unstructured) func(*unstructured.Unstructured) bool {
	return func(cr *unstructured.Unstructured) bool {
		return slices.ContainsFunc(listed, func(u unstructured.Unstructured) bool { return u.GetUID() == cr.GetUID() })
	}
}

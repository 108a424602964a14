package watch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// What a NodeHealthCheck's decision reads of nodes and CRs it does not select (targets.Gather): the
// remediation CRs of other NodeHealthChecks for the nodes it selects (first wins), and control-plane
// nodes remediated anywhere (one at a time). So an event about a node or a CR reconciles the
// NodeHealthChecks that select the node, and every NodeHealthCheck when the node is, or was, a
// control-plane node, or is not known. At 50 NodeHealthChecks that is one reconcile per event where
// every event reconciled all 50 before.

// Affected maps node and CR events to the NodeHealthChecks whose decisions they enter, and knows
// which nodes each NodeHealthCheck selects (a targets.NodeSource, the gatherers' Nodes). It keeps
// each NodeHealthCheck's parsed selector, updated by the NodeHealthCheck informer (Track), so that
// mapping an event lists and copies nothing: at 5,000 nodes, listing the 50 NodeHealthChecks for
// each node event was a sixth of the heap during a mass failure. And it keeps, per NodeHealthCheck,
// the names of the nodes its selector selects, updated by the node events it maps (NodeEvents)
// before it enqueues anything, so that a decision reads its pool's nodes from the cache by name
// instead of matching every node (a third of the manager's CPU at 5,000 nodes). Create it with
// NewAffected or AffectedFor.
type Affected struct {
	reader client.Reader
	// nodes is the node informer's store; nil: no membership, Selected says it cannot tell.
	nodes toolscache.Indexer

	mu sync.RWMutex
	// nhcs holds, by name, each NodeHealthCheck's selector and the generation it was parsed from;
	// a nil selector does not parse.
	nhcs map[string]parsedSelector
	// members holds, by NodeHealthCheck name, the nodes its selector selects (built on first use).
	members map[string]*membership
	// tracking is set once Track feeds nhcs: a membership is kept then only for a NodeHealthCheck
	// it knows (Selected).
	tracking bool
	// labelEpoch counts the node events that may have changed which nodes a selector selects (a
	// node created, deleted or relabelled; LabelEpoch).
	labelEpoch uint64
	// Changes, when set, records the node condition changes of each update before the update is
	// routed, so the decision it triggers sees them (the record's own informer handler runs
	// concurrently and may come later).
	Changes interface {
		Update(old, updated *corev1.Node)
	}
}

// membership is the names of the nodes a selector selects, kept up to date by node events.
type membership struct {
	uid        types.UID
	generation int64
	selector   labels.Selector
	nodes      map[string]struct{}
}

type parsedSelector struct {
	uid        types.UID
	generation int64
	selector   labels.Selector
}

// Affected is the NodeSource both controllers' gatherers read their nodes through.
var _ targets.NodeSource = (*Affected)(nil)

// NewAffected returns an Affected that reads nodes from c (the cache). It knows no NodeHealthCheck
// until Track feeds it.
func NewAffected(c client.Reader) *Affected {
	return &Affected{reader: c, nhcs: map[string]parsedSelector{}, members: map[string]*membership{}}
}

// AffectedFor returns an Affected that reads nodes from the manager's client and tracks the
// NodeHealthChecks of its cache.
func AffectedFor(mgr manager.Manager) (*Affected, error) {
	a := NewAffected(mgr.GetClient())
	nodes, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("getting the node informer: %w", err)
	}
	if indexed, ok := nodes.(interface{ GetIndexer() toolscache.Indexer }); ok {
		a.nodes = indexed.GetIndexer()
	}
	informer, err := mgr.GetCache().GetInformer(context.Background(), &remediationv1alpha1.NodeHealthCheck{})
	if err != nil {
		return nil, fmt.Errorf("getting the NodeHealthCheck informer: %w", err)
	}
	return a, a.Track(informer)
}

// Track keeps the NodeHealthChecks known from the informer's events.
func (a *Affected) Track(informer cache.Informer) error {
	a.mu.Lock()
	a.tracking = true
	a.mu.Unlock()
	_, err := informer.AddEventHandler(a.handler())
	return err
}

// handler is Track's informer event handler.
func (a *Affected) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.observe(obj) },
		UpdateFunc: func(_, obj any) { a.observe(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if nhc, ok := obj.(*remediationv1alpha1.NodeHealthCheck); ok {
				a.mu.Lock()
				delete(a.nhcs, nhc.Name)
				delete(a.members, nhc.Name)
				a.mu.Unlock()
			}
		},
	}
}

// observe parses a NodeHealthCheck's selector when its generation (or the object: one recreated
// under the same name) is new.
func (a *Affected) observe(obj any) {
	nhc, ok := obj.(*remediationv1alpha1.NodeHealthCheck)
	if !ok {
		return
	}
	a.mu.RLock()
	p, known := a.nhcs[nhc.Name]
	a.mu.RUnlock()
	if known && p.uid == nhc.UID && p.generation == nhc.Generation {
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(&nhc.Spec.Selector)
	if err != nil {
		sel = nil
	}
	a.mu.Lock()
	a.nhcs[nhc.Name] = parsedSelector{uid: nhc.UID, generation: nhc.Generation, selector: sel}
	a.mu.Unlock()
}

// ByNode returns requests for the NodeHealthChecks that select a node with these labels, and for
// every NodeHealthCheck when the labels make it a control-plane node. A NodeHealthCheck whose
// selector does not parse is always included (its reconcile reports the error).
func (a *Affected) ByNode(nodeLabels map[string]string) []reconcile.Request {
	controlPlane, set := remediationcr.IsControlPlane(nodeLabels), labels.Set(nodeLabels)
	a.mu.RLock()
	defer a.mu.RUnlock()
	var reqs []reconcile.Request
	for name, p := range a.nhcs {
		if controlPlane || p.selector == nil || p.selector.Matches(set) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	return reqs
}

// all returns a request for every NodeHealthCheck.
func (a *Affected) all() []reconcile.Request {
	a.mu.RLock()
	defer a.mu.RUnlock()
	reqs := make([]reconcile.Request, 0, len(a.nhcs))
	for name := range a.nhcs {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return reqs
}

// NodeEvents is the event handler of node events: it updates the memberships, then reconciles the
// NodeHealthChecks that select the node (ByNode), before and after an update, so that a node that
// leaves a selector reconciles the NodeHealthCheck it left. A reconcile a node event causes sees
// the node's membership as of that event: the informer's store, which Selected reads, changed
// before the event was delivered.
func (a *Affected) NodeEvents() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if created, ok := e.Object.(*corev1.Node); ok && a.Changes != nil {
				a.Changes.Update(nil, created) // a condition time it does not trust, before any decision
			}
			a.nodeChanged(e.Object.GetName(), e.Object.GetLabels())
			enqueue(q, a.ByNode(e.Object.GetLabels()))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if old, ok := e.ObjectOld.(*corev1.Node); ok && a.Changes != nil {
				if updated, ok := e.ObjectNew.(*corev1.Node); ok {
					a.Changes.Update(old, updated)
				}
			}
			// Memberships follow labels alone: an update that keeps them (a condition that turns,
			// most updates of an incident) moves no node and concerns the same NodeHealthChecks.
			if !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) {
				a.nodeChanged(e.ObjectNew.GetName(), e.ObjectNew.GetLabels())
				enqueue(q, a.ByNode(e.ObjectOld.GetLabels()))
			}
			enqueue(q, a.ByNode(e.ObjectNew.GetLabels()))
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			a.nodeChanged(e.Object.GetName(), nil)
			enqueue(q, a.ByNode(e.Object.GetLabels()))
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, a.ByNode(e.Object.GetLabels()))
		},
	}
}

// nodeChanged moves a node in or out of every membership; nil labels: the node is gone.
func (a *Affected) nodeChanged(name string, nodeLabels map[string]string) {
	set := labels.Set(nodeLabels)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.labelEpoch++
	for _, m := range a.members {
		if nodeLabels != nil && m.selector.Matches(set) {
			m.nodes[name] = struct{}{}
		} else {
			delete(m.nodes, name)
		}
	}
}

// LabelEpoch implements targets.LabelEpochSource: it changes with every node event that may change
// which nodes a selector selects, before the event is routed.
func (a *Affected) LabelEpoch() uint64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.labelEpoch
}

// Node implements targets.NodeSource from the node informer's store.
func (a *Affected) Node(name string) (*corev1.Node, bool, bool) {
	if a.nodes == nil {
		return nil, false, false
	}
	obj, exists, err := a.nodes.GetByKey(name)
	if err != nil {
		return nil, false, false
	}
	n, ok := obj.(*corev1.Node)
	return n, exists && ok, true
}

// Selected implements targets.NodeSource from the node informer's store. A NodeHealthCheck's membership is
// built from the store the first time it is asked for (and again for a new generation), under the
// lock node events take: an event delivered before was applied to the store the build reads, one
// delivered after is applied to the membership. Each node is checked against sel as read, so a
// node whose labels changed in the store before its event arrived is not counted; its event
// reconciles the NodeHealthCheck again. While Track feeds it, the membership is kept only for a
// NodeHealthCheck the informer shows (the same object): a reconcile of one deleted a moment ago, or
// not shown yet, builds it for that call alone, so no membership outlives its NodeHealthCheck (its
// delete event, which drops memberships, may come before that reconcile's call).
func (a *Affected) Selected(nhc metav1.Object, sel labels.Selector) ([]*corev1.Node, bool) {
	if a.nodes == nil {
		return nil, false
	}
	name, uid, generation := nhc.GetName(), nhc.GetUID(), nhc.GetGeneration()
	a.mu.Lock()
	m := a.members[name]
	if m == nil || m.uid != uid || m.generation != generation {
		m = &membership{uid: uid, generation: generation, selector: sel, nodes: map[string]struct{}{}}
		for _, obj := range a.nodes.List() {
			if n, ok := obj.(*corev1.Node); ok && sel.Matches(labels.Set(n.Labels)) {
				m.nodes[n.Name] = struct{}{}
			}
		}
		if p, known := a.nhcs[name]; !a.tracking || (known && p.uid == uid) {
			a.members[name] = m
		} else {
			delete(a.members, name)
		}
	}
	names := make([]string, 0, len(m.nodes))
	for n := range m.nodes {
		names = append(names, n)
	}
	a.mu.Unlock()
	slices.Sort(names)
	out := make([]*corev1.Node, 0, len(names))
	for _, key := range names {
		obj, exists, err := a.nodes.GetByKey(key)
		if err != nil || !exists {
			continue
		}
		if n, ok := obj.(*corev1.Node); ok && sel.Matches(labels.Set(n.Labels)) {
			out = append(out, n)
		}
	}
	return out, true
}

// ByCR returns requests for the NodeHealthChecks a remediation CR that appears or goes concerns: its
// own, those that select its node, and every one when the CR or its node is a control-plane node's
// or the node is not in the cache (gone: what it was is not known).
func (a *Affected) ByCR(ctx context.Context, cr client.Object) []reconcile.Request {
	if _, cp := remediationcr.Label(cr, remediationv1alpha1.ControlPlaneCRLabel); cp {
		return a.all()
	}
	node := &corev1.Node{}
	// Read only: only the labels are looked at.
	if err := a.reader.Get(ctx, client.ObjectKey{Name: remediationcr.NodeName(cr)}, node, client.UnsafeDisableDeepCopy); err != nil {
		if client.IgnoreNotFound(err) != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Reading a remediation CR's node; reconciling every NodeHealthCheck")
		}
		return a.all()
	}
	reqs := a.ByNode(node.Labels)
	if name, _, ok := remediationcr.ControllerNHC(cr); ok {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return reqs
}

// enqueue adds the requests to the queue.
func enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
	for _, req := range reqs {
		q.Add(req)
	}
}

// CREvents is the event handler for remediation CRs: a CR that appears or goes reconciles the
// NodeHealthChecks it concerns (ByCR: first wins and one control-plane node at a time hold across
// them); a change of a CR reconciles the NodeHealthCheck that controls it.
func (a *Affected) CREvents() handler.EventHandler {
	owner := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if name, _, ok := remediationcr.ControllerNHC(obj); ok {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, a.ByCR(ctx, e.Object))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, a.ByCR(ctx, e.Object))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			owner(e.ObjectNew, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			owner(e.Object, q)
		},
	}
}

// LeaseEvents is the event handler for node leases (in the lease namespace): a lease whose holder is
// not a NodeHealthCheck (a maintenance operator's) that appears, changes holder or goes reconciles
// the NodeHealthChecks that select its node (the lease's Node owner), so a node held back by it is
// remediated as soon as it is released, not only when its hold would have expired. Leases held by
// NodeHealthChecks, which this operator takes and renews itself, reconcile nothing: CR events
// cover what they change.
func (a *Affected) LeaseEvents() handler.EventHandler {
	byLease := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, ref := range obj.GetOwnerReferences() {
			if ref.Kind != "Node" || ref.APIVersion != "v1" {
				continue
			}
			node := &corev1.Node{}
			if err := a.reader.Get(ctx, client.ObjectKey{Name: ref.Name}, node, client.UnsafeDisableDeepCopy); err != nil {
				return // a node not in the cache has no decision to wake
			}
			enqueue(q, a.ByNode(node.Labels))
		}
	}
	foreign := func(obj client.Object) bool {
		l, ok := obj.(*coordinationv1.Lease)
		return ok && !lease.IsNodeHealthCheckHolder(lease.HolderOf(l))
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if foreign(e.Object) {
				byLease(ctx, e.Object, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, _ := e.ObjectOld.(*coordinationv1.Lease)
			updated, _ := e.ObjectNew.(*coordinationv1.Lease)
			if (foreign(e.ObjectOld) || foreign(e.ObjectNew)) && lease.HolderOf(old) != lease.HolderOf(updated) {
				byLease(ctx, e.ObjectNew, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if foreign(e.Object) {
				byLease(ctx, e.Object, q)
			}
		},
	}
}

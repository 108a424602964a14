package targets

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// What a NodeHealthCheck's decision reads of nodes and CRs it does not select (Gather): the
// remediation CRs of other NodeHealthChecks for the nodes it selects (first wins), and control-plane
// nodes remediated anywhere (one at a time). So an event about a node or a CR reconciles the
// NodeHealthChecks that select the node, and every NodeHealthCheck when the node is, or was, a
// control-plane node, or is not known. At 50 NodeHealthChecks that is one reconcile per event where
// every event reconciled all 50 before.

// Affected maps nodes to the NodeHealthChecks whose decisions they enter. Selectors are parsed
// once per NodeHealthCheck generation. The zero value is not usable: NewAffected.
type Affected struct {
	reader client.Reader

	mu        sync.Mutex
	selectors map[types.UID]parsedSelector
}

type parsedSelector struct {
	generation int64
	selector   labels.Selector
}

// NewAffected returns an Affected that reads NodeHealthChecks and nodes from c (the cache).
func NewAffected(c client.Reader) *Affected {
	return &Affected{reader: c, selectors: map[types.UID]parsedSelector{}}
}

// ByNode returns requests for the NodeHealthChecks that select a node with these labels, and for
// every NodeHealthCheck when the labels make it a control-plane node. A NodeHealthCheck whose
// selector does not parse is always included (its reconcile reports the error).
func (a *Affected) ByNode(ctx context.Context, nodeLabels map[string]string) []reconcile.Request {
	if remediationcr.IsControlPlane(nodeLabels) {
		return remediationcr.NHCRequests(ctx, a.reader, nil)
	}
	set := labels.Set(nodeLabels)
	var live map[types.UID]bool
	reqs := remediationcr.NHCRequests(ctx, a.reader, func(nhc *remediationv1alpha1.NodeHealthCheck) bool {
		if live == nil {
			live = map[types.UID]bool{}
		}
		live[nhc.UID] = true
		sel, ok := a.selector(nhc)
		return !ok || sel.Matches(set)
	})
	a.forget(live)
	return reqs
}

// NodeMap is the handler.MapFunc of node events: for an update, controller-runtime maps the old
// and the new node, so a node that leaves a selector reconciles the NodeHealthCheck it left.
func (a *Affected) NodeMap(ctx context.Context, obj client.Object) []reconcile.Request {
	return a.ByNode(ctx, obj.GetLabels())
}

// ByCR returns requests for the NodeHealthChecks a remediation CR that appears or goes concerns: its
// own, those that select its node, and every one when the CR or its node is a control-plane node's
// or the node is not in the cache (gone: what it was is not known).
func (a *Affected) ByCR(ctx context.Context, cr client.Object) []reconcile.Request {
	if _, cp := cr.GetLabels()[remediationv1alpha1.ControlPlaneCRLabel]; cp {
		return remediationcr.NHCRequests(ctx, a.reader, nil)
	}
	node := &corev1.Node{}
	// Read only: only the labels are looked at.
	if err := a.reader.Get(ctx, client.ObjectKey{Name: remediationcr.NodeName(cr)}, node, client.UnsafeDisableDeepCopy); err != nil {
		if client.IgnoreNotFound(err) != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Reading a remediation CR's node; reconciling every NodeHealthCheck")
		}
		return remediationcr.NHCRequests(ctx, a.reader, nil)
	}
	reqs := a.ByNode(ctx, node.Labels)
	if name, _, ok := remediationcr.ControllerNHC(cr); ok {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return reqs
}

// CREvents is the event handler for remediation CRs: a CR that appears or goes reconciles the
// NodeHealthChecks it concerns (ByCR: first wins and one control-plane node at a time hold across
// them); a change of a CR reconciles the NodeHealthCheck that controls it.
func (a *Affected) CREvents() handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	owner := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if name, _, ok := remediationcr.ControllerNHC(obj); ok {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, a.ByCR(ctx, e.Object))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, a.ByCR(ctx, e.Object))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			owner(e.ObjectNew, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			owner(e.Object, q)
		},
	}
}

// selector returns the NodeHealthCheck's parsed selector; false when it does not parse.
func (a *Affected) selector(nhc *remediationv1alpha1.NodeHealthCheck) (labels.Selector, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.selectors[nhc.UID]; ok && p.generation == nhc.Generation {
		return p.selector, p.selector != nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&nhc.Spec.Selector)
	if err != nil {
		sel = nil
	}
	a.selectors[nhc.UID] = parsedSelector{generation: nhc.Generation, selector: sel}
	return sel, sel != nil
}

// forget drops the selectors of NodeHealthChecks that are gone.
func (a *Affected) forget(live map[types.UID]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.selectors) <= len(live) {
		return
	}
	for uid := range a.selectors {
		if !live[uid] {
			delete(a.selectors, uid)
		}
	}
}

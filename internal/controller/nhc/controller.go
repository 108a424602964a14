package nhc

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"sigs.k8s.io/controller-runtime/pkg/controller"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "nodehealthcheck"

// +kubebuilder:rbac:groups=remediation.medik8s.io,resources=nodehealthchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups=remediation.medik8s.io,resources=nodehealthchecks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Reconciler evaluates NodeHealthChecks and writes their status. Template and remediation CR kinds
// are watched dynamically, each once, from the first reconcile that references them.
type Reconciler struct {
	client.Client
	// Clock tells the time; a fake clock in tests.
	Clock clock.PassiveClock
	// Recorder emits events.
	Recorder events.EventRecorder
	// Wiring is what the controller decides with (watch.NewWiring): its gatherer over the sources
	// both controllers share, the routes of events to NodeHealthChecks, the watch of template and
	// remediation kinds, and what wakes every NodeHealthCheck.
	Wiring *watch.Wiring
	// StartWait is how long, in real time, the status write waits for the remediation controller's
	// first CR of a node whose remediation starts now, so that the node is listed with its CR in one
	// write instead of two; zero: no wait (this controller alone). See awaitStarts.
	StartWait time.Duration
	// StatusBatch is the least time, in real time, between two status writes of one
	// NodeHealthCheck: a change that comes sooner after the last write is written when StatusBatch
	// has passed since it, together with every change made meanwhile, so that many nodes changing
	// within a short window cost few writes; the first change after a quiet StatusBatch is written at
	// once. Zero: every change at once (this controller alone). See holdWrite.
	StatusBatch time.Duration
	// Wall is the real clock, which StartWait, StatusBatch and SeriesGrace are measured on, whatever
	// Clock says.
	Wall clock.PassiveClock
	// SeriesGrace is how long, in real time, the metric series of a node that no NodeHealthCheck
	// selects or lists any more stay before they are deleted, so that their last values are scraped
	// (DefaultSeriesGrace in the manager); zero: deleted at once.
	SeriesGrace time.Duration

	metrics metricsState
	// reports remembers what was reported about each selected node's own inputs (reportNodeInputs).
	reports nodeReports
	// starting remembers, per NodeHealthCheck, since when (real time) each node whose remediation
	// starts has been waiting for its first CR (awaitStarts).
	startingMu sync.Mutex
	starting   map[string]map[string]time.Time
	// written remembers, per NodeHealthCheck, the last status this controller wrote (holdWrite).
	writtenMu sync.Mutex
	written   map[string]lastWrite
}

// concurrentReconciles is how many NodeHealthChecks are evaluated at once.
const concurrentReconciles = 4

// reconcileTimeout bounds one reconcile: a read that cannot complete (a kind whose informer cannot
// sync, an API call that hangs) fails and is retried instead of pinning a worker, which would leave
// its NodeHealthChecks without status. Two minutes, as the remediation controller's.
const reconcileTimeout = 2 * time.Minute

// SetupWithManager registers the controller: NodeHealthChecks, Nodes (only changes of labels,
// annotations, conditions, cordoning or kubelet version; heartbeats are dropped), CRDs (a
// remediator installed later enables a disabled NodeHealthCheck at once) and the upgrade gate
// (waiting remediations start as soon as it opens).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	wired := r.Wiring != nil && r.Wiring.Gatherer != nil && r.Wiring.Routes != nil && r.Wiring.Kinds != nil
	if err := watch.Require(ControllerName, watch.Dependency{Name: "Client", Set: r.Client != nil}, watch.Dependency{Name: "Clock", Set: r.Clock != nil},
		watch.Dependency{Name: "Wall", Set: r.Wall != nil}, watch.Dependency{Name: "Recorder", Set: r.Recorder != nil},
		watch.Dependency{Name: "Wiring", Set: wired}); err != nil {
		return err
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	b := ctrl.NewControllerManagedBy(mgr)
	for _, s := range r.Wiring.Wakeups(handler.EnqueueRequestsFromMapFunc(r.allNHCs)) {
		b = b.WatchesRawSource(s)
	}
	c, err := b.
		Named(ControllerName).
		// A new spec, or new annotations: annotating a NodeHealthCheck makes it look again at once
		// (as after a change the operator cannot watch); its own status writes do not.
		For(&remediationv1alpha1.NodeHealthCheck{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// Another NodeHealthCheck created, deleted or with a new spec may begin or end to select the
		// same nodes as this one (the SelectorOverlap condition).
		Watches(&remediationv1alpha1.NodeHealthCheck{}, handler.EnqueueRequestsFromMapFunc(r.allNHCs), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, r.Wiring.Routes.NodeEvents(), builder.WithPredicates(watch.NodeChangePredicate())).
		// Updates too: a new CRD is served only once it is established, an update of its status
		// that the metadata does not show, and a moment after that (crdSettle). CRDs change rarely;
		// each change is two passes over all NodeHealthChecks.
		WatchesMetadata(crd, r.crdChanged()).
		// NodeHealthChecks are independent here (each writes its own status); a status write waits
		// on the API server, and the scale benchmark's outage (a CR event reconciles every
		// NodeHealthCheck) listed a pool's failed nodes 12s late with one worker.
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentReconciles, ReconciliationTimeout: reconcileTimeout}).
		Build(r)
	if err != nil {
		return err
	}
	r.Wiring.Bind(c, nil)
	r.metrics.wall, r.metrics.grace = r.Wall, r.SeriesGrace
	if leases, ok := r.Wiring.Gatherer.Leases.(cache.Cache); ok {
		if err := c.Watch(source.Kind[client.Object](leases, &coordinationv1.Lease{}, r.Wiring.Routes.LeaseEvents())); err != nil {
			return fmt.Errorf("watching node leases: %w", err)
		}
	}
	return nil
}

// Reconcile evaluates one NodeHealthCheck: gather and decide (internal/targets), one status write
// when it changed, and a requeue at the next deadline.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	stored := &remediationv1alpha1.NodeHealthCheck{}
	if err := r.Get(ctx, req.NamespacedName, stored); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !stored.DeletionTimestamp.IsZero() {
		r.forget(req.Name)
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	unwatched, err := r.watchTemplates(ctx, &stored.Spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	snap, err := r.Wiring.Gatherer.Gather(ctx, stored, now, targets.Options{Templates: r.Wiring.Templates()})
	if err != nil {
		return ctrl.Result{}, err
	}
	r.reportNodeInputs(snap)
	next := snap.Next()
	if wait := r.awaitStarts(snap); wait > 0 {
		// The CR's event brings this NodeHealthCheck back sooner.
		if d := next.Sub(now); next.IsZero() || d > wait {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{RequeueAfter: max(next.Sub(now), time.Millisecond)}, nil
	}
	again, err := r.report(ctx, snap)
	if err != nil {
		return ctrl.Result{}, err
	}
	again = r.metrics.requeue(stored.Name, again)
	r.reportRepairBudget(snap)
	r.reportFailureDomains(snap)
	r.reportStalled(snap)
	if again > 0 {
		next = health.Earliest(next, now.Add(again))
	}

	if snap.Problem != nil && (unwatched || snap.Unwatchable) {
		// A kind that cannot be watched may be created, fixed or permitted without an event.
		next = health.Earliest(next, now.Add(templateRecheck))
	}
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}, nil
}

// report writes the snapshot's status when it changed, then emits the events and observes the
// metrics of what changed. It returns when to look again: a write that holdWrite batches is not made,
// and comes at the end of the hold with whatever changed meanwhile; after a batched write, once its
// window has passed, the status is decided again with the write in view (some of it derives from
// the status before: the healthy timestamps, dry-run's records), which the next event would do
// otherwise, and in a batch no event may come after the write.
func (r *Reconciler) report(ctx context.Context, snap *targets.Snapshot) (again time.Duration, err error) {
	stored, d := snap.Stored, snap.Decision
	status, ended := buildStatus(snap)
	// The gauges first: whoever sees the new status sees them too.
	r.metrics.syncOngoing(stored.Name, &status, selectedIn(snap))
	r.metrics.syncWould(stored.Name, &status)
	r.metrics.syncDeadlines(stored.Name, &status, snap.Input.Steps)
	syncUntrusted(stored.Name, snap.Input.Nodes)
	if equality.Semantic.DeepEqual(status, stored.Status) {
		return 0, nil
	}
	if hold, write := r.holdWrite(stored, &status); !write {
		return hold, nil
	}
	updated := stored.DeepCopy()
	updated.Status = status
	if err := r.Status().Update(ctx, updated); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil // deleted meanwhile
		}
		return 0, fmt.Errorf("updating status: %w", err) // a conflict: stale cache, retried
	}
	r.wrote(stored, updated)
	r.emitTransitionEvents(stored, updated, d)
	r.emitSkewEvents(stored, updated, snap.Skew)
	r.metrics.observeTransitions(stored.Name, &stored.Status, &updated.Status, unhealthySince(d), recoveredOf(snap), snap.Now)
	observeOutcomes(stored.Name, ended)
	ctrl.LoggerFrom(ctx).V(1).Info("Status updated", "phase", status.Phase, "observed", d.Observed, "healthy", d.Healthy, "minHealthy", d.MinHealthy)
	return r.StatusBatch, nil
}

// recoveredOf tells the selected nodes that are simply healthy in the snapshot's decision.
func recoveredOf(snap *targets.Snapshot) func(string) bool {
	decided := map[string]bool{}
	for _, n := range snap.Decision.Nodes {
		decided[n.Name] = true
	}
	return func(node string) bool {
		_, selected := snap.SelectedNode(node)
		return selected && !decided[node]
	}
}

// forget drops what is kept in memory about a deleted NodeHealthCheck.
func (r *Reconciler) forget(name string) {
	r.reports.forget(name)
	r.startingMu.Lock()
	delete(r.starting, name)
	r.startingMu.Unlock()
	r.writtenMu.Lock()
	delete(r.written, name)
	r.writtenMu.Unlock()
	r.metrics.syncOngoing(name, nil, nil)
	r.metrics.syncWould(name, nil)
	r.metrics.syncDeadlines(name, nil, nil)
	r.metrics.syncExhausted(name, nil)
	r.metrics.syncDomains(name, nil)
	r.metrics.syncStalled(name, nil)
	syncUntrusted(name, nil)
}

// templateRecheck is how soon a disabled NodeHealthCheck whose template kind cannot be watched
// looks at its templates again.
const templateRecheck = time.Minute

// watchTemplates starts watching each referenced template kind that may be watched (enqueue the
// NodeHealthChecks that reference it), once per kind. It reports whether a template kind is not
// watched. Remediation kinds are watched by the gatherer as it reads them.
func (r *Reconciler) watchTemplates(ctx context.Context, spec *remediationv1alpha1.NodeHealthCheckSpec) (unwatched bool, err error) {
	for _, ref := range spec.TemplateRefs() {
		watchable, err := r.Wiring.TemplateWatchable(ctx, ref.GroupVersionKind())
		if err != nil {
			return false, err
		}
		if !watchable {
			unwatched = true
			continue
		}
		if _, err := r.Wiring.Kinds.Ensure(ref.GroupVersionKind(), handler.EnqueueRequestsFromMapFunc(r.nhcsReferencing)); err != nil {
			return false, err
		}
	}
	return unwatched, nil
}

// crdSettle is how long after a CRD change the NodeHealthChecks are looked at once more: a CRD is
// served a moment after it is established, and no event says when.
const crdSettle = 2 * time.Second

// crdChanged enqueues every NodeHealthCheck at once and again after crdSettle.
func (r *Reconciler) crdChanged() handler.EventHandler {
	both := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range r.allNHCs(ctx, obj) {
			q.Add(req)
			q.AddAfter(req, crdSettle)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			both(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			both(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			both(ctx, e.Object, q)
		},
	}
}

func (r *Reconciler) allNHCs(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.nhcRequests(ctx, func(*remediationv1alpha1.NodeHealthCheck) bool { return true })
}

func (r *Reconciler) nhcsReferencing(ctx context.Context, template client.Object) []reconcile.Request {
	gk := template.GetObjectKind().GroupVersionKind().GroupKind()
	return r.nhcRequests(ctx, func(n *remediationv1alpha1.NodeHealthCheck) bool {
		for _, ref := range n.Spec.TemplateRefs() {
			if ref.GroupVersionKind().GroupKind() == gk && ref.Name == template.GetName() && ref.Namespace == template.GetNamespace() {
				return true
			}
		}
		return false
	})
}

// nhcRequests enqueues the NodeHealthChecks that match.
func (r *Reconciler) nhcRequests(ctx context.Context, match func(*remediationv1alpha1.NodeHealthCheck) bool) []reconcile.Request {
	return watch.NHCRequests(ctx, r, match)
}

func unhealthySince(d health.Decision) map[string]time.Time {
	out := map[string]time.Time{}
	for _, n := range d.Nodes {
		out[n.Name] = n.Health.UnhealthySince
	}
	return out
}

package remediation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/eventseries"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "remediation"

// OldRemediationAge is when a running remediation CR is flagged as too old: no remediator needs two
// days to fence or reboot a node, so one that did likely failed silently.
const OldRemediationAge = 48 * time.Hour

// Retries of a NodeHealthCheck whose actions failed back off exponentially from retryBase to
// retryMax: a first retry soon enough for a lost write conflict, and at most one every five minutes
// for an error that persists (each is logged). Other nodes' deadlines still hold meanwhile.
const (
	retryBase = 500 * time.Millisecond
	retryMax  = 5 * time.Minute
)

// reconcileTimeout bounds one reconcile: a read of a cache whose informer cannot sync, or an API
// call that hangs, fails and is retried instead of blocking a worker for good.
const reconcileTimeout = 2 * time.Minute

// concurrentReconciles is how many NodeHealthChecks are reconciled at once, and parallelStarts how
// many of one NodeHealthCheck's new remediations start at once: a remediation's start is two writes
// (the lease, the CR) and a wait for the cache, mostly waiting on the API server. Issue 15's scale
// benchmark: 50 failures in 50 NodeHealthChecks, and 900 in 40, were created one after the other;
// with 4 at once, 50 failures at one deadline still queued for 1.2-1.7s (each start waits on two
// writes and two cache round trips), so 16. Issue 36's 10,000 nodes (100 NodeHealthChecks, one run
// each): with 32, as many as maxStarts lets run, the 30% failure's last CR came 11.3s after its
// deadline instead of 16.2s and the recovery's CRs went 24s after their nodes' return (p99) instead
// of 42s: one start or end per reconcile, each waiting on the API server; the 1% failure's 100
// starts did not come sooner (p99 2.4s against 1.8s: their decisions contend for the two cores).
// What keeps decisions made at the same time apart: reconciles of one NodeHealthCheck never overlap
// (the workqueue), the node lease keeps two NodeHealthChecks off one node (the second's create
// fails, and it reads the first's lease), and control-plane starts are serialized and decided again
// (controlPlaneStart).
// maxStarts bounds the starts in flight across NodeHealthChecks (16 x 8 otherwise): more at once
// do not make the API server create CRs faster, and each holds a goroutine's stack and its
// requests' buffers (a 30% outage at 5,000 nodes peaked at 6.5 MiB of stacks with 128).
const (
	concurrentReconciles = 32
	parallelStarts       = 8
	maxStarts            = 32
)

// +kubebuilder:rbac:groups=remediation.medik8s.io,resources=nodehealthchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create

// Reconciler creates, escalates and deletes remediation CRs. Before each action it re-derives the
// decision from its own cache with the same gathering and pure decision code as the nhc controller
// (internal/targets); NodeHealthCheck status is a report it never takes orders from. Templates and
// remediation CRs are read, created and deleted with the rights remediators grant through the
// aggregated ClusterRole (rbac.ext-remediation/aggregate-to-ext-remediation).
type Reconciler struct {
	client.Client
	// Clock tells the time; a fake clock in tests.
	Clock clock.PassiveClock
	// Wall is the real clock, for how long the cache may lag behind this controller's own writes.
	Wall clock.PassiveClock
	// LeaseNamespace holds the node leases (lease.DefaultNamespace when empty).
	LeaseNamespace string
	// Release labels the node leases this controller creates or renews (lease.ReleaseLabel), so
	// that the uninstall of this release deletes its own leases and no other's; empty: no label.
	Release string
	// APIReader reads around the cache. Used only right before creating a CR with a generated name,
	// which, unlike a deterministic name, the API server cannot refuse as a duplicate when the cache
	// is behind, and for a node's lease right before a new remediation takes it (see start) or after
	// a write of the lease conflicted.
	APIReader client.Reader
	// Leases reads node leases: the cache of the Leases in the lease namespace (NewLeaseCache),
	// which the gatherer reads too, watched when it is a cache.
	Leases client.Reader
	// Recorder emits events, bursts of similar ones merged into series.
	Recorder *eventseries.Recorder
	// Refusals records the CR creates the API server refuses for good, which the decisions of both
	// controllers read (the gatherer's Refusals).
	Refusals *targets.Refusals
	// Wiring is what the controller decides with (watch.NewWiring): its gatherer over the sources
	// both controllers share, the routes of events to NodeHealthChecks and the watch of remediation
	// kinds. A reconciler called directly (after a restart, in tests) needs only its Gatherer.
	Wiring *watch.Wiring

	once sync.Once
	// startSlots holds a token per start in flight (maxStarts).
	startSlots chan struct{}
	retries    workqueue.TypedRateLimiter[reconcile.Request]
	// memory remembers, per NodeHealthCheck and node, the reports made once (again after a restart
	// at most) and this controller's recent CR writes, so a look whose cache does not show them yet
	// does not write (and report) them again; forgotten with the node or the NodeHealthCheck.
	memory memory
	// leftLeases holds "<nhc uid>/<node>" -> node for leases that may still be ours after their
	// remediation ended; sweptLeases the NodeHealthChecks whose leases were listed once.
	leftLeases, sweptLeases sync.Map
	// leaseWrites holds, per lease (client.ObjectKey), a channel closed once the lease cache shows
	// this process's last write of it (leaseShown).
	leaseWrites sync.Map
	// controlPlane serializes the starts of control-plane remediations across NodeHealthChecks
	// reconciled at once (controlPlaneStart).
	controlPlane sync.Mutex
	// leaseNamespaceMu serializes creates of the lease namespace; leaseNamespaceGen counts them, so
	// that starts which found it missing together create it once (createInLeaseNamespace).
	leaseNamespaceMu  sync.Mutex
	leaseNamespaceGen atomic.Uint64
}

// SetupWithManager registers the controller for NodeHealthChecks (spec and status: a status change
// is a hint to look, never an order), Nodes (the same changes the nhc controller sees), node
// leases, what wakes every NodeHealthCheck (the upgrade gate, the clock skew, refused creates) and,
// added as they are read, the remediation CR kinds.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.check(true); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr)
	for _, s := range r.Wiring.Wakeups(handler.EnqueueRequestsFromMapFunc(r.allNHCs)) {
		b = b.WatchesRawSource(s)
	}
	c, err := b.
		Named(ControllerName).
		For(&remediationv1alpha1.NodeHealthCheck{}).
		Watches(&corev1.Node{}, r.Wiring.Routes.NodeEvents(), builder.WithPredicates(watch.NodeChangePredicate())).
		WithOptions(controller.Options{ReconciliationTimeout: reconcileTimeout, MaxConcurrentReconciles: concurrentReconciles}).
		Build(r)
	if err != nil {
		return err
	}
	if leases, ok := r.Leases.(cache.Cache); ok {
		if err := c.Watch(source.Kind[client.Object](leases, &coordinationv1.Lease{}, r.Wiring.Routes.LeaseEvents())); err != nil {
			return fmt.Errorf("watching node leases: %w", err)
		}
	}
	r.Wiring.Bind(c, nil)
	return nil
}

// check reports the dependencies the reconciler lacks; managed, those of SetupWithManager too.
func (r *Reconciler) check(managed bool) error {
	wired := r.Wiring != nil && r.Wiring.Gatherer != nil
	return watch.Require(ControllerName,
		watch.Dependency{Name: "Client", Set: r.Client != nil}, watch.Dependency{Name: "Clock", Set: r.Clock != nil},
		watch.Dependency{Name: "Wall", Set: r.Wall != nil}, watch.Dependency{Name: "APIReader", Set: r.APIReader != nil},
		watch.Dependency{Name: "Leases", Set: r.Leases != nil}, watch.Dependency{Name: "Recorder", Set: r.Recorder != nil},
		watch.Dependency{Name: "Refusals", Set: r.Refusals != nil}, watch.Dependency{Name: "Wiring.Gatherer", Set: wired},
		watch.Dependency{Name: "Wiring.Routes and Kinds", Set: !managed || (wired && r.Wiring.Routes != nil && r.Wiring.Kinds != nil)})
}

// init prepares what Reconcile needs, once; an error when a dependency is missing.
func (r *Reconciler) init() error {
	r.once.Do(func() {
		r.retries = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBase, retryMax)
		r.startSlots = make(chan struct{}, maxStarts)
	})
	return r.check(false)
}

// Reconcile re-derives the NodeHealthCheck's decision from the cache and acts on each node: it
// starts remediations the decision allows now, escalates running ones, keeps or removes the CRs of
// recovered nodes, and removes orphaned CRs. A node whose action fails does not hold the others
// back: every node's deadline is kept, and the failures are retried with a backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	stored := &remediationv1alpha1.NodeHealthCheck{}
	if err := r.init(); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Get(ctx, req.NamespacedName, stored); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetNHC(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if replaced := r.memory.track(stored.Name, stored.UID); replaced != "" {
		r.forgetUID(replaced) // deleted and created again under the same name
	}
	if !stored.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // garbage collection removes the CRs with their owner
	}
	now := r.Clock.Now()
	// Before a CR is created, the templates too (read only then: a template that may not be
	// watched costs a GET per read): a missing or invalid one disables the NodeHealthCheck, no lease
	// is taken for a CR that cannot be built, and the CR is built from the template the decision saw
	// (Snapshot.Template).
	snap, err := r.Wiring.Gatherer.Gather(ctx, stored, now, targets.Options{Mode: targets.Acting, Templates: r.Wiring.Templates(),
		TemplatesIf: func(s *targets.Snapshot) bool { return creates(s.Decision) && !s.DryRun() }})
	if err != nil {
		return ctrl.Result{}, err
	}

	next := snap.Next()
	var errs []error
	var mu sync.Mutex
	act := func(at time.Time, err error) {
		mu.Lock()
		defer mu.Unlock()
		next = health.Earliest(next, at)
		if err != nil {
			errs = append(errs, err)
		}
	}
	// A paused NodeHealthCheck leaves the CRs of nodes it no longer selects alone until it is
	// unpaused, as the public operator does (its CRs of selected nodes that are healthy again are
	// still removed after healthyDelay); so does one whose selector does not parse.
	if !snap.KeepsOrphans() {
		for _, node := range snap.Orphans {
			act(time.Time{}, errors.Join(r.deleteOrphans(ctx, snap, node), r.release(ctx, snap, node)))
		}
		for _, node := range slices.Sorted(maps.Keys(snap.Previous)) {
			act(time.Time{}, r.deletePrevious(ctx, snap, node))
		}
	}
	// New remediations start in parallel (parallelStarts at a time); the rest acts in order. A
	// dry-run NodeHealthCheck touches only the CRs it created before dry-run was set: it starts
	// nothing and takes no lease (the nhc controller records what it would do).
	var starts errgroup.Group
	starts.SetLimit(parallelStarts)
	for _, d := range snap.Decision.Nodes {
		if snap.DryRun() && len(snap.CRs[d.Name]) == 0 {
			continue
		}
		if d.Action == health.StartRemediation {
			starts.Go(func() error {
				select {
				case r.startSlots <- struct{}{}:
					defer func() { <-r.startSlots }()
					act(r.start(ctx, snap, d))
				case <-ctx.Done():
					act(time.Time{}, ctx.Err())
				}
				return nil
			})
			continue
		}
		act(r.actOn(ctx, snap, d))
	}
	_ = starts.Wait()
	act(time.Time{}, r.releaseLeftLeases(ctx, stored, func(node string) bool {
		d, listed := snap.Node(node)
		return len(snap.CRs[node]) > 0 || (listed && d.Action == health.StartRemediation && !snap.DryRun()) || snap.LeaseUnknown(node) != "" ||
			(snap.KeepsOrphans() && len(snap.Previous[node]) > 0)
	}))
	// Counted once everything decided is done (or failed), so a reader of the count sees the
	// decision's writes.
	decisions.WithLabelValues(stored.Name).Inc()
	r.forgetGone(snap)

	if err := errors.Join(errs...); err != nil {
		// Returning the error would drop the deadlines above (controller-runtime ignores the result
		// then): log it and retry with our own backoff instead.
		ctrl.LoggerFrom(ctx).Error(err, "Some remediation actions failed; retrying")
		remediationErrors.WithLabelValues(stored.Name).Inc()
		if retry := r.retries.When(req); next.IsZero() || retry < next.Sub(now) {
			return ctrl.Result{RequeueAfter: retry}, nil
		}
	} else {
		r.retries.Forget(req)
	}
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(now), time.Millisecond)}, nil
}

// actOn carries out the decision about one node. It returns when to look again.
func (r *Reconciler) actOn(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (time.Time, error) {
	nhc, node, crs := snap.Stored, d.Name, snap.CRs[d.Name]
	switch d.Action {
	case health.StartRemediation:
		return r.start(ctx, snap, d)
	case health.ContinueRemediation:
		errDelay := r.markHealthyDelay(ctx, crs, "") // failed again: the delay is over
		renewAt, errEscalate := r.escalate(ctx, snap, d)
		flagAt, errFlag := r.flagOld(ctx, nhc, node, crs, snap.Now)
		return health.Earliest(renewAt, flagAt), errors.Join(errDelay, errEscalate, errFlag)
	case health.HealthyDelayed:
		since := snap.Now
		if n, ok := nodeInput(snap, node); ok && !n.HealthySince.IsZero() {
			since = n.HealthySince
		}
		return time.Time{}, errors.Join(r.markHealthyDelay(ctx, crs, since.UTC().Format(time.RFC3339)), r.release(ctx, snap, node))
	case health.Recovered:
		if err := r.answerRequests(ctx, snap, node, crs); err != nil {
			return time.Time{}, err // the CRs stay until the request they answered is recorded
		}
		return time.Time{}, errors.Join(r.releaseConfirmation(ctx, node),
			r.deleteAll(ctx, nhc, node, crs, "the node is healthy again", false), r.release(ctx, snap, node))
	case health.Skip:
		r.reportHold(ctx, snap, d)
	}
	return time.Time{}, nil // healthy, soon unhealthy, or skipped: nothing to do
}

func nodeInput(snap *targets.Snapshot, name string) (health.Node, bool) {
	for _, n := range snap.Input.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return health.Node{}, false
}

func (r *Reconciler) allNHCs(ctx context.Context, _ client.Object) []reconcile.Request {
	return watch.NHCRequests(ctx, r, nil)
}

package remediation

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/health"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/notify"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/templateaccess"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
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
// writes and two cache round trips), so 16.
// What keeps decisions made at the same time apart: reconciles of one NodeHealthCheck never overlap
// (the workqueue), the node lease keeps two NodeHealthChecks off one node (the second's create
// fails, and it reads the first's lease), and control-plane starts are serialized and decided again
// (controlPlaneStart).
// maxStarts bounds the starts in flight across NodeHealthChecks (16 x 8 otherwise): more at once
// do not make the API server create CRs faster, and each holds a goroutine's stack and its
// requests' buffers (a 30% outage at 5,000 nodes peaked at 6.5 MiB of stacks with 128).
const (
	concurrentReconciles = 16
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
	// Wall is the real clock, for how long the cache may lag behind this controller's own writes;
	// nil: clock.RealClock.
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
	// Leases reads node leases: a cache of the Leases in the lease namespace, which SetupWithManager
	// creates when it is nil. nil without SetupWithManager: leases are read with APIReader.
	Leases client.Reader
	// Recorder emits events.
	Recorder events.EventRecorder
	// Templates reads remediation templates with the rights remediators grant; nil: through the cache.
	Templates *templateaccess.Reader
	// Gate is the upgrade gate the upgradeguard controller feeds, read only. nil: no upgrade awareness.
	Gate upgrade.Reader
	// MaxPause bounds how long each upgrade signal holds new remediations back, as for the nhc
	// controller; zero: no bound.
	MaxPause time.Duration
	// ReturnGrace is the returning-node hold (health.Input.ReturnGrace), as for the nhc controller;
	// zero: off.
	ReturnGrace time.Duration
	// RemovalHold bounds how long a node's removal holds its remediation back, as for the nhc
	// controller; zero: no bound.
	RemovalHold time.Duration
	// Skew measures the skew between this process's clock and the API server's; while it is beyond
	// its bound or not measured yet, nothing starts or escalates. nil: not measured.
	Skew *clockskew.Monitor
	// Refusals records the CR creates the API server refuses for good, shared with the nhc
	// controller's decisions; a new record when nil.
	Refusals *targets.Refusals
	// Changes tells when this process saw nodes' conditions change, for the returning-node hold;
	// nil: the conditions' lastTransitionTime alone counts.
	Changes targets.ConditionChangeSource
	// Machines reads nodes' Machines, as their annotations name them and verified: the CR's Machine
	// owner and, with the role labels, which nodes are control-plane nodes. nil: read through
	// Client (targets.NewMachines).
	Machines *targets.Machines

	watcher *watch.Dynamic
	// informers are the shared cache's, to read a remediation kind only once it has synced.
	informers cache.Informers
	// affected maps node and CR events to the NodeHealthChecks they concern.
	affected *watch.Affected
	once     sync.Once
	targets  *targets.Gatherer
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
	// controlPlane serializes the starts of control-plane remediations across NodeHealthChecks
	// reconciled at once (controlPlaneStart).
	controlPlane sync.Mutex
	// leaseNamespaceMu serializes creates of the lease namespace; leaseNamespaceGen counts them, so
	// that starts which found it missing together create it once (createInLeaseNamespace).
	leaseNamespaceMu  sync.Mutex
	leaseNamespaceGen atomic.Uint64
}

// SetupWithManager registers the controller for NodeHealthChecks (spec and status: a status change
// is a hint to look, never an order), Nodes (the same changes the nhc controller sees), the upgrade
// gate and, added as they are read, the remediation CR kinds.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	var err error
	if r.affected, err = watch.AffectedFor(mgr); err == nil {
		if c, ok := r.Changes.(interface {
			Update(old, updated *corev1.Node)
		}); ok {
			r.affected.Changes = c
		}
	}
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Gate != nil {
		b = b.WatchesRawSource(notify.Source(r.Gate.Changes(), handler.EnqueueRequestsFromMapFunc(r.allNHCs)))
	}
	if r.Skew != nil {
		b = b.WatchesRawSource(source.Channel(r.Skew.Changes(), handler.EnqueueRequestsFromMapFunc(r.allNHCs)))
	}
	if r.Refusals == nil {
		r.Refusals = &targets.Refusals{}
	}
	b = b.WatchesRawSource(source.Channel(r.Refusals.Changes(), handler.EnqueueRequestsFromMapFunc(r.allNHCs)))
	c, err := b.
		Named(ControllerName).
		For(&remediationv1alpha1.NodeHealthCheck{}).
		Watches(&corev1.Node{}, r.affected.NodeEvents(), builder.WithPredicates(watch.NodeChangePredicate())).
		WithOptions(controller.Options{ReconciliationTimeout: reconcileTimeout, MaxConcurrentReconciles: concurrentReconciles}).
		Build(r)
	if err != nil {
		return err
	}
	if r.Leases == nil {
		if r.Leases, err = NewLeaseCache(mgr, r.leaseNamespace()); err != nil {
			return err
		}
	}
	if leases, ok := r.Leases.(cache.Cache); ok {
		if err := c.Watch(source.Kind[client.Object](leases, &coordinationv1.Lease{}, r.affected.LeaseEvents())); err != nil {
			return fmt.Errorf("watching node leases: %w", err)
		}
	}
	r.watcher = watch.NewDynamic(c, mgr.GetCache())
	r.informers = mgr.GetCache()
	r.init()
	return nil
}

// init prepares what Reconcile needs; without SetupWithManager (a reconciler called directly, as
// after a restart in tests) remediation kinds are read without adding watches.
func (r *Reconciler) init() {
	r.once.Do(func() {
		r.retries = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBase, retryMax)
		r.startSlots = make(chan struct{}, maxStarts)
		if r.Wall == nil {
			r.Wall = clock.RealClock{}
		}
		if r.Machines == nil {
			r.Machines = targets.NewMachines(r.Client)
		}
		r.targets = &targets.Gatherer{Reader: r.Client, Gate: r.Gate, MaxPause: r.MaxPause, ReturnGrace: r.ReturnGrace, RemovalHold: r.RemovalHold, Changes: r.Changes, Machines: r.Machines, Wall: r.Wall,
			Leases: r.leaseReader(), LeaseNamespace: r.leaseNamespace(), Etcd: &targets.EtcdReader{Reader: r.reader(), Mapper: r.RESTMapper()}}
		if r.affected != nil { // a nil *Affected would be a NodeSource that is not nil
			r.targets.Nodes = r.affected
		}
		if r.Skew != nil {
			r.targets.Skew = r.Skew
		}
		if r.Refusals == nil {
			r.Refusals = &targets.Refusals{}
		}
		r.targets.Refusals = r.Refusals
		if r.informers != nil {
			r.targets.Informers = r.informers
		}
		if r.APIReader != nil {
			r.targets.APIReader = r.APIReader
		}
		if r.watcher != nil {
			r.targets.Watch = func(gvk schema.GroupVersionKind) (bool, error) {
				return r.watcher.Ensure(gvk, r.affected.CREvents())
			}
		}
		if r.Templates != nil {
			r.targets.Access = r.Templates
		}
	})
}

// Reconcile re-derives the NodeHealthCheck's decision from the cache and acts on each node: it
// starts remediations the decision allows now, escalates running ones, keeps or removes the CRs of
// recovered nodes, and removes orphaned CRs. A node whose action fails does not hold the others
// back: every node's deadline is kept, and the failures are retried with a backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	stored := &remediationv1alpha1.NodeHealthCheck{}
	r.init()
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
	snap, err := r.targets.Gather(ctx, stored, now, targets.Options{Mode: targets.Acting})
	if err != nil {
		return ctrl.Result{}, err
	}
	if starts(snap.Decision) && !snap.DryRun() {
		// Before a first CR, the templates too: a missing or invalid one disables the
		// NodeHealthCheck, and no lease is taken for a CR that cannot be built. (Read only then:
		// a template that may not be watched costs a GET per read.)
		if snap, err = r.targets.Gather(ctx, stored, now, targets.Options{Mode: targets.Acting, Templates: targets.TemplatesThrough(r.Templates, r.Client)}); err != nil {
			return ctrl.Result{}, err
		}
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
			slices.ContainsFunc(snap.Previous[node], func(cr unstructured.Unstructured) bool { return targets.KeptOrphanCR(&cr) })
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
			r.deleteAll(ctx, nhc, node, crs, "the node is healthy again"), r.release(ctx, snap, node))
	case health.Skip:
		r.reportHold(ctx, snap, d)
	}
	return time.Time{}, nil // healthy, soon unhealthy, or skipped: nothing to do
}

// reportHold says, once per holder, why a node the remediation controller would remediate now is
// held back by the node's own state: a lease another party holds, or the etcd guard. (The nhc
// controller reports every skip reason in status and its own event.)
func (r *Reconciler) reportHold(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) {
	n, ok := nodeInput(snap, d.Name)
	if !ok {
		return
	}
	switch d.SkipReason {
	case health.SkipLeased:
		r.leaseBusy(snap.Stored, d.Name, leaseResult{otherHolder: n.LeasedBy, expires: n.LeasedUntil})
	case health.SkipEtcdQuorum:
		r.reportOnce(ctx, snap.Stored, d.Name, onceEtcd, n.EtcdGuard, "Not remediating control-plane node %s yet: %s", d.Name, n.EtcdGuard)
	}
}

// starts reports whether the decision starts a remediation on some node.
func starts(d health.Decision) bool {
	return slices.ContainsFunc(d.Nodes, func(n health.NodeDecision) bool { return n.Action == health.StartRemediation })
}

func nodeInput(snap *targets.Snapshot, name string) (health.Node, bool) {
	for _, n := range snap.Input.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return health.Node{}, false
}

// start starts a node's remediation: a control-plane node's one at a time across NodeHealthChecks
// (controlPlaneStart), any other at once (startNow). It returns when to look again.
func (r *Reconciler) start(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (time.Time, error) {
	if n, ok := nodeInput(snap, d.Name); ok && n.ControlPlane {
		return r.controlPlaneStart(ctx, snap, d)
	}
	return r.startNow(ctx, snap, d)
}

// controlPlaneStart starts a control-plane node's remediation one at a time across NodeHealthChecks
// reconciled at once: under a lock, from a snapshot read again after the last such start ended
// (which waited until the cache showed its CR, or recorded it), so a control-plane remediation
// another NodeHealthCheck started meanwhile holds this one back, as in a serial reconcile.
func (r *Reconciler) controlPlaneStart(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (time.Time, error) {
	r.controlPlane.Lock()
	defer r.controlPlane.Unlock()
	fresh, err := r.targets.Gather(ctx, snap.Stored, snap.Now, targets.Options{Mode: targets.Acting, Templates: targets.TemplatesThrough(r.Templates, r.Client)})
	if err != nil {
		return time.Time{}, err
	}
	again, ok := fresh.Node(d.Name)
	if !ok || again.Action != health.StartRemediation {
		return fresh.Next(), nil // decided otherwise now; the CR's event brings the next decision
	}
	return r.startNow(ctx, fresh, again)
}

// startNow takes the node's lease and creates the CR of the decision's first step (the decision
// weighed the lease as the cache shows it, and the etcd guard). It returns when to look again.
func (r *Reconciler) startNow(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (time.Time, error) {
	nhc, node, now := snap.Stored, d.Name, snap.Now
	if d.Step == nil {
		return time.Time{}, nil
	}
	// The lease cache first: where it shows no lease, the lease is created with one request (one
	// another operator took a moment ago, which the cache does not show yet, makes the create fail,
	// and holdLease reads it then). A lease the cache shows is read around the cache: a release the
	// cache does not show yet would hold the node back until the released lease's recorded expiry,
	// up to its full duration.
	lease, err := r.getLease(ctx, node, false)
	if err == nil && lease != nil {
		lease, err = r.getLease(ctx, node, true)
	}
	if err != nil {
		return time.Time{}, err
	}
	held, err := r.holdLease(ctx, nhc, node, lease, nodelease.Duration(d.Step.Timeout), now, now)
	if err != nil {
		return time.Time{}, err
	}
	if !held.held {
		r.leaseBusy(nhc, node, held)
		return held.retryAt, nil
	}
	return held.renewAt, r.create(ctx, snap, node, *d.Step, d.Health.Requested)
}

// escalate carries out the decision's escalation of a running remediation: while it is due and
// not held, it takes the node's lease for the step that runs from now on, marks the step that timed
// out, failed or is overdue with the nhc-timed-out annotation and creates the next step's CR. A lease
// someone else holds stops it exactly as it stops a first step; a held escalation (the gate of new
// remediations is closed) changes nothing but renews the lease of the running step. It returns
// when the node's lease is renewed.
func (r *Reconciler) escalate(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (renewAt time.Time, err error) {
	nhc, node, crs, now := snap.Stored, d.Name, snap.CRs[d.Name], snap.Now
	e := d.Escalation
	stepCRs := make([]health.StepCR, len(crs))
	for i := range crs {
		stepCRs[i] = remediationcr.StepCR(&crs[i])
	}
	for _, i := range e.Stale {
		r.reportOnce(ctx, nhc, node, onceStale, string(crs[i].GetUID()),
			"Node %s: %s %s/%s was created from template %s, which the spec no longer references; no other remediation starts for the node until it ends",
			node, crs[i].GetKind(), crs[i].GetNamespace(), crs[i].GetName(), stepCRs[i].TemplateName)
	}
	if d.EscalationHeld() {
		r.reportOnce(ctx, nhc, node, onceHeld, string(d.SkipReason)+"/"+e.Started.String(),
			"%s; the running remediation continues, and the next step is decided again once nothing holds it (%s)", capitalize(d.SkipMessage), d.SkipReason)
	}

	if snap.DryRun() && (e.Next != nil || len(e.TimeOut) > 0) {
		// Dry-run escalates none of the CRs that ran before it was set: no next step, and no
		// nhc-timed-out mark either (the remediator would give up the running step); they keep
		// running, and keep their lease, until they end. Turning dry-run off escalates at the next
		// reconcile (the spec changed).
		switch {
		case e.Next != nil:
			ref := e.Next.Template
			r.reportDryRun(nhc, node, ref.Kind+"/"+ref.Name,
				"Dry run: would escalate node %s to %s %s/%s; no CR is created and the running one is not marked timed out", node, ref.Kind, ref.Namespace, ref.Name)
		case e.Exhausted:
			r.reportDryRun(nhc, node, "exhausted",
				"Dry run: would mark node %s's last remediation timed out (no remediation template is left); it is not marked", node)
		}
		e.Next, e.TimeOut, e.Exhausted = nil, nil, false
	}

	// Hold the node's lease for the step that runs from now on, before anything is marked or
	// created.
	var leaseFor time.Duration
	stepStart := e.Started
	switch {
	case e.Next != nil:
		leaseFor, stepStart = nodelease.Duration(e.Next.Timeout), now
	case e.Current != nil:
		leaseFor = nodelease.Duration(e.Current.Timeout)
	case len(e.Stale) > 0:
		leaseFor, stepStart = nodelease.Duration(longestTimeout(targets.Steps(&snap.NHC.Spec))), stepCRs[e.Stale[0]].Created
	}
	if leaseFor > 0 {
		lease, err := r.getLease(ctx, node, false)
		if err != nil {
			return time.Time{}, err
		}
		held, err := r.holdLease(ctx, nhc, node, lease, leaseFor, stepStart, now)
		if err != nil {
			return time.Time{}, err
		}
		if !held.held {
			// A lease someone else holds stops an escalation exactly as it stops a first step:
			// nothing is marked and nothing is created while they hold it.
			r.leaseBusy(nhc, node, held)
			return held.retryAt, nil
		}
		renewAt = held.renewAt
	}

	for _, i := range e.TimeOut {
		cr := &crs[i]
		mark := ownWrite{writeTimedOut, cr.GetUID()}
		if r.memory.made(nhc.UID, node, mark, r.Wall.Now()) {
			continue // marked by an earlier look; the cache does not show it yet
		}
		if err := remediationcr.PatchAnnotation(ctx, r.Client, cr, remediationv1alpha1.NHCTimedOutAnnotation, ptr.To(now.UTC().Format(time.RFC3339))); err != nil {
			return renewAt, fmt.Errorf("marking %s %s/%s timed out: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
		}
		r.memory.record(nhc.UID, node, mark, r.Wall.Now())
		ctrl.LoggerFrom(ctx).Info("Remediation timed out", "node", node, "kind", cr.GetKind(), "name", cr.GetName(), "overdue", e.Overdue)
		if e.Exhausted {
			r.event(nhc, corev1.EventTypeWarning, remediationv1alpha1.EventReasonNoTemplateLeft, "Escalate",
				"Node %s is still unhealthy and its last remediation (%s) timed out or failed: no remediation template is left; the node stays listed until it recovers or is deleted",
				node, cr.GetKind())
		}
	}
	if e.Next != nil {
		return renewAt, r.create(ctx, snap, node, *e.Next, d.Health.Requested)
	}
	return renewAt, nil
}

// reportDryRun emits a WouldRemediate event about the node once per NodeHealthCheck, node and
// what (the step it would escalate to).
func (r *Reconciler) reportDryRun(nhc *remediationv1alpha1.NodeHealthCheck, node, what, format string, args ...any) {
	if r.memory.first(nhc.UID, node, onceDryRun, what) {
		r.nodeRelatedEvent(nhc, node, corev1.EventTypeNormal, remediationv1alpha1.EventReasonWouldRemediate, "DryRun", format, args...)
	}
}

// capitalize returns the note with its first letter in upper case (events start with a capital).
func capitalize(note string) string {
	if note == "" {
		return note
	}
	return strings.ToUpper(note[:1]) + note[1:]
}

func longestTimeout(steps []health.Step) time.Duration {
	var longest time.Duration
	for _, s := range steps {
		longest = max(longest, s.Timeout)
	}
	return longest
}

// flagOld flags, once, each running CR older than OldRemediationAge with an annotation, a metric and
// a warning event; it returns when the next CR comes of that age.
func (r *Reconciler) flagOld(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, crs []unstructured.Unstructured, now time.Time) (time.Time, error) {
	var next time.Time
	for i := range crs {
		cr := &crs[i]
		if _, flagged := cr.GetAnnotations()[remediationv1alpha1.OldRemediationCRAnnotation]; flagged || !cr.GetDeletionTimestamp().IsZero() {
			continue
		}
		due := cr.GetCreationTimestamp().Add(OldRemediationAge)
		if now.Before(due) {
			next = health.Earliest(next, due)
			continue
		}
		if err := remediationcr.PatchAnnotation(ctx, r.Client, cr, remediationv1alpha1.OldRemediationCRAnnotation, ptr.To(remediationv1alpha1.OldRemediationCRFlag)); err != nil {
			return next, fmt.Errorf("flagging %s %s/%s as old: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
		}
		if !r.memory.first(nhc.UID, node, onceOld, string(cr.GetUID())) {
			continue // flagged before the cache showed it
		}
		oldRemediationCR.WithLabelValues(node, "").Inc()
		r.event(nhc, corev1.EventTypeWarning, remediationv1alpha1.EventReasonOldRemediationCR, "Flag",
			"%s %s/%s for node %s has been running for more than %s; check its remediator", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node, OldRemediationAge)
	}
	return next, nil
}

// leaseBusy reports, once per holder, that another party holds the node's lease.
func (r *Reconciler) leaseBusy(nhc *remediationv1alpha1.NodeHealthCheck, node string, lease leaseResult) {
	if !r.memory.first(nhc.UID, node, onceLease, lease.otherHolder) {
		return
	}
	until := "it releases it (the lease has no expiry)"
	if !lease.expires.IsZero() {
		until = lease.expires.UTC().Format(time.RFC3339)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(nhc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationSkipped, "Skip",
			"Node %s is leased by %s until %s (for example for maintenance); remediation waits for the lease", node, lease.otherHolder, until)
	}
}

// markHealthyDelay records on each CR when its node's healthy delay started (empty: removes the
// record), so that remediators can tell a delayed CR from a running one.
func (r *Reconciler) markHealthyDelay(ctx context.Context, crs []unstructured.Unstructured, since string) error {
	for i := range crs {
		cr := &crs[i]
		current, has := cr.GetAnnotations()[remediationv1alpha1.HealthyDelayAnnotation]
		if (since == "" && !has) || (since != "" && current == since) || !cr.GetDeletionTimestamp().IsZero() {
			continue
		}
		var value *string
		if since != "" {
			value = &since
		}
		if err := remediationcr.PatchAnnotation(ctx, r.Client, cr, remediationv1alpha1.HealthyDelayAnnotation, value); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("annotating %s %s/%s: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
		}
	}
	return nil
}

// releaseConfirmation removes the manually-confirmed-healthy annotation from a node whose
// remediation is being cleared, so the next remediation of the node gets its delay again.
func (r *Reconciler) releaseConfirmation(ctx context.Context, nodeName string) error {
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, ok := node.Annotations[remediationv1alpha1.ManuallyConfirmedHealthyAnnotation]; !ok {
		return nil
	}
	if err := remediationcr.PatchAnnotation(ctx, r.Client, node, remediationv1alpha1.ManuallyConfirmedHealthyAnnotation, nil); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the manual confirmation from node %s: %w", nodeName, err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed manual confirmation", "node", nodeName)
	return nil
}

// create creates the node's remediation CR of the step from its template; requested is the time of
// the remediation request the remediation answers (zero: none), recorded on the CR and, once it is
// created, on the node (answerRequests).
func (r *Reconciler) create(ctx context.Context, snap *targets.Snapshot, node string, step health.Step, requested time.Time) error {
	nhc := snap.Stored
	ref := step.Template
	template := &unstructured.Unstructured{}
	template.SetGroupVersionKind(ref.GroupVersionKind())
	if err := targets.TemplatesThrough(r.Templates, r.Client).Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, template); err != nil {
		return fmt.Errorf("getting template %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	target, ok := snap.SelectedNode(node)
	if !ok {
		return nil // no longer selected; the next reconcile decides again
	}
	machine, err := r.machineOf(ctx, nhc, target, template.GetNamespace())
	if err != nil {
		return err
	}
	cr, err := remediationcr.Build(template, nhc, target, machine)
	if err != nil {
		return err
	}
	if fd := snap.NHC.Spec.FailureDomain; fd != nil {
		// The node's domain as the remediation found it: it counts there while the remediation runs,
		// wherever the node's label says it is later (targets.DomainMemory).
		annotations := cr.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[remediationv1alpha1.FailureDomainAnnotation] = remediationcr.FailureDomainValue(fd.TopologyKey, target.Labels[fd.TopologyKey])
		cr.SetAnnotations(annotations)
	}
	if !requested.IsZero() {
		if requested.After(snap.Now) {
			requested = snap.Now // never record a time later than the operator's (the decision passes none)
		}
		annotations := cr.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[remediationv1alpha1.RemediationRequestedAtAnnotation] = requested.UTC().Format(time.RFC3339)
		if remediationcr.BaselineOf(snap.CRs[node]) == nil {
			// The first CR: the node as the remediation finds it, to tell when it changed.
			annotations[remediationv1alpha1.RemediationRequestBaselineAnnotation] = remediationcr.EncodeBaseline(
				health.Baseline(snap.NHC.Spec.UnhealthyConditions, target.Status.Conditions, snap.Now))
		}
		cr.SetAnnotations(annotations)
	}
	if cr.GetName() == "" {
		exists, err := r.stepCRExists(ctx, nhc, node, cr)
		if err != nil || exists {
			return err
		}
	}
	err = r.Create(ctx, cr)
	if apierrors.IsAlreadyExists(err) {
		return r.explainExisting(ctx, nhc, cr)
	}
	if targets.RefusedForGood(err) {
		return r.refused(ctx, snap, node, cr, err)
	}
	if err != nil {
		return fmt.Errorf("creating %s for node %s: %w", cr.GetKind(), node, err)
	}
	r.Refusals.Clear(nhc.UID, node)
	r.awaitCache(ctx, cr)
	ctrl.LoggerFrom(ctx).Info("Created remediation", "node", node, "kind", cr.GetKind(), "name", cr.GetName())
	if requested.IsZero() {
		r.nodeRelatedEvent(nhc, node, corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationCreated, "Create", "Created %s %s/%s for node %s", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node)
		return nil
	}
	r.nodeRelatedEvent(nhc, node, corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationCreated, "Create", "Created %s %s/%s for node %s, as requested at %s",
		cr.GetKind(), cr.GetNamespace(), cr.GetName(), node, requested.UTC().Format(time.RFC3339))
	return r.answerRequests(ctx, snap, node, []unstructured.Unstructured{*cr})
}

// answerRequests records, in the node's remediation-request-handled annotation, the remediation
// request that the node's remediation (its CRs) answers (targets.AnsweredRequest): once when the
// remediation starts, and again before its CRs go, so that a request is never acted on twice, nor
// lost when the write fails (the CRs stay until it succeeds). A node that is gone needs nothing; a
// dry-run NodeHealthCheck, which ignores requests, changes no node, nor does one that does not take
// requests unless its CRs answer one (it took them before).
func (r *Reconciler) answerRequests(ctx context.Context, snap *targets.Snapshot, nodeName string, crs []unstructured.Unstructured) error {
	if snap.DryRun() || (!snap.NHC.Spec.AllowRemediationRequests && remediationcr.RequestOf(crs).IsZero()) {
		return nil
	}
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	value, write := snap.AnsweredRequest(node, crs)
	if !write {
		return nil
	}
	if err := remediationcr.PatchAnnotation(ctx, r.Client, node, remediationv1alpha1.RemediationRequestHandledAnnotation, &value); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("recording the remediation request answered on node %s: %w", nodeName, err)
	}
	ctrl.LoggerFrom(ctx).Info("Recorded the remediation request answered", "node", nodeName, "request", value)
	return nil
}

// refused handles a create the API server refused for good: it says so (once per answer), retries
// with the controller's backoff up to targets.RefusalAttempts times, and then holds the start back
// for targets.RefusalHold, releasing the node's lease when no CR of the NodeHealthCheck is on the
// node (a running remediation keeps its lease). The decisions of both controllers read the record.
func (r *Reconciler) refused(ctx context.Context, snap *targets.Snapshot, node string, cr *unstructured.Unstructured, err error) error {
	nhc := snap.Stored
	rec := r.Refusals.Record(nhc.UID, node, cr.GetKind(), err, snap.Now)
	name := cr.GetName()
	if name == "" {
		name = cr.GetGenerateName() + "*"
	}
	if rec.Until.IsZero() {
		r.reportRefusal(nhc, node, "Node %s: the API server refused to create %s %s/%s (attempt %d of %d): %v", node, cr.GetKind(), cr.GetNamespace(), name, rec.Attempts, targets.RefusalAttempts, err)
		return fmt.Errorf("creating %s for node %s: %w", cr.GetKind(), node, err)
	}
	r.reportRefusal(nhc, node, "Node %s: the API server refused to create %s %s/%s %d times in a row: %v; the node's remediation waits until %s",
		node, cr.GetKind(), cr.GetNamespace(), name, rec.Attempts, err, rec.Until.UTC().Format(time.RFC3339))
	ctrl.LoggerFrom(ctx).Error(err, "Remediation refused for good; held back", "node", node, "kind", cr.GetKind(), "until", rec.Until)
	if len(snap.CRs[node]) == 0 {
		return r.release(ctx, snap, node)
	}
	return nil
}

// reportRefusal emits a RemediationRefused warning (regarding the NodeHealthCheck, related to the
// node), once per distinct note.
func (r *Reconciler) reportRefusal(nhc *remediationv1alpha1.NodeHealthCheck, node, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	if !r.memory.first(nhc.UID, node, onceRefused, msg) {
		return
	}
	r.nodeRelatedEvent(nhc, node, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationRefused, skipAction(msg), "%s", msg)
}

// cacheWait bounds how long a reconcile waits for the cache to show a CR it created; the cache sees
// its own writes within milliseconds.
const cacheWait = 2 * time.Second

// awaitCache waits until the cache shows the CR just created, so that the next decision of this
// NodeHealthCheck, and every decision that starts a control-plane remediation after it (they are
// serialized), count it. Where the cache lags longer, the snapshots count the CR from a record
// instead (targets.Gatherer.Created). Decisions of other NodeHealthCheck made meanwhile may not see
// it: the node lease keeps them off the node.
func (r *Reconciler) awaitCache(ctx context.Context, cr *unstructured.Unstructured) {
	seen := &unstructured.Unstructured{}
	seen.SetGroupVersionKind(cr.GroupVersionKind())
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, cacheWait, true, func(ctx context.Context) (bool, error) {
		err := r.Get(ctx, client.ObjectKeyFromObject(cr), seen)
		return err == nil && seen.GetUID() == cr.GetUID(), nil
	})
	if err != nil {
		r.targets.Created(cr)
	}
}

// stepCRExists reports, reading around the cache, whether the NodeHealthCheck already has a CR of
// this kind and template for the node.
func (r *Reconciler) stepCRExists(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, cr *unstructured.Unstructured) (bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(cr.GroupVersionKind().GroupVersion().WithKind(cr.GetKind() + "List"))
	if err := r.reader().List(ctx, list, client.InNamespace(cr.GetNamespace())); err != nil {
		return false, fmt.Errorf("listing %s: %w", cr.GetKind(), err)
	}
	template := cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]
	for i := range list.Items {
		existing := &list.Items[i]
		if _, uid, ok := remediationcr.ControllerNHC(existing); ok && uid == nhc.UID && remediationcr.NodeName(existing) == node &&
			existing.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation] == template {
			return true, nil
		}
	}
	return false, nil
}

// explainExisting handles a CR whose name is taken:
//   - by a CR of ours from the same template: our cache is behind; nothing to do;
//   - by a CR of ours from another template of the same kind (the templates changed during the
//     remediation): once that CR timed out it is deleted, so the step that replaces it gets its
//     name; until then it is what runs (escalation holds the node meanwhile);
//   - by another NodeHealthCheck's CR, which then remediates the node first ("first wins").
func (r *Reconciler) explainExisting(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, cr *unstructured.Unstructured) error {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(cr.GroupVersionKind())
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(cr), existing); err != nil {
		return client.IgnoreNotFound(err) // gone meanwhile; the next reconcile creates it
	}
	node := remediationcr.NodeName(cr)
	name, uid, ok := remediationcr.ControllerNHC(existing)
	switch {
	case ok && uid == nhc.UID:
		oldTemplate := existing.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]
		newTemplate := cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]
		if oldTemplate == newTemplate {
			ctrl.LoggerFrom(ctx).V(1).Info("Remediation exists already; the cache is behind", "node", node, "kind", cr.GetKind(), "name", cr.GetName())
			return nil
		}
		if _, timedOut := existing.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]; !timedOut || !existing.GetDeletionTimestamp().IsZero() {
			r.reportOnce(ctx, nhc, node, onceExists, string(existing.GetUID()),
				"Node %s: cannot create %s %s/%s from template %s: the CR of that name, from template %s, still runs", node, cr.GetKind(), cr.GetNamespace(), cr.GetName(), newTemplate, oldTemplate)
			return nil
		}
		return r.deleteAll(ctx, nhc, node, []unstructured.Unstructured{*existing},
			fmt.Sprintf("it timed out, and the CR from template %s that replaces it needs its name", newTemplate))
	case ok:
		r.reportOnce(ctx, nhc, node, onceFirstWins, string(existing.GetUID()),
			"Node %s is already remediated by NodeHealthCheck %s (%s %s/%s); do the NodeHealthChecks select overlapping nodes?",
			node, name, existing.GetKind(), existing.GetNamespace(), existing.GetName())
	default:
		r.reportOnce(ctx, nhc, node, onceForeign, string(existing.GetUID()),
			"Node %s: cannot create %s %s/%s: an object of that name that no NodeHealthCheck controls exists", node, cr.GetKind(), cr.GetNamespace(), cr.GetName())
	}
	return nil
}

// reportOnce emits a warning RemediationSkipped event regarding the NodeHealthCheck, related to the
// node, with an action of its own (skipAction), and logs it, once per NodeHealthCheck, node, kind and
// value (memory).
func (r *Reconciler) reportOnce(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, kind onceKind, value, note string, args ...any) {
	if !r.memory.first(nhc.UID, node, kind, value) {
		return
	}
	msg := fmt.Sprintf(note, args...)
	ctrl.LoggerFrom(ctx).Info(msg, "node", node)
	if r.Recorder != nil {
		r.Recorder.Eventf(nhc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationSkipped, skipAction(msg), "%s", msg)
	}
}

// skipAction is the action of a RemediationSkipped event: "Skip-" and a hash of its note. The event
// recorder merges events of one type, reason, action, regarding and related object into one series
// that keeps the first note; a node skipped for another cause later (the etcd budget, then the guard
// pod) must show its new note.
func skipAction(note string) string {
	h := fnv.New32a()
	h.Write([]byte(note))
	return fmt.Sprintf("Skip-%08x", h.Sum32())
}

// deleteAll deletes the node's CRs: each once, however many looks the cache shows it to before it
// shows the delete (in a mass recovery each node's event makes its NodeHealthCheck look again), and
// each delete reported once (a CR found gone already is not reported again).
func (r *Reconciler) deleteAll(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, crs []unstructured.Unstructured, why string) error {
	var errs []error
	now := r.Wall.Now()
	for i := range crs {
		cr := &crs[i]
		if !cr.GetDeletionTimestamp().IsZero() {
			continue // being deleted; the remediator's finalizer decides when it is gone
		}
		if r.memory.made(nhc.UID, node, ownWrite{writeDelete, cr.GetUID()}, now) {
			continue // deleted by an earlier look; the cache does not show it yet
		}
		err := r.Delete(ctx, cr, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(cr.GetUID())})
		if apierrors.IsNotFound(err) {
			r.targets.Forget(cr.GetUID())
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting %s %s/%s: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err))
			continue
		}
		r.memory.record(nhc.UID, node, ownWrite{writeDelete, cr.GetUID()}, now)
		r.targets.Forget(cr.GetUID())
		ctrl.LoggerFrom(ctx).Info("Deleted remediation", "node", node, "kind", cr.GetKind(), "name", cr.GetName(), "why", why)
		r.nodeRelatedEvent(nhc, node, corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationRemoved, "Delete", "Deleted %s %s/%s of node %s: %s", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node, why)
	}
	return errors.Join(errs...)
}

// deletePrevious deletes the CRs made for an earlier Node object of the node's name (Snapshot.Previous:
// the Node was deleted and created again), but those whose remediator is replacing the machine
// (targets.KeptOrphanCR): they are no remediation of this node, which is judged afresh. The node's
// lease goes with them when no remediation of the node runs or starts.
func (r *Reconciler) deletePrevious(ctx context.Context, snap *targets.Snapshot, node string) error {
	var gone []unstructured.Unstructured
	kept := false
	for _, cr := range snap.Previous[node] {
		if targets.KeptOrphanCR(&cr) {
			kept = true
			continue
		}
		gone = append(gone, cr)
	}
	if len(gone) == 0 {
		return nil
	}
	err := r.deleteAll(ctx, snap.Stored, node, gone, "it was made for an earlier Node of that name, which was deleted and created again")
	if d, listed := snap.Node(node); err != nil || kept || len(snap.CRs[node]) > 0 || (listed && d.Action == health.StartRemediation) {
		return err
	}
	return r.release(ctx, snap, node)
}

// deleteOrphans deletes the CRs of a node the NodeHealthCheck does not select (deleted, or no
// longer matched, as the cache shows it now), except CRs whose remediator deletes the node for good
// and is not done yet.
func (r *Reconciler) deleteOrphans(ctx context.Context, snap *targets.Snapshot, node string) error {
	var orphans []unstructured.Unstructured
	for _, cr := range snap.CRs[node] {
		if remediationcr.Condition(&cr, remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected) == metav1.ConditionTrue &&
			remediationcr.Condition(&cr, remediationv1alpha1.RemediationConditionSucceeded) != metav1.ConditionTrue {
			continue // targets.KeptOrphanCR: its remediator deletes the node for good and is not done
		}
		orphans = append(orphans, cr)
	}
	if len(orphans) == 0 {
		return nil
	}
	if err := r.answerRequests(ctx, snap, node, orphans); err != nil {
		return err
	}
	return r.deleteAll(ctx, snap.Stored, node, orphans, "the node is gone or no longer selected")
}

func (r *Reconciler) event(nhc *remediationv1alpha1.NodeHealthCheck, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(nhc, nil, eventType, reason, action, note, args...)
	}
}

// nodeRelatedEvent emits an event regarding the NodeHealthCheck, as the public operator does, related
// to the node: the event recorder merges events of one reason, action, regarding and related object
// into one series that keeps the first note, which without the node would hide every other node's.
// One event per action: issue 15 counts every request a failure costs.
func (r *Reconciler) nodeRelatedEvent(nhc *remediationv1alpha1.NodeHealthCheck, node, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(nhc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, eventType, reason, action, note, args...)
	}
}

func (r *Reconciler) allNHCs(ctx context.Context, _ client.Object) []reconcile.Request {
	return watch.NHCRequests(ctx, r, nil)
}

// getLease reads the node's lease; nil when there is none. fresh reads around the cache, otherwise
// the lease cache is read.
func (r *Reconciler) getLease(ctx context.Context, node string, fresh bool) (*coordinationv1.Lease, error) {
	reader := r.leaseReader()
	if fresh {
		reader = r.reader()
	}
	lease := &coordinationv1.Lease{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: r.leaseNamespace(), Name: nodelease.Name(node)}, lease)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting lease of node %s: %w", node, err)
	}
	return lease, nil
}

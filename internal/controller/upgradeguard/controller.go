package upgradeguard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "upgradeguard"

// reconcileTimeout bounds one reconcile of either guard: a detector's read of a kind whose informer
// cannot sync (a conversion webhook down), or an API call that hangs, fails and is retried instead of
// pinning a worker for good; the detector keeps its last state meanwhile. Two minutes, as the
// remediation controller's: far beyond any healthy read.
const reconcileTimeout = 2 * time.Minute

// discoverRequest enables the detectors whose kinds are served, at start and whenever a CRD of
// their groups comes or goes.
const discoverRequest = "discover"

// +kubebuilder:rbac:groups=config.openshift.io,resources=clusterversions;infrastructures,verbs=get;list;watch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinehealthchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups=controlplane.cluster.x-k8s.io,resources=kubeadmcontrolplanes,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinedeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinehealthchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Guard evaluates the upgrade detectors and reports to the gate.
type Guard struct {
	client.Client
	// Mapper tells which kinds the API server serves.
	Mapper meta.RESTMapper
	// Gate receives every evaluation.
	Gate *upgrade.Gate
	// Recorder emits events on the objects that show a signal.
	Recorder events.EventRecorder
	// Clock tells the time (pause Lease expiry, when the gate first saw a signal).
	Clock clock.PassiveClock
	// ClusterAPI turns on the Cluster API rollout detector.
	ClusterAPI bool
	// PauseObject, when set, names the ConfigMap or Lease whose existence pauses new remediations.
	PauseObject types.NamespacedName

	pauseCache cache.Cache
	watcher    *watch.Dynamic
	mu         sync.Mutex
	served     map[string][]schema.GroupVersionKind // enabled detectors and the kinds they read
}

// SetupWithManager registers the controller: a discovery at start and on changes of CRDs of the
// detectors' groups, and, once enabled, each detector's kinds. The pause object is read through a
// cache of its own that holds only that object. MetricGate shows the state of Gate from now on.
func (g *Guard) SetupWithManager(mgr ctrl.Manager) error {
	g.served = map[string][]schema.GroupVersionKind{}
	metric.gate.Store(g.Gate)
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{ReconciliationTimeout: reconcileTimeout}).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: discoverRequest}})
			return nil
		})).
		WatchesMetadata(crd, crdChanged(), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return detectorGroup(e.Object.GetName()) },
			DeleteFunc: func(e event.DeleteEvent) bool { return detectorGroup(e.Object.GetName()) },
			// A new CRD is served only once Established, an update later.
			UpdateFunc:  func(e event.UpdateEvent) bool { return detectorGroup(e.ObjectNew.GetName()) },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}))
	if g.PauseObject.Name != "" {
		c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			DefaultNamespaces:    map[string]cache.Config{g.PauseObject.Namespace: {}},
			DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", g.PauseObject.Name)})
		if err != nil {
			return fmt.Errorf("creating the pause object cache: %w", err)
		}
		if err := mgr.Add(c); err != nil {
			return err
		}
		g.pauseCache = c
		b = b.WatchesRawSource(source.Kind[client.Object](c, &corev1.ConfigMap{}, enqueue(upgrade.DetectorPauseObject))).
			WatchesRawSource(source.Kind[client.Object](c, &coordinationv1.Lease{}, enqueue(upgrade.DetectorPauseObject)))
	}
	c, err := b.Build(g)
	if err != nil {
		return err
	}
	g.watcher = watch.NewDynamic(c, mgr.GetCache())
	return nil
}

// Reconcile runs the discovery or evaluates one detector.
func (g *Guard) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name == discoverRequest {
		return g.discover(ctx)
	}
	for _, d := range detectors {
		if d.name != req.Name {
			continue
		}
		g.mu.Lock()
		served, on := g.served[d.name]
		g.mu.Unlock()
		if !on {
			return ctrl.Result{}, nil
		}
		return g.evaluate(ctx, d, served)
	}
	return ctrl.Result{}, nil
}

// discover enables every detector that is wanted (by flag, or automatically because the API server
// serves one of its kinds), watches the kinds it reads, and evaluates it. The gate becomes known
// when every enabled detector has reported once.
func (g *Guard) discover(ctx context.Context) (ctrl.Result, error) {
	var errs []error
	var next time.Time
	for _, d := range detectors {
		if !d.auto && !g.flagged(d.name) {
			continue
		}
		served, err := g.servedKinds(d)
		if err != nil {
			// Whether the cluster is OpenShift cannot be told: stay unknown, which blocks.
			g.Gate.Expect(d.name)
			g.Gate.ReportError(d.name, err)
			errs = append(errs, err)
			continue
		}
		g.mu.Lock()
		_, known := g.served[d.name]
		g.mu.Unlock()
		if d.auto && len(served) == 0 && !known {
			continue // not OpenShift (yet); a detector once on stays on, and sees nothing
		}
		for _, gvk := range served {
			if _, err := g.watcher.Ensure(gvk, handler.EnqueueRequestsFromMapFunc(enqueueMap(d.name))); err != nil {
				errs = append(errs, err)
			}
		}
		g.mu.Lock()
		g.served[d.name] = served
		g.mu.Unlock()
		if !known {
			ctrl.LoggerFrom(ctx).Info("Upgrade detector enabled", "detector", d.name, "kinds", served)
		}
		g.Gate.Expect(d.name)
		res, err := g.evaluate(ctx, d, served)
		errs = append(errs, err)
		if res.RequeueAfter > 0 {
			next = health.Earliest(next, g.Clock.Now().Add(res.RequeueAfter))
		}
	}
	g.Gate.Discovered()
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: next.Sub(g.Clock.Now())}, nil
}

func (g *Guard) evaluate(ctx context.Context, d detector, served []schema.GroupVersionKind) (ctrl.Result, error) {
	at, err := d.evaluate(ctx, g, served)
	if err != nil {
		g.Gate.ReportError(d.name, err)
		return ctrl.Result{}, fmt.Errorf("evaluating upgrade detector %s: %w", d.name, err)
	}
	if at.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(at.Sub(g.Clock.Now()), time.Second)}, nil
}

// servedKinds returns the detector's kinds that the API server serves, at their preferred versions.
func (g *Guard) servedKinds(d detector) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, gk := range d.kinds {
		m, err := g.Mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("discovering %s: %w", gk, err)
		}
		out = append(out, m.GroupVersionKind)
	}
	return out, nil
}

func (g *Guard) flagged(name string) bool {
	switch name {
	case upgrade.DetectorClusterAPI:
		return g.ClusterAPI
	case upgrade.DetectorPauseObject:
		return g.PauseObject.Name != ""
	}
	return false
}

// report hands a detector's signals to the gate and emits an event on the object that shows each
// signal when it appears or goes.
func (g *Guard) report(ctx context.Context, detector string, signals []upgrade.Signal) {
	prev, before := g.Gate.Report(detector, signals, g.Clock.Now())
	log := ctrl.LoggerFrom(ctx).WithValues("detector", detector)
	for _, s := range signals {
		if !slices.ContainsFunc(prev, sameObject(s)) {
			log.Info("Upgrade detected, no new remediation starts", "signal", s.Message)
			g.event(s.Object, corev1.EventTypeNormal, remediationv1alpha1.EventReasonUpgradeDetected, "No new remediation starts: "+s.Message)
		}
	}
	if !before {
		return
	}
	for _, p := range prev {
		if !slices.ContainsFunc(signals, sameObject(p)) {
			log.Info("Upgrade signal gone", "signal", p.Message)
			g.event(p.Object, corev1.EventTypeNormal, remediationv1alpha1.EventReasonUpgradeEnded, "Upgrade signal gone, remediation resumes unless another holds it: "+p.Message)
		}
	}
}

// sameObject matches the signals shown by the same object as s.
func sameObject(s upgrade.Signal) func(upgrade.Signal) bool {
	return func(o upgrade.Signal) bool {
		if s.Object == nil || o.Object == nil {
			return s.Object == nil && o.Object == nil
		}
		return s.Object.Kind == o.Object.Kind && s.Object.Namespace == o.Object.Namespace && s.Object.Name == o.Object.Name
	}
}

func (g *Guard) event(obj *corev1.ObjectReference, eventType, reason, note string) {
	if g.Recorder == nil || obj == nil {
		return
	}
	g.Recorder.Eventf(obj, nil, eventType, reason, "Gate", "%s", note)
}

// detectorGroup reports whether a CRD name (plural.group) belongs to a group a detector reads.
func detectorGroup(crdName string) bool {
	return slices.ContainsFunc(detectors, func(d detector) bool {
		return slices.ContainsFunc(d.kinds, func(gk schema.GroupKind) bool { return strings.HasSuffix(crdName, "."+gk.Group) })
	})
}

func enqueueMap(name string) handler.MapFunc {
	return func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
}

func enqueue(name string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(enqueueMap(name))
}

// crdSettle is how long after a CRD change discovery looks once more: a CRD is served a moment after
// it is established, and no event says when.
const crdSettle = 2 * time.Second

// crdChanged enqueues a discovery at once and again after crdSettle.
func crdChanged() handler.EventHandler {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: discoverRequest}}
	both := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.Add(req)
		q.AddAfter(req, crdSettle)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			both(q)
		},
		UpdateFunc: func(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			both(q)
		},
		DeleteFunc: func(_ context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			both(q)
		},
	}
}

package nhc

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/dynamicwatch"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/templateaccess"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
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
	// Gate is the upgrade gate the upgradeguard controller feeds; nil: no upgrade awareness (tests of
	// this controller alone).
	Gate *upgrade.Gate
	// MaxPause bounds how long upgrade signals hold new remediations back; zero: no bound.
	MaxPause time.Duration
	// Templates reads remediation templates with the rights remediators grant; nil: through the
	// cache, watching every template kind (tests of this controller alone).
	Templates *templateaccess.Reader

	watcher *dynamicwatch.Watcher
	metrics metricsState
	// invalidLabels remembers nodes already warned about an empty exclusion label.
	invalidLabels sync.Map
}

// SetupWithManager registers the controller: NodeHealthChecks, Nodes (only changes of labels,
// annotations, conditions, cordoning or kubelet version; heartbeats are dropped), CRDs (a
// remediator installed later enables a disabled NodeHealthCheck at once) and the upgrade gate
// (waiting remediations start as soon as it opens).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Gate != nil {
		b = b.WatchesRawSource(source.Channel(r.Gate.Changes(), handler.EnqueueRequestsFromMapFunc(r.allNHCs)))
	}
	c, err := b.
		Named(ControllerName).
		For(&remediationv1alpha1.NodeHealthCheck{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allNHCs), builder.WithPredicates(NodeChangePredicate())).
		WatchesMetadata(crd, handler.EnqueueRequestsFromMapFunc(r.allNHCs), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return false },
		})).
		Build(r)
	if err != nil {
		return err
	}
	r.watcher = dynamicwatch.New(c, mgr.GetCache())
	return nil
}

// Reconcile evaluates one NodeHealthCheck: gather, decide, one status write when it changed, and a
// requeue at the next deadline.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
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
	nhc := stored.DeepCopy()
	remediationv1alpha1.SetDefaults(nhc) // objects admitted without the webhook
	now := r.Clock.Now()

	verdict := upgrade.Verdict{Known: true}
	if r.Gate != nil {
		verdict = r.Gate.Verdict()
	}
	problem, err := checkTemplates(ctx, r.templates(), &nhc.Spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conflict := verdict.MachineHealthChecks.Conflict; conflict != "" {
		problem = &templateProblem{remediationv1alpha1.ConditionReasonDisabledMHC, conflict}
	}
	unwatched, err := r.ensureWatches(ctx, &nhc.Spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	nodes, err := selectedNodes(ctx, r, &nhc.Spec.Selector)
	if err != nil {
		return ctrl.Result{}, err
	}
	crs, err := remediationcr.List(ctx, r, nhc)
	if err != nil {
		return ctrl.Result{}, err
	}

	in := health.Input{Now: now, UnhealthyConditions: nhc.Spec.UnhealthyConditions, MinHealthy: nhc.Spec.MinHealthy, MaxUnhealthy: nhc.Spec.MaxUnhealthy}
	if nhc.Spec.HealthyDelay != nil {
		in.HealthyDelay = &nhc.Spec.HealthyDelay.Duration
	}
	if nhc.Spec.StormCooldownDuration != nil {
		in.StormCooldown = &nhc.Spec.StormCooldownDuration.Duration
		in.Storm = stormState(stored.Status.Conditions)
	}
	healthySince := map[string]time.Time{}
	for _, e := range stored.Status.UnhealthyNodes {
		if e.ConditionsHealthyTimestamp != nil {
			healthySince[e.Name] = e.ConditionsHealthyTimestamp.Time
		}
	}
	for _, n := range nodes {
		_, confirmed := n.Annotations[remediationv1alpha1.ManuallyConfirmedHealthyAnnotation]
		in.Nodes = append(in.Nodes, health.Node{Name: n.Name, Conditions: n.Status.Conditions, Remediating: len(crs[n.Name]) > 0,
			HealthySince: healthySince[n.Name], ConfirmedHealthy: confirmed,
			Excluded: r.excluded(&n, stored), ControlPlane: remediationcr.IsControlPlane(n.Labels),
			LeftToMachineHealthCheck: upgrade.LeftToMachineHealthCheck(verdict.MachineHealthChecks, &n)})
	}
	up := r.upgradeOutcome(stored, verdict, nodes, crs, nhc.Spec.UnhealthyConditions, now)
	if problem != nil {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipDisabled, Message: problem.message})
	}
	if len(nhc.Spec.PauseRequests) > 0 {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipPaused, Message: fmt.Sprintf("paused by %q", nhc.Spec.PauseRequests)})
	}
	if up.Blocked != "" {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipUpgrade, Message: up.Blocked})
	}
	d := health.Decide(in)

	status := buildStatus(stored, d, crs, problem, up, now)
	if !equality.Semantic.DeepEqual(status, stored.Status) {
		updated := stored.DeepCopy()
		updated.Status = status
		if err := r.Status().Update(ctx, updated); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil // deleted meanwhile
			}
			return ctrl.Result{}, fmt.Errorf("updating status: %w", err) // a conflict: stale cache, retried

		}
		r.emitTransitionEvents(stored, updated, d)
		observeTransitions(stored.Name, &stored.Status, &updated.Status, unhealthySince(d), now)
		log.V(1).Info("Status updated", "phase", status.Phase, "observed", d.Observed, "healthy", d.Healthy, "minHealthy", d.MinHealthy)
	}

	r.metrics.syncOngoing(stored.Name, &status)

	next := d.Next
	if !up.Expires.IsZero() && (next.IsZero() || up.Expires.Before(next)) {
		next = up.Expires
	}
	if problem != nil && unwatched {
		// A template that cannot be watched may be created or fixed without an event.
		if at := now.Add(templateRecheck); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}, nil
}

// forget drops what is kept in memory about a deleted NodeHealthCheck.
func (r *Reconciler) forget(name string) {
	r.metrics.syncOngoing(name, nil)
	if r.Gate != nil {
		r.Gate.ReportNode(upgrade.DetectorNodeRollout, name, false)
		r.Gate.ReportNode(upgrade.DetectorMachineConfig, name, false)
	}
}

// templateRecheck is how soon a disabled NodeHealthCheck whose template kind cannot be watched
// looks at its templates again.
const templateRecheck = time.Minute

// ensureWatches starts watching each referenced template kind that may be watched (enqueue the
// NodeHealthChecks that reference it) and each remediation kind (enqueue the owning
// NodeHealthCheck), once per kind. It reports whether a template kind is not watched.
func (r *Reconciler) ensureWatches(ctx context.Context, spec *remediationv1alpha1.NodeHealthCheckSpec) (unwatched bool, err error) {
	for _, ref := range spec.TemplateRefs() {
		watchable := true
		if r.Templates != nil {
			if watchable, err = r.Templates.Watchable(ctx, ref.GroupVersionKind()); err != nil {
				return false, err
			}
		}
		if watchable {
			if _, err := r.watcher.Ensure(ref.GroupVersionKind(), r.nhcsReferencing); err != nil {
				return false, err
			}
		} else {
			unwatched = true
		}
		if _, err := r.watcher.Ensure(remediationcr.GVK(ref), ownerNHC); err != nil {
			return false, err
		}
	}
	return unwatched, nil
}

// templates returns how templates are read.
func (r *Reconciler) templates() templateGetter {
	if r.Templates != nil {
		return r.Templates
	}
	return r.Client
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
	return remediationcr.NHCRequests(ctx, r, match)
}

func ownerNHC(_ context.Context, cr client.Object) []reconcile.Request {
	if name, _, ok := remediationcr.ControllerNHC(cr); ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	return nil
}

// excluded reports whether the node's exclude-from-remediation label is "true". An empty value is a
// likely mistake (kubectl label node x key=): it is ignored, with a warning event once per node and
// value.
func (r *Reconciler) excluded(n *corev1.Node, nhc *remediationv1alpha1.NodeHealthCheck) bool {
	value, ok := n.Labels[remediationv1alpha1.ExcludeFromRemediationLabel]
	key := n.Name + "/" + nhc.Name
	if ok && value == "" {
		if _, seen := r.invalidLabels.LoadOrStore(key, true); !seen && r.Recorder != nil {
			r.Recorder.Eventf(n, nhc, corev1.EventTypeWarning, EventReasonInvalidNodeLabel, "Validate",
				"Label %s has an empty value and is ignored; set it to \"true\" to exclude the node from remediation", remediationv1alpha1.ExcludeFromRemediationLabel)
		}
		return false
	}
	r.invalidLabels.Delete(key)
	return value == "true"
}

func unhealthySince(d health.Decision) map[string]time.Time {
	out := map[string]time.Time{}
	for _, n := range d.Nodes {
		out[n.Name] = n.Health.UnhealthySince
	}
	return out
}

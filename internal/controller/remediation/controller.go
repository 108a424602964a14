package remediation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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
const ControllerName = "remediation"

// Event reasons, the public operator's.
const (
	EventReasonRemediationCreated = "RemediationCreated"
	EventReasonRemediationRemoved = "RemediationRemoved"
	EventReasonRemediationSkipped = "RemediationSkipped"
	EventReasonNoTemplateLeft     = "NoTemplateLeft"
	EventReasonOldRemediationCR   = "RemediationCRTooOld"
)

// OldRemediationAge is when a running remediation CR is flagged as too old: no remediator needs two
// days to fence or reboot a node, so one that did likely failed silently.
const OldRemediationAge = 48 * time.Hour

// MachineAnnotation on a Node names its Machine as "<namespace>/<name>" (OpenShift Machine API).
const MachineAnnotation = "machine.openshift.io/machine"

// +kubebuilder:rbac:groups=remediation.medik8s.io,resources=nodehealthchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create

// Reconciler creates and deletes remediation CRs as NodeHealthCheck status says. Templates and
// remediation CRs are read, created and deleted with the rights remediators grant through the
// aggregated ClusterRole (rbac.ext-remediation/aggregate-to-ext-remediation).
type Reconciler struct {
	client.Client
	// Clock tells the time; a fake clock in tests.
	Clock clock.PassiveClock
	// LeaseNamespace holds the node leases (DefaultLeaseNamespace when empty).
	LeaseNamespace string
	// APIReader reads around the cache. Used only right before creating a CR with a generated name,
	// which, unlike a deterministic name, the API server cannot refuse as a duplicate when the cache
	// is behind.
	APIReader client.Reader
	// Recorder emits events.
	Recorder events.EventRecorder
	// Templates reads remediation templates with the rights remediators grant; nil: through the cache.
	Templates *templateaccess.Reader
	// Gate is the upgrade gate; checked right before a first CR is created, because it may have
	// closed after the status approving the CR was written. nil: no upgrade awareness.
	Gate *upgrade.Gate
	// MaxPause bounds how long each upgrade signal holds new remediations back, as for the nhc
	// controller; zero: no bound.
	MaxPause time.Duration

	watcher *dynamicwatch.Watcher
	// reported remembers "first wins" skips already reported, so each is reported once (again after
	// a restart at most).
	reported sync.Map
}

// SetupWithManager registers the controller for NodeHealthChecks (spec and status), the upgrade gate
// (an approval held back by it starts when it opens) and, added as they are referenced, their
// remediation CR kinds.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Gate != nil {
		b = b.WatchesRawSource(source.Channel(r.Gate.Changes(), handler.EnqueueRequestsFromMapFunc(r.allNHCs)))
	}
	c, err := b.
		Named(ControllerName).
		For(&remediationv1alpha1.NodeHealthCheck{}).
		Build(r)
	if err != nil {
		return err
	}
	r.watcher = dynamicwatch.New(c, mgr.GetCache())
	return nil
}

// Reconcile makes the NodeHealthCheck's remediation CRs match its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nhc := &remediationv1alpha1.NodeHealthCheck{}
	if err := r.Get(ctx, req.NamespacedName, nhc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !nhc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // garbage collection removes the CRs with their owner
	}
	for _, ref := range nhc.Spec.TemplateRefs() {
		if _, err := r.watcher.Ensure(remediationcr.GVK(ref), ownerNHC); err != nil {
			return ctrl.Result{}, err
		}
	}
	crs, err := remediationcr.List(ctx, r, nhc)
	if err != nil {
		return ctrl.Result{}, err
	}

	entries := map[string]*remediationv1alpha1.UnhealthyNode{}
	for i := range nhc.Status.UnhealthyNodes {
		entries[nhc.Status.UnhealthyNodes[i].Name] = &nhc.Status.UnhealthyNodes[i]
	}

	now := r.Clock.Now()
	steps := escalationSteps(&nhc.Spec)
	var errs []error
	var next time.Time
	for _, node := range sortedKeys(crs) {
		at, err := r.tend(ctx, nhc, node, entries[node], steps, crs[node], now)
		next, errs = earliest(next, at), append(errs, err)
	}
	for _, e := range nhc.Status.UnhealthyNodes {
		if len(e.Remediations) > 0 || e.ConditionsHealthyTimestamp != nil || len(crs[e.Name]) > 0 {
			continue
		}
		at, err := r.start(ctx, nhc, e.Name, steps, now)
		next, errs = earliest(next, at), append(errs, err)
	}
	if next.IsZero() {
		return ctrl.Result{}, errors.Join(errs...)
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}, errors.Join(errs...)
}

// tend acts on a node that has CRs, as its status entry says: orphaned, healthy but delayed,
// healthy, or still remediating. It returns when it wants to look again.
func (r *Reconciler) tend(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, entry *remediationv1alpha1.UnhealthyNode,
	steps []health.Step, crs []unstructured.Unstructured, now time.Time) (time.Time, error) {
	switch {
	case entry == nil:
		return time.Time{}, errors.Join(r.deleteOrphans(ctx, nhc, node, crs), r.releaseLease(ctx, nhc, node))
	case entry.ConditionsHealthyTimestamp != nil && entry.HealthyDelayed != nil && *entry.HealthyDelayed:
		return time.Time{}, errors.Join(r.markHealthyDelay(ctx, crs, entry.ConditionsHealthyTimestamp.UTC().Format(time.RFC3339)), r.releaseLease(ctx, nhc, node))
	case entry.ConditionsHealthyTimestamp != nil:
		return time.Time{}, errors.Join(r.releaseConfirmation(ctx, node),
			r.deleteAll(ctx, nhc, node, crs, "the node is healthy again"), r.releaseLease(ctx, nhc, node))
	}
	errDelay := r.markHealthyDelay(ctx, crs, "") // failed again: the delay is over
	deadline, renewAt, errEscalate := r.escalate(ctx, nhc, node, steps, crs, now)
	flagAt, errFlag := r.flagOld(ctx, nhc, node, crs, now)
	return earliest(deadline, renewAt, flagAt), errors.Join(errDelay, errEscalate, errFlag)
}

// start creates an approved node's first CR once it holds the node's lease, unless the
// NodeHealthCheck was paused, disabled or held back by an upgrade since the approval. It returns when
// to look again.
func (r *Reconciler) start(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, steps []health.Step, now time.Time) (time.Time, error) {
	if len(nhc.Spec.PauseRequests) > 0 || meta.IsStatusConditionTrue(nhc.Status.Conditions, remediationv1alpha1.ConditionTypeDisabled) || r.upgradeHolds(nhc, now) {
		return time.Time{}, nil
	}
	first := health.Escalate(steps, nil, now).Next
	if first == nil {
		return time.Time{}, nil
	}
	if retryAt, blocked, err := r.etcdGuard(ctx, nhc, node, now); blocked || err != nil {
		return retryAt, err
	}
	lease, err := r.takeLease(ctx, nhc, node, leaseDuration(first.Timeout), now, now)
	if err != nil {
		return time.Time{}, err
	}
	if !lease.held {
		r.leaseBusy(nhc, node, lease)
		return lease.expires, nil
	}
	return lease.renewAt, r.create(ctx, nhc, node, stepTemplate(&nhc.Spec, *first))
}

// upgradeHolds reports whether an upgrade holds new remediations back: the NodeHealthCheck's
// UpgradeInProgress condition is not False, or the gate blocks at now although the condition did not
// say so yet (a signal appeared after the status was written, also after an earlier pause expired,
// or the operator just started). Signals whose maximum pause has passed do not hold.
func (r *Reconciler) upgradeHolds(nhc *remediationv1alpha1.NodeHealthCheck, now time.Time) bool {
	c := meta.FindStatusCondition(nhc.Status.Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress)
	if c != nil && c.Status != metav1.ConditionFalse {
		return true
	}
	return r.Gate != nil && r.Gate.Verdict().Blocking(r.MaxPause, now)
}

// etcdRetry is how soon a control-plane node blocked by the etcd guard is looked at again: etcd
// members come back within about a minute after a reboot, and the guard pods follow them.
const etcdRetry = time.Minute

// etcdGuard keeps a control-plane node on OpenShift from being remediated while that could break
// etcd quorum; it says so in an event and retries in a minute.
func (r *Reconciler) etcdGuard(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, now time.Time) (time.Time, bool, error) {
	n := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return time.Time{}, false, client.IgnoreNotFound(err)
	}
	if !remediationcr.IsControlPlane(n.Labels) {
		return time.Time{}, false, nil
	}
	openShift, err := r.isOpenShift()
	if err != nil || !openShift {
		return time.Time{}, err != nil, err
	}
	ok, why, err := r.etcdAllowsRemediation(ctx, node)
	if err != nil {
		return time.Time{}, true, err
	}
	if ok {
		ctrl.LoggerFrom(ctx).Info("etcd quorum allows remediating the control-plane node", "node", node)
		return time.Time{}, false, nil
	}
	if _, seen := r.reported.LoadOrStore("etcd/"+string(nhc.UID)+"/"+node+"/"+why, true); !seen {
		r.event(nhc, corev1.EventTypeWarning, EventReasonRemediationSkipped, "Skip", "Not remediating control-plane node %s yet: %s", node, why)
	}
	return now.Add(etcdRetry), true, nil
}

// earliest returns the earliest non-zero time, or zero.
func earliest(times ...time.Time) time.Time {
	var out time.Time
	for _, t := range times {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

// escalate moves a running remediation on when its step timed out or failed: it marks the step's CR
// with the nhc-timed-out annotation and creates the next step's CR. It returns when the running step
// times out.
func (r *Reconciler) escalate(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, steps []health.Step, crs []unstructured.Unstructured, now time.Time) (deadline, renewAt time.Time, err error) {
	stepCRs := make([]health.StepCR, 0, len(crs))
	for i := range crs {
		mark := crs[i].GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]
		markedAt, _ := time.Parse(time.RFC3339, mark)
		stepCRs = append(stepCRs, health.StepCR{
			TemplateKind: crs[i].GetKind() + remediationv1alpha1.TemplateSuffix,
			TemplateName: crs[i].GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation],
			Created:      crs[i].GetCreationTimestamp().Time,
			TimedOut:     mark != "",
			TimedOutAt:   markedAt,
			Succeeded:    remediationcr.Condition(&crs[i], remediationv1alpha1.RemediationConditionSucceeded),
		})
	}
	e := health.Escalate(steps, stepCRs, now)

	// Hold the node's lease for the step that runs from now on.
	leaseStep, stepStart := e.Current, e.Started
	if e.Next != nil {
		leaseStep, stepStart = e.Next, now
	}
	if leaseStep != nil {
		lease, err := r.takeLease(ctx, nhc, node, leaseDuration(leaseStep.Timeout), stepStart, now)
		if err != nil {
			return time.Time{}, time.Time{}, err
		}
		renewAt = lease.renewAt
		if !lease.held {
			renewAt = lease.expires
			r.leaseBusy(nhc, node, lease)
		}
		// A remediation that outlives its lease many times over is stuck: time it out.
		if lease.overdue && e.Next == nil && len(e.TimeOut) == 0 && !e.Exhausted {
			for i := range stepCRs {
				if !stepCRs[i].TimedOut && stepCRs[i].TemplateKind == e.Current.TemplateKind && stepCRs[i].TemplateName == e.Current.TemplateName {
					e.TimeOut = append(e.TimeOut, i)
					ctrl.LoggerFrom(ctx).Info("Node lease overdue, timing out the remediation", "node", node)
				}
			}
			// The next reconcile starts the next step; with none, nothing is left now.
			e.Exhausted = !slices.ContainsFunc(steps, func(s health.Step) bool { return s.Order > e.Current.Order })
		}
	}

	for _, i := range e.TimeOut {
		cr := &crs[i]
		patch := client.MergeFrom(cr.DeepCopy())
		annotations := cr.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[remediationv1alpha1.NHCTimedOutAnnotation] = now.UTC().Format(time.RFC3339)
		cr.SetAnnotations(annotations)
		if err := r.Patch(ctx, cr, patch); err != nil {
			return time.Time{}, renewAt, fmt.Errorf("marking %s %s/%s timed out: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
		}
		ctrl.LoggerFrom(ctx).Info("Remediation timed out", "node", node, "kind", cr.GetKind(), "name", cr.GetName())
		if e.Exhausted {
			r.event(nhc, corev1.EventTypeWarning, EventReasonNoTemplateLeft, "Escalate",
				"Node %s is still unhealthy and its last remediation (%s) timed out or failed: no remediation template is left; the node stays listed until it recovers or is deleted",
				node, cr.GetKind())
		}
	}
	if e.Next != nil {
		return e.Deadline, renewAt, r.create(ctx, nhc, node, stepTemplate(&nhc.Spec, *e.Next))
	}
	return e.Deadline, renewAt, nil
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
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		patch := client.MergeFrom(cr.DeepCopy())
		annotations := cr.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[remediationv1alpha1.OldRemediationCRAnnotation] = "true"
		cr.SetAnnotations(annotations)
		if err := r.Patch(ctx, cr, patch); err != nil {
			return next, fmt.Errorf("flagging %s %s/%s as old: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err)
		}
		oldRemediationCR.WithLabelValues(cr.GetName(), cr.GetNamespace()).Inc()
		r.event(nhc, corev1.EventTypeWarning, EventReasonOldRemediationCR, "Flag",
			"%s %s/%s for node %s has been running for more than %s; check its remediator", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node, OldRemediationAge)
	}
	return next, nil
}

// leaseBusy reports, once per holder, that another party holds the node's lease.
func (r *Reconciler) leaseBusy(nhc *remediationv1alpha1.NodeHealthCheck, node string, lease leaseResult) {
	if _, seen := r.reported.LoadOrStore("lease/"+string(nhc.UID)+"/"+node+"/"+lease.otherHolder, true); seen {
		return
	}
	r.event(nhc, corev1.EventTypeWarning, EventReasonRemediationSkipped, "Skip",
		"Node %s is leased by %s until %s (for example for maintenance); remediation waits for the lease", node, lease.otherHolder, lease.expires.UTC().Format(time.RFC3339))
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
		patch := client.MergeFrom(cr.DeepCopy())
		annotations := cr.GetAnnotations()
		if since == "" {
			delete(annotations, remediationv1alpha1.HealthyDelayAnnotation)
		} else {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[remediationv1alpha1.HealthyDelayAnnotation] = since
		}
		cr.SetAnnotations(annotations)
		if err := r.Patch(ctx, cr, patch); client.IgnoreNotFound(err) != nil {
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
	patch := []byte(`{"metadata":{"annotations":{"` + remediationv1alpha1.ManuallyConfirmedHealthyAnnotation + `":null}}}`)
	if err := r.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the manual confirmation from node %s: %w", nodeName, err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed manual confirmation", "node", nodeName)
	return nil
}

// escalationSteps returns the spec's remediation steps: the escalation steps, or the single
// template, which never times out.
func escalationSteps(spec *remediationv1alpha1.NodeHealthCheckSpec) []health.Step {
	if spec.RemediationTemplate != nil {
		return []health.Step{{TemplateKind: spec.RemediationTemplate.Kind, TemplateName: spec.RemediationTemplate.Name}}
	}
	steps := make([]health.Step, 0, len(spec.EscalatingRemediations))
	for _, e := range spec.EscalatingRemediations {
		steps = append(steps, health.Step{TemplateKind: e.RemediationTemplate.Kind, TemplateName: e.RemediationTemplate.Name, Order: e.Order, Timeout: e.Timeout.Duration})
	}
	return steps
}

// stepTemplate returns the template reference of a step.
func stepTemplate(spec *remediationv1alpha1.NodeHealthCheckSpec, step health.Step) corev1.ObjectReference {
	for _, ref := range spec.TemplateRefs() {
		if ref.Kind == step.TemplateKind && ref.Name == step.TemplateName {
			return ref
		}
	}
	return corev1.ObjectReference{}
}

// create creates the node's remediation CR from the template. A node's first CR is not created
// when the NodeHealthCheck was paused or disabled since the approval; escalation continues (running
// remediations are not stopped by a pause).
func (r *Reconciler) create(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, ref corev1.ObjectReference) error {
	log := ctrl.LoggerFrom(ctx).WithValues("node", node)
	if meta.IsStatusConditionTrue(nhc.Status.Conditions, remediationv1alpha1.ConditionTypeDisabled) {
		return nil
	}
	template := &unstructured.Unstructured{}
	template.SetGroupVersionKind(ref.GroupVersionKind())
	var getTemplate func(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error = r.Get
	if r.Templates != nil {
		getTemplate = r.Templates.Get
	}
	if err := getTemplate(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, template); err != nil {
		return fmt.Errorf("getting template %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	machine, err := r.machineOwner(ctx, node, template.GetNamespace())
	if err != nil {
		return err
	}
	cr, err := remediationcr.Build(template, nhc, node, machine)
	if err != nil {
		return err
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
	if err != nil {
		return fmt.Errorf("creating %s for node %s: %w", cr.GetKind(), node, err)
	}
	log.Info("Created remediation", "kind", cr.GetKind(), "name", cr.GetName())
	r.event(nhc, corev1.EventTypeNormal, EventReasonRemediationCreated, "Create", "Created %s %s/%s for node %s", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node)
	r.nodeEvent(node, nhc, corev1.EventTypeNormal, EventReasonRemediationCreated, "Create", "NodeHealthCheck %s created %s %s/%s", nhc.Name, cr.GetKind(), cr.GetNamespace(), cr.GetName())
	return nil
}

// stepCRExists reports, reading around the cache, whether the NodeHealthCheck already has a CR of
// this kind and template for the node.
func (r *Reconciler) stepCRExists(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, cr *unstructured.Unstructured) (bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(cr.GroupVersionKind().GroupVersion().WithKind(cr.GetKind() + "List"))
	if err := reader.List(ctx, list, client.InNamespace(cr.GetNamespace())); err != nil {
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

// explainExisting handles a CR that already has the name: ours (a stale cache; nothing to do), or
// another NodeHealthCheck's, which then remediates the node first ("first wins").
func (r *Reconciler) explainExisting(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, cr *unstructured.Unstructured) error {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(cr.GroupVersionKind())
	if err := r.Get(ctx, client.ObjectKeyFromObject(cr), existing); err != nil {
		return client.IgnoreNotFound(err) // our cache is behind; the next event retries
	}
	if name, uid, ok := remediationcr.ControllerNHC(existing); ok && uid != nhc.UID {
		if _, seen := r.reported.LoadOrStore(string(nhc.UID)+"/"+string(existing.GetUID()), true); seen {
			return nil
		}
		r.event(nhc, corev1.EventTypeWarning, EventReasonRemediationSkipped, "Skip",
			"Node %s is already remediated by NodeHealthCheck %s (%s %s/%s); do the NodeHealthChecks select overlapping nodes?",
			remediationcr.NodeName(cr), name, existing.GetKind(), existing.GetNamespace(), existing.GetName())
	}
	return nil
}

// machineOwner returns an owner reference to the node's Machine when the node names one in the
// template's namespace and it exists.
func (r *Reconciler) machineOwner(ctx context.Context, nodeName, namespace string) (*metav1.OwnerReference, error) {
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	ns, name, found := strings.Cut(node.Annotations[MachineAnnotation], "/")
	if !found || ns != namespace || name == "" {
		return nil, nil
	}
	machine := &metav1.PartialObjectMetadata{}
	machine.SetGroupVersionKind(machineGVK)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, machine); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting machine %s/%s: %w", ns, name, err)
	}
	return &metav1.OwnerReference{APIVersion: machineGVK.GroupVersion().String(), Kind: machineGVK.Kind, Name: name, UID: machine.UID}, nil
}

// deleteAll deletes the node's CRs.
func (r *Reconciler) deleteAll(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, crs []unstructured.Unstructured, why string) error {
	var errs []error
	for i := range crs {
		cr := &crs[i]
		if !cr.GetDeletionTimestamp().IsZero() {
			continue // being deleted; the remediator's finalizer decides when it is gone
		}
		if err := r.Delete(ctx, cr, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting %s %s/%s: %w", cr.GetKind(), cr.GetNamespace(), cr.GetName(), err))
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleted remediation", "node", node, "kind", cr.GetKind(), "name", cr.GetName(), "why", why)
		r.event(nhc, corev1.EventTypeNormal, EventReasonRemediationRemoved, "Delete", "Deleted %s %s/%s of node %s: %s", cr.GetKind(), cr.GetNamespace(), cr.GetName(), node, why)
		r.nodeEvent(node, nhc, corev1.EventTypeNormal, EventReasonRemediationRemoved, "Delete", "NodeHealthCheck %s deleted %s %s/%s: %s", nhc.Name, cr.GetKind(), cr.GetNamespace(), cr.GetName(), why)
	}
	return errors.Join(errs...)
}

// deleteOrphans deletes the CRs of a node the NodeHealthCheck no longer lists (deleted or no longer
// selected), except CRs whose remediator deletes the node for good and is not done yet.
func (r *Reconciler) deleteOrphans(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, crs []unstructured.Unstructured) error {
	var orphans []unstructured.Unstructured
	for _, cr := range crs {
		if remediationcr.Condition(&cr, remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected) == metav1.ConditionTrue &&
			remediationcr.Condition(&cr, remediationv1alpha1.RemediationConditionSucceeded) != metav1.ConditionTrue {
			continue
		}
		orphans = append(orphans, cr)
	}
	return r.deleteAll(ctx, nhc, node, orphans, "the node is gone or no longer selected")
}

func (r *Reconciler) event(nhc *remediationv1alpha1.NodeHealthCheck, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(nhc, nil, eventType, reason, action, note, args...)
	}
}

// nodeEvent emits an event regarding the node, so `kubectl describe node` tells the story too.
func (r *Reconciler) nodeEvent(node string, nhc *remediationv1alpha1.NodeHealthCheck, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, nhc, eventType, reason, action, note, args...)
	}
}

var machineGVK = schema.GroupVersionKind{Group: "machine.openshift.io", Version: "v1beta1", Kind: "Machine"}

func (r *Reconciler) allNHCs(ctx context.Context, _ client.Object) []reconcile.Request {
	return remediationcr.NHCRequests(ctx, r, nil)
}

func ownerNHC(_ context.Context, cr client.Object) []reconcile.Request {
	if name, _, ok := remediationcr.ControllerNHC(cr); ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

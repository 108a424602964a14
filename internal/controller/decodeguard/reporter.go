package decodeguard

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// ControllerName names the Reporter in logs, metrics and events.
const ControllerName = "nodehealthcheck-decodeguard"

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reporter emits an InvalidSpec event for each NodeHealthCheck in its Registry, once per uid and
// decode error (again after a restart at most). It runs on the leader only, like the other
// controllers, so one replica reports.
type Reporter struct {
	// Registry is the set to report, from RegistryOf(mgr.GetCache()).
	Registry *Registry
	// Recorder emits events.
	Recorder events.EventRecorder

	mu sync.Mutex
	// reported holds, per name, the uid and error last reported.
	reported map[string]Entry
}

// SetupWithManager registers the Reporter; it reconciles the whole set whenever it changes, and once
// when it starts.
func (r *Reporter) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{ReconciliationTimeout: reconcileTimeout}).
		WatchesRawSource(source.Channel(r.Registry.Changes(), handler.EnqueueRequestsFromMapFunc(
			func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{reportRequest} }))).
		Complete(r)
}

// reconcileTimeout bounds one reconcile: the Reporter reads nothing from the API server and only
// queues events, so it never comes near; every controller of the manager has a deadline, so that no
// worker can wait for ever on a read that cannot complete. Two minutes, as the other controllers'.
const reconcileTimeout = 2 * time.Minute

// reportRequest is the Reporter's one request: each reconcile looks at the whole set.
var reportRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "undecodable-nodehealthchecks"}}

// Reconcile reports the NodeHealthChecks that newly cannot be decoded, and forgets those that can
// again (or were deleted), so a NodeHealthCheck that breaks again is reported again.
func (r *Reporter) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported == nil {
		r.reported = map[string]Entry{}
	}
	current := map[string]bool{}
	for _, e := range r.Registry.List() {
		current[e.Name] = true
		if old, ok := r.reported[e.Name]; ok && old.UID == e.UID && old.Error == e.Error {
			continue
		}
		regarding := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: remediationv1alpha1.GroupVersion.String(), Kind: "NodeHealthCheck"},
			ObjectMeta: metav1.ObjectMeta{Name: e.Name, UID: e.UID, ResourceVersion: e.ResourceVersion},
		}
		r.Recorder.Eventf(regarding, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonInvalidSpec, "Decode",
			"The operator cannot read this NodeHealthCheck and ignores it until it is fixed: nothing is evaluated or remediated for it, "+
				"and its remediation CRs are left as they are. Correct the field named here (a number too large for its field, "+
				"a duration that is not a Go duration such as \"300s\", or a value of the wrong type): %s", e.Error)
		r.reported[e.Name] = e
	}
	for name := range r.reported {
		if !current[name] {
			delete(r.reported, name)
		}
	}
	return ctrl.Result{}, nil
}

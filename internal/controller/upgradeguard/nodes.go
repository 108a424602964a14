package upgradeguard

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/notify"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// NodeControllerName names the node-level detectors' controller in logs and metrics.
const NodeControllerName = "upgradeguard-nodes"

// +kubebuilder:rbac:groups=remediation.medik8s.io,resources=nodehealthchecks,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// NodeGuard evaluates the node-level upgrade detectors for each NodeHealthCheck (a kubelet rolling
// upgrade among its nodes, when that detector is on; on OpenShift, a MachineConfig update of a node
// about to be remediated) and records in the gate when each of its signals began
// (upgrade.Gate.NodeSignals). The nhc and remediation controllers find the same signals in their
// own snapshots, so a new signal holds new remediations back at once, and read when each began
// (upgrade.Gate.NodeSince) for the maximum pause; one the NodeGuard has not recorded yet begins at
// their now.
type NodeGuard struct {
	client.Client
	// Gate receives the node-level signals of every NodeHealthCheck; its verdict says which
	// node-level detectors are on.
	Gate *upgrade.Gate
	// Clock tells the time (when the gate first saw a signal).
	Clock clock.PassiveClock
	// Wiring is what it reads the NodeHealthChecks' nodes and remediation CRs with
	// (watch.NewWiring, over the sources the other controllers read): the remediation CRs of a kind
	// that may not be listed and watched are not read, as in the nhc controller's snapshot.
	Wiring *watch.Wiring
}

// SetupWithManager registers the controller: NodeHealthChecks (a new spec, new annotations, created
// or deleted), the node changes the nhc controller sees, the remediation CRs of the kinds read (a
// node with a CR of its NodeHealthCheck is no longer about to be remediated) and the gate (the
// node-level detectors turn on with OpenShift).
func (n *NodeGuard) SetupWithManager(mgr ctrl.Manager) error {
	wired := n.Wiring != nil && n.Wiring.Gatherer != nil && n.Wiring.Routes != nil && n.Wiring.Kinds != nil
	if err := watch.Require(NodeControllerName, watch.Dependency{Name: "Client", Set: n.Client != nil}, watch.Dependency{Name: "Gate", Set: n.Gate != nil},
		watch.Dependency{Name: "Clock", Set: n.Clock != nil}, watch.Dependency{Name: "Wiring", Set: wired}); err != nil {
		return err
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(NodeControllerName).
		For(&remediationv1alpha1.NodeHealthCheck{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Node{}, n.Wiring.Routes.NodeEvents(), builder.WithPredicates(watch.NodeChangePredicate())).
		WatchesRawSource(notify.Source(n.Gate.Changes(), handler.EnqueueRequestsFromMapFunc(n.allNHCs))).
		WithOptions(controller.Options{ReconciliationTimeout: reconcileTimeout}).
		Build(n)
	if err != nil {
		return err
	}
	n.Wiring.Bind(c, handler.EnqueueRequestsFromMapFunc(controllingNHC))
	return nil
}

// Reconcile records the node-level signals of one NodeHealthCheck, and forgets them when it is gone.
// It looks again when a node being updated becomes unhealthy.
func (n *NodeGuard) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	stored := &remediationv1alpha1.NodeHealthCheck{}
	if err := n.Get(ctx, req.NamespacedName, stored); err != nil {
		if apierrors.IsNotFound(err) {
			n.Gate.ForgetNodeSignals(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !stored.DeletionTimestamp.IsZero() {
		n.Gate.ForgetNodeSignals(req.Name)
		return ctrl.Result{}, nil
	}
	now := n.Clock.Now()
	signals, next, err := n.Wiring.Gatherer.UpgradeNodeSignals(ctx, stored, n.Gate.Verdict(), now)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("gathering node-level upgrade signals: %w", err)
	}
	n.Gate.NodeSignals(stored.Name, signals, now)
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}, nil
}

func (n *NodeGuard) allNHCs(ctx context.Context, _ client.Object) []reconcile.Request {
	return watch.NHCRequests(ctx, n, nil)
}

// controllingNHC maps a remediation CR to the NodeHealthCheck that controls it.
func controllingNHC(_ context.Context, cr client.Object) []reconcile.Request {
	if name, _, ok := remediationcr.ControllerNHC(cr); ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	return nil
}

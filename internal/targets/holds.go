package targets

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/openshift"
)

// What holds a node back besides the NodeHealthCheck's own rules: a node lease another party holds
// (a maintenance operator, another NodeHealthCheck), and, for a control-plane node on OpenShift, the
// etcd guard. Both are read for the nodes whose decision could create a CR or time one out now
// (health.Input.MayAct), so that the status writer and the remediation controller decide from the
// same facts: a node held back is listed without remediations and with the holder's name, and an
// escalation is held exactly as a first step is.

// EtcdChecker tells, for control-plane nodes, why disrupting them now could break etcd quorum.
type EtcdChecker interface {
	// Objections returns, per node that may not be disrupted now, why; nodes not named may be.
	Objections(ctx context.Context, nodes []string) (map[string]string, error)
}

// EtcdReader is the EtcdChecker of a cluster: on OpenShift (the API server serves
// config.openshift.io) it reads the disruption budgets and guard pods in openshift-etcd around the
// cache and applies medik8s/common's rules (lease.EtcdBudget, lease.EtcdGuardPod); elsewhere it
// objects to nothing. The reads happen only while a control-plane node could be remediated or
// escalated now: a cluster-wide pod informer would cost far more.
type EtcdReader struct {
	// Reader reads around the cache.
	Reader client.Reader
	// Mapper tells whether config.openshift.io is served; it refreshes discovery on a miss.
	Mapper meta.RESTMapper
}

// The etcd guard lists, around the cache, the disruption budgets and guard pods in openshift-etcd.
// (RBAC markers must stand apart from doc comments: controller-gen ignores them there.)
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// Objections implements EtcdChecker. Only "no such kind" means not OpenShift: any other discovery
// error is returned, so that a control-plane node is never remediated without the etcd check just
// because discovery hiccupped.
func (e *EtcdReader) Objections(ctx context.Context, nodes []string) (map[string]string, error) {
	_, err := e.Mapper.RESTMapping(openshift.ClusterVersion.GroupKind())
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovering whether this is OpenShift: %w", err)
	}
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := e.Reader.List(ctx, pdbs, client.InNamespace(lease.EtcdNamespace)); err != nil {
		return nil, fmt.Errorf("listing etcd disruption budgets: %w", err)
	}
	allowed, guards, why := lease.EtcdBudget(pdbs.Items)
	if allowed {
		return nil, nil
	}
	out := map[string]string{}
	if guards == nil {
		for _, node := range nodes {
			out[node] = why
		}
		return out, nil
	}
	selector, _ := metav1.LabelSelectorAsSelector(guards) // checked by EtcdBudget
	pods := &corev1.PodList{}
	if err := e.Reader.List(ctx, pods, client.InNamespace(lease.EtcdNamespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("listing etcd guard pods: %w", err)
	}
	for _, node := range nodes {
		if ok, why := lease.EtcdGuardPod(pods.Items, node); !ok {
			out[node] = why
		}
	}
	return out, nil
}

// addHolds reads the leases of the nodes that may act now, and the etcd guard's objections for the
// control-plane ones among them, into the decision's input.
func (g *Gatherer) addHolds(ctx context.Context, s *Snapshot, in *health.Input) error {
	candidates := in.MayAct()
	if len(candidates) == 0 || (g.Leases == nil && g.Etcd == nil && g.Refusals == nil) {
		return nil
	}
	var controlPlane []string
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if !slices.Contains(candidates, n.Name) {
			continue
		}
		if g.Leases != nil {
			l := &coordinationv1.Lease{}
			err := g.Leases.Get(ctx, client.ObjectKey{Namespace: g.leaseNamespace(), Name: lease.Name(n.Name)}, l)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("reading the lease of node %s: %w", n.Name, err)
			default:
				if held, until := lease.ForeignHold(l, lease.Holder(s.Stored.Name), s.Now); held {
					n.LeasedBy, n.LeasedUntil = lease.HolderOf(l), until
				}
			}
		}
		n.Refused, n.RefusedUntil, _ = g.Refusals.Held(s.Stored.UID, n.Name, s.Now)
		if n.ControlPlane {
			controlPlane = append(controlPlane, n.Name)
		}
	}
	if g.Etcd == nil || len(controlPlane) == 0 {
		return nil
	}
	objections, err := g.Etcd.Objections(ctx, controlPlane)
	if err != nil {
		return err
	}
	for i := range in.Nodes {
		in.Nodes[i].EtcdGuard = objections[in.Nodes[i].Name]
	}
	return nil
}

func (g *Gatherer) leaseNamespace() string {
	if g.LeaseNamespace == "" {
		return lease.DefaultNamespace
	}
	return g.LeaseNamespace
}

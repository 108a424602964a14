package remediation

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/openshift"
)

// OpenShift's etcd quorum protection: a PodDisruptionBudget over one guard pod per control-plane node
// in the etcd namespace. A control-plane node is remediated only while the budget allows a
// disruption, or when the node's guard pod is not ready anyway (its etcd member is already down).
const (
	// EtcdNamespace is where OpenShift runs etcd and its quorum guard.
	EtcdNamespace = "openshift-etcd"
	// EtcdGuardLabel selects the guard pods ("app=guard").
	etcdGuardLabelKey, etcdGuardLabelValue = "app", "guard"
)

// isOpenShift reports whether the API server serves config.openshift.io. The RESTMapper caches
// discovery and refreshes it on a miss, so a group that appears later is seen. Only "no such kind"
// means not OpenShift: any other error (discovery failing under load, say) is returned, so that a
// control-plane node is never remediated without the etcd check just because discovery hiccupped.
func (r *Reconciler) isOpenShift() (bool, error) {
	_, err := r.RESTMapper().RESTMapping(openshift.ClusterVersion.GroupKind())
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering whether this is OpenShift: %w", err)
	}
	return true, nil
}

// The etcd guard lists, around the cache, the disruption budgets and guard pods in openshift-etcd.
// (RBAC markers must stand apart from doc comments: controller-gen ignores them there.)
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// etcdAllowsRemediation reports whether remediating the control-plane node keeps etcd quorum, and
// why not. Reads go around the cache: they happen only when a control-plane node is about to be
// remediated, and a cluster-wide pod informer would cost far more.
func (r *Reconciler) etcdAllowsRemediation(ctx context.Context, node string) (bool, string, error) {
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := r.reader().List(ctx, pdbs, client.InNamespace(EtcdNamespace)); err != nil {
		return false, "", fmt.Errorf("listing etcd disruption budgets: %w", err)
	}
	for _, pdb := range pdbs.Items {
		if pdb.Status.DisruptionsAllowed >= 1 {
			return true, "", nil
		}
	}
	pods := &corev1.PodList{}
	if err := r.reader().List(ctx, pods, client.InNamespace(EtcdNamespace), client.MatchingLabels{etcdGuardLabelKey: etcdGuardLabelValue}); err != nil {
		return false, "", fmt.Errorf("listing etcd guard pods: %w", err)
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != node {
			continue
		}
		if !podReady(&pod) {
			return true, "", nil // this node's etcd member is already down: remediating it costs no quorum
		}
		return false, fmt.Sprintf("the etcd disruption budget allows no disruption and the etcd guard pod %s of node %s is ready: remediating it could break etcd quorum", pod.Name, node), nil
	}
	return false, fmt.Sprintf("the etcd disruption budget allows no disruption and node %s has no etcd guard pod to tell whether its member is down", node), nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

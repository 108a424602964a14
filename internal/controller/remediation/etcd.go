package remediation

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/openshift"
)

// OpenShift's etcd quorum protection: one PodDisruptionBudget over one guard pod per control-plane
// node in the etcd namespace. A control-plane node is remediated only while the budget allows a
// disruption, or when the node's guard pod says its etcd member is down already (or it has none).
// These are the rules of medik8s/common's etcd check, which the public operator uses.
const (
	// EtcdNamespace is where OpenShift runs etcd and its quorum guard.
	EtcdNamespace = "openshift-etcd"
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
// why not, by medik8s/common's rules: exactly one disruption budget in openshift-etcd (none or more
// is a cluster the check does not understand: no); it allows a disruption: yes; else the node's guard
// pod (selected by the budget) is Ready True or Unknown, so its member counts for quorum: no; Ready
// False, no Ready condition or no guard pod on the node: yes. Reads go around the cache: they happen
// only when a control-plane node is about to be remediated, and a cluster-wide pod informer would
// cost far more.
func (r *Reconciler) etcdAllowsRemediation(ctx context.Context, node string) (bool, string, error) {
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := r.reader().List(ctx, pdbs, client.InNamespace(EtcdNamespace)); err != nil {
		return false, "", fmt.Errorf("listing etcd disruption budgets: %w", err)
	}
	if len(pdbs.Items) != 1 {
		return false, fmt.Sprintf("%s holds %d PodDisruptionBudgets, not the one etcd guard budget: the etcd quorum cannot be told", EtcdNamespace, len(pdbs.Items)), nil
	}
	pdb := &pdbs.Items[0]
	if pdb.Status.DisruptionsAllowed >= 1 {
		return true, "", nil
	}
	selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || pdb.Spec.Selector == nil {
		return false, fmt.Sprintf("the etcd disruption budget %s allows no disruption and has no usable pod selector", pdb.Name), nil
	}
	pods := &corev1.PodList{}
	if err := r.reader().List(ctx, pods, client.InNamespace(EtcdNamespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return false, "", fmt.Errorf("listing etcd guard pods: %w", err)
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != node {
			continue
		}
		if ready := podReady(&pod); ready == corev1.ConditionTrue || ready == corev1.ConditionUnknown {
			return false, fmt.Sprintf("the etcd disruption budget allows no disruption and the etcd guard pod %s of node %s is Ready=%s: remediating it could break etcd quorum", pod.Name, node, ready), nil
		}
		return true, "", nil // this node's etcd member is already down: remediating it costs no quorum
	}
	return true, "", nil // no guard pod on the node: no etcd member there to lose
}

// podReady returns the status of the pod's Ready condition, "" without one.
func podReady(pod *corev1.Pod) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

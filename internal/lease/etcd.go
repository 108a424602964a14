package lease

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdNamespace is where OpenShift runs etcd and its quorum guard: one PodDisruptionBudget over one
// guard pod per control-plane node.
const EtcdNamespace = "openshift-etcd"

// EtcdBudget applies the first half of medik8s/common's etcd rule to the disruption budgets in
// EtcdNamespace: exactly one budget (none or more is a cluster the check does not understand: no),
// and it allows a disruption (yes). Otherwise it returns the guard pods' selector when the node's
// guard pod decides (EtcdGuardPod), or why not.
func EtcdBudget(pdbs []policyv1.PodDisruptionBudget) (allowed bool, guards *metav1.LabelSelector, why string) {
	if len(pdbs) != 1 {
		return false, nil, fmt.Sprintf("%s holds %d PodDisruptionBudgets, not the one etcd guard budget: the etcd quorum cannot be told", EtcdNamespace, len(pdbs))
	}
	pdb := &pdbs[0]
	if pdb.Status.DisruptionsAllowed >= 1 {
		return true, nil, ""
	}
	if pdb.Spec.Selector == nil {
		return false, nil, fmt.Sprintf("the etcd disruption budget %s allows no disruption and has no usable pod selector", pdb.Name)
	}
	if _, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil {
		return false, nil, fmt.Sprintf("the etcd disruption budget %s allows no disruption and has no usable pod selector", pdb.Name)
	}
	return false, pdb.Spec.Selector, ""
}

// EtcdGuardPod is the second half, for a budget that allows no disruption: the node's guard pod
// (among the pods its selector selects) Ready True or Unknown means its etcd member counts for
// quorum: no; Ready False, no Ready condition, or no guard pod on the node: yes (no member there to
// lose). It returns why not.
func EtcdGuardPod(guards []corev1.Pod, node string) (bool, string) {
	for i := range guards {
		pod := &guards[i]
		if pod.Spec.NodeName != node {
			continue
		}
		if ready := podReady(pod); ready == corev1.ConditionTrue || ready == corev1.ConditionUnknown {
			return false, fmt.Sprintf("the etcd disruption budget allows no disruption and the etcd guard pod %s of node %s is Ready=%s: remediating it could break etcd quorum", pod.Name, node, ready)
		}
		return true, ""
	}
	return true, ""
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

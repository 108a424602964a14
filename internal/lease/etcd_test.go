package lease

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEtcdGuard(t *testing.T) {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guard"}}
	budget := func(allowed int32, sel *metav1.LabelSelector) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "etcd-guard-pdb"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel}, Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	}
	guard := func(node string, ready corev1.ConditionStatus) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-guard-" + node}, Spec: corev1.PodSpec{NodeName: node}}
		if ready != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
		}
		return p
	}
	tests := []struct {
		name    string
		pdbs    []policyv1.PodDisruptionBudget
		pods    []corev1.Pod
		allowed bool
		why     string
	}{
		{name: "no budget", why: "holds 0 PodDisruptionBudgets"},
		{name: "two budgets", pdbs: []policyv1.PodDisruptionBudget{budget(1, selector), budget(1, selector)}, why: "holds 2 PodDisruptionBudgets"},
		{name: "a disruption allowed", pdbs: []policyv1.PodDisruptionBudget{budget(1, selector)}, allowed: true},
		{name: "none allowed, no selector", pdbs: []policyv1.PodDisruptionBudget{budget(0, nil)}, why: "no usable pod selector"},
		{name: "none allowed, guard ready", pdbs: []policyv1.PodDisruptionBudget{budget(0, selector)},
			pods: []corev1.Pod{guard("other", corev1.ConditionFalse), guard("cp-1", corev1.ConditionTrue)}, why: "etcd guard pod etcd-guard-cp-1 of node cp-1 is Ready=True"},
		{name: "none allowed, guard unknown", pdbs: []policyv1.PodDisruptionBudget{budget(0, selector)},
			pods: []corev1.Pod{guard("cp-1", corev1.ConditionUnknown)}, why: "Ready=Unknown"},
		{name: "none allowed, guard not ready", pdbs: []policyv1.PodDisruptionBudget{budget(0, selector)},
			pods: []corev1.Pod{guard("cp-1", corev1.ConditionFalse)}, allowed: true},
		{name: "none allowed, guard without condition", pdbs: []policyv1.PodDisruptionBudget{budget(0, selector)},
			pods: []corev1.Pod{guard("cp-1", "")}, allowed: true},
		{name: "none allowed, no guard on the node", pdbs: []policyv1.PodDisruptionBudget{budget(0, selector)},
			pods: []corev1.Pod{guard("other", corev1.ConditionTrue)}, allowed: true},
	}
	for _, tt := range tests {
		allowed, guards, why := EtcdBudget(tt.pdbs)
		if !allowed && why == "" {
			if guards == nil {
				t.Fatalf("%s: no selector and no reason", tt.name)
			}
			allowed, why = EtcdGuardPod(tt.pods, "cp-1")
		}
		if allowed != tt.allowed || (tt.why == "") != (why == "") || !strings.Contains(why, tt.why) {
			t.Errorf("%s: allowed %v (%q), want %v (%q)", tt.name, allowed, why, tt.allowed, tt.why)
		}
	}
}

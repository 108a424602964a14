package nodetaints

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTaints(t *testing.T) {
	node := func(keys ...string) *corev1.Node {
		n := &corev1.Node{}
		for _, k := range keys {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
		}
		return n
	}
	for _, tc := range []struct {
		name        string
		node        *corev1.Node
		removedBy   string
		remediating bool
	}{
		{"untainted", node(), "", false},
		{"the cluster autoscaler", node(ClusterAutoscaler), "the cluster autoscaler", false},
		{"the autoscaler's soft candidate taint is no removal", node("DeletionCandidateOfClusterAutoscaler"), "", false},
		{"Karpenter", node(Karpenter), "Karpenter", false},
		{"the cloud provider", node(CloudShutdown), "the cloud provider", false},
		{"self-node-remediation", node("medik8s.io/remediation"), "", true},
		{"fence-agents", node("remediation.medik8s.io/fence-agents-remediation"), "", true},
		{"out of service", node(OutOfService), "", true},
		{"cordoned by kubectl", node("node.kubernetes.io/unschedulable"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := BeingRemoved(tc.node)
			if (got == "") != (tc.removedBy == "") || !strings.HasPrefix(got, tc.removedBy) {
				t.Errorf("BeingRemoved = %q, want %q...", got, tc.removedBy)
			}
			if UnderRemediation(tc.node) != tc.remediating {
				t.Errorf("UnderRemediation = %v, want %v", !tc.remediating, tc.remediating)
			}
			for _, taint := range tc.node.Spec.Taints {
				if want := got != "" || tc.remediating; Keep(taint) != want {
					t.Errorf("Keep(%s) = %v, want %v", taint.Key, !want, want)
				}
			}
		})
	}
}

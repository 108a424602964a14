package nodetaints

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		{"Karpenter before v1", node(KarpenterLegacy), "Karpenter", false},
		{"a stopped instance is no removal", node(CloudShutdown), "", false},
		{"self-node-remediation", node("medik8s.io/remediation"), "", true},
		{"fence-agents", node("remediation.medik8s.io/fence-agents-remediation"), "", true},
		{"out of service", node(OutOfService), "", true},
		{"cordoned by kubectl", node("node.kubernetes.io/unschedulable"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := BeingRemoved(tc.node).By
			if (got == "") != (tc.removedBy == "") || !strings.HasPrefix(got, tc.removedBy) {
				t.Errorf("BeingRemoved = %q, want %q...", got, tc.removedBy)
			}
			if UnderRemediation(tc.node) != tc.remediating {
				t.Errorf("UnderRemediation = %v, want %v", !tc.remediating, tc.remediating)
			}
			for _, taint := range tc.node.Spec.Taints {
				if want := got != "" || tc.remediating || taint.Key == CloudShutdown; Keep(taint) != want {
					t.Errorf("Keep(%s) = %v, want %v", taint.Key, !want, want)
				}
			}
		})
	}
}

// TestRemovalSince: when a removal began, where its signal says; a deletion comes first.
func TestRemovalSince(t *testing.T) {
	at := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		node  corev1.Node
		by    string
		since time.Time
	}{
		{"the autoscaler's taint value", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: ClusterAutoscaler, Value: strconv.FormatInt(at.Unix(), 10)}}}},
			"the cluster autoscaler", at},
		{"an autoscaler taint value that is no time", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: ClusterAutoscaler, Value: "soon"}}}},
			"the cluster autoscaler", time.Time{}},
		{"a taint's timeAdded", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: Karpenter, TimeAdded: &metav1.Time{Time: at}}}}}, "Karpenter", at},
		{"Karpenter's taint without a time", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: Karpenter}}}}, "Karpenter", time.Time{}},
		{"a deletion, first", corev1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: at}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: Karpenter}}}}, "its deletion", at},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := BeingRemoved(&tc.node)
			if !strings.HasPrefix(r.By, tc.by) || !r.Since.Equal(tc.since) {
				t.Errorf("%+v, want %q since %v", r, tc.by, tc.since)
			}
		})
	}
	if !Stopped(&corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: CloudShutdown}}}}) {
		t.Error("a node whose instance is shut down is stopped")
	}
}

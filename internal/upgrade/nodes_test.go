package upgrade

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

func node(name, kubelet string, cordoned bool) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}}}
}

func TestMachineConfigUpdating(t *testing.T) {
	tests := []struct {
		name             string
		current, desired string
		want             bool
	}{
		{"no annotations", "", "", false},
		{"up to date", "rendered-worker-1", "rendered-worker-1", false},
		{"updating", "rendered-worker-1", "rendered-worker-2", true},
		{"first config", "", "rendered-worker-1", true},
		{"desired empty", "rendered-worker-1", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := node("w1", "", false)
			n.Annotations = map[string]string{}
			if tt.current != "" {
				n.Annotations[remediationv1alpha1.MachineConfigCurrentAnnotation] = tt.current
			}
			if tt.desired != "" {
				n.Annotations[remediationv1alpha1.MachineConfigDesiredAnnotation] = tt.desired
			}
			s := MachineConfigUpdating(n)
			if (s != nil) != tt.want {
				t.Fatalf("got %+v, want signal=%v", s, tt.want)
			}
			if s != nil && (!strings.Contains(s.Message, "w1") || !strings.Contains(s.Message, tt.desired) || s.Reason != remediationv1alpha1.ConditionReasonMachineConfigUpdating) {
				t.Errorf("signal %+v", s)
			}
		})
	}
}

func TestRollingUpgrade(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*corev1.Node
		want  string // "" for no signal, else a substring of the message
	}{
		{"one version", []*corev1.Node{node("a", "v1.37.2", true), node("b", "v1.37.0", false)}, ""},
		{"two minors, none cordoned", []*corev1.Node{node("a", "v1.38.0", false), node("b", "v1.37.2", false)}, ""},
		{"two minors, one cordoned", []*corev1.Node{node("a", "v1.38.0", false), node("b", "v1.37.2", true), node("c", "v1.37.2", false)},
			"kubelet minor versions 1.37 (2), 1.38 (1) and b is cordoned"},
		{"minor 10 sorts after 9", []*corev1.Node{node("a", "v1.10.0", true), node("b", "v1.9.1", false)}, "1.9 (1), 1.10 (1)"},
		{"distribution suffixes", []*corev1.Node{node("a", "v1.31.4+k3s1", true), node("b", "v1.30.2-eks-1", false)}, "1.30 (1), 1.31 (1)"},
		{"unparsable versions are ignored", []*corev1.Node{node("a", "", true), node("b", "v1.37.2", false), node("c", "garbage", false)}, ""},
		{"cordoned by a remediator: no upgrade", []*corev1.Node{node("a", "v1.38.0", false), fenced(node("b", "v1.37.2", true)), node("c", "v1.37.2", false)}, ""},
		{"one cordoned by a remediator, one by an upgrade", []*corev1.Node{node("a", "v1.38.0", true), fenced(node("b", "v1.37.2", true))}, "and a is cordoned"},
		{"many cordoned are counted", []*corev1.Node{node("a", "v1.38.0", true), node("b", "v1.37.2", true), node("c", "v1.37.2", true),
			node("d", "v1.37.2", true), node("e", "v1.37.2", true)}, "a, b, c and 2 more are cordoned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := RollingUpgrade(tt.nodes)
			switch {
			case tt.want == "" && s != nil:
				t.Fatalf("unexpected signal %+v", s)
			case tt.want != "" && s == nil:
				t.Fatal("no signal")
			case s != nil && (!strings.Contains(s.Message, tt.want) || s.Reason != remediationv1alpha1.ConditionReasonNodeRollingUpgrade):
				t.Errorf("message %q, want it to contain %q", s.Message, tt.want)
			}
		})
	}
}

func TestLeftToMachineHealthCheck(t *testing.T) {
	terminating := node("spot", "", false)
	terminating.Status.Conditions = []corev1.NodeCondition{{Type: TerminatingCondition, Status: corev1.ConditionTrue}}
	plain := node("plain", "", false)
	if LeftToMachineHealthCheck(MachineHealthChecks{}, terminating) {
		t.Error("without the termination-handler MachineHealthCheck no node is left to it")
	}
	m := MachineHealthChecks{Terminating: corev1.ConditionTrue}
	if !LeftToMachineHealthCheck(m, terminating) || LeftToMachineHealthCheck(m, plain) {
		t.Error("only terminating nodes are left to the termination handler")
	}
	if LeftToMachineHealthCheck(MachineHealthChecks{Terminating: corev1.ConditionFalse}, terminating) {
		t.Error("the MachineHealthCheck's condition status must match")
	}
}

// fenced taints the node as self-node-remediation does.
func fenced(n *corev1.Node) *corev1.Node {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "medik8s.io/remediation", Value: "self-node-remediation", Effect: corev1.TaintEffectNoExecute})
	return n
}

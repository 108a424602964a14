package watch

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/nodeinput"
	"github.com/medik8s/node-healthcheck/internal/nodetaints"
)

func testNode() *corev1.Node {
	t := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x": "y"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: t, LastHeartbeatTime: t, Message: "kubelet is posting ready status"}},
			Images:     []corev1.ContainerImage{{Names: []string{"big/image:1"}, SizeBytes: 1 << 30}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13"},
		},
	}
}

func TestNodeChangePredicate(t *testing.T) {
	p := NodeChangePredicate()
	tests := []struct {
		name   string
		change func(*corev1.Node)
		want   bool
	}{
		{"heartbeat only", func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime.Time = n.Status.Conditions[0].LastHeartbeatTime.Add(time.Minute)
		}, false},
		{"condition message only", func(n *corev1.Node) { n.Status.Conditions[0].Message = "other" }, false},
		{"images only", func(n *corev1.Node) { n.Status.Images = nil }, false},
		{"condition status", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, true},
		{"condition transition time", func(n *corev1.Node) {
			n.Status.Conditions[0].LastTransitionTime.Time = n.Status.Conditions[0].LastTransitionTime.Add(time.Second)
		}, true},
		{"condition added", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse})
		}, true},
		{"label", func(n *corev1.Node) { n.Labels["a"] = "c" }, true},
		{"annotation", func(n *corev1.Node) { n.Annotations["x"] = "z" }, true},
		{"cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		{"kubelet upgraded", func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.38.0" }, true},
		{"images only", func(n *corev1.Node) { n.Status.Images = nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldNode, newNode := testNode(), testNode()
			tt.change(newNode)
			if got := p.Update(event.UpdateEvent{ObjectOld: oldNode, ObjectNew: newNode}); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if !p.Create(event.CreateEvent{Object: testNode()}) || !p.Delete(event.DeleteEvent{Object: testNode()}) {
		t.Error("creations and deletions must pass")
	}
}

func TestTrimNodeKeepsWhatDecisionsRead(t *testing.T) {
	n := testNode()
	n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}}
	out, err := TrimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.Node)
	if trimmed.Labels["a"] != "b" || len(trimmed.Status.Conditions) != 1 ||
		trimmed.Status.Conditions[0].Status != corev1.ConditionTrue || trimmed.Status.Conditions[0].LastTransitionTime.IsZero() ||
		trimmed.Status.NodeInfo.KubeletVersion != "v1.37.2" {
		t.Errorf("lost what decisions read: %+v", trimmed)
	}
	if trimmed.ManagedFields != nil || trimmed.Spec.Taints != nil || trimmed.Status.Images != nil || trimmed.Status.NodeInfo.OSImage != "" || trimmed.Status.Conditions[0].Message != "" ||
		trimmed.Annotations != nil {
		t.Errorf("kept what decisions do not read: %+v", trimmed)
	}

	// The taints that say who removes the node, or that a remediator fenced it, are kept.
	n = testNode()
	n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute},
		{Key: nodetaints.ClusterAutoscaler, Effect: corev1.TaintEffectNoSchedule}, {Key: nodetaints.OutOfService, Effect: corev1.TaintEffectNoExecute}}
	out, _ = TrimNode(n)
	if got := out.(*corev1.Node).Spec.Taints; len(got) != 2 || got[0].Key != nodetaints.ClusterAutoscaler || got[1].Key != nodetaints.OutOfService {
		t.Errorf("taints kept: %+v", got)
	}
	// Their changes reach the controllers.
	old, tainted := n.DeepCopy(), n.DeepCopy()
	old.Spec.Taints = nil
	if !NodeChangePredicate().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tainted}) {
		t.Error("a removal taint added must pass")
	}
}

// TestTrimNodeBoundsWhatANodeWrites: of what a node can write itself, the cache keeps the
// annotations decisions read, each bounded, a condition's reason cut, and no condition no rule can
// name; a bounded value still changes when the node's does.
func TestTrimNodeBoundsWhatANodeWrites(t *testing.T) {
	n := testNode()
	huge := strings.Repeat("9", 200<<10)
	n.Annotations = map[string]string{
		remediationv1alpha1.RemediationRequestAnnotation:       huge,
		remediationv1alpha1.ManuallyConfirmedHealthyAnnotation: "",
		remediationv1alpha1.RepairBudgetResetAnnotation:        "2026-01-01T00:00:00Z",
		"example.com/anything":                                 strings.Repeat("x", 50<<10),
	}
	n.Status.Conditions = append(n.Status.Conditions,
		corev1.NodeCondition{Type: corev1.NodeConditionType(strings.Repeat("T", 400)), Status: corev1.ConditionTrue},
		corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionFalse, Reason: strings.Repeat("r", 10<<10)},
		corev1.NodeCondition{Type: "Odd", Status: corev1.ConditionStatus(strings.Repeat("s", 10<<10))})
	out, _ := TrimNode(n)
	trimmed := out.(*corev1.Node)
	if len(trimmed.Annotations) != 3 {
		t.Fatalf("annotations kept: %v", slices.Collect(maps.Keys(trimmed.Annotations)))
	}
	v := trimmed.Annotations[remediationv1alpha1.RemediationRequestAnnotation]
	if length, bounded := nodeinput.WasBounded(v); !bounded || length != len(huge) || len(v) > nodeinput.MaxValueLen {
		t.Errorf("a huge value kept as %d bytes: %.80s", len(v), v)
	}
	if _, ok := trimmed.Annotations[remediationv1alpha1.ManuallyConfirmedHealthyAnnotation]; !ok ||
		trimmed.Annotations[remediationv1alpha1.RepairBudgetResetAnnotation] != "2026-01-01T00:00:00Z" {
		t.Errorf("short values lost: %v", trimmed.Annotations)
	}
	if len(trimmed.Status.Conditions) != 3 || trimmed.Status.Conditions[1].Type != "KernelDeadlock" || len(trimmed.Status.Conditions[1].Reason) != maxReason {
		t.Errorf("conditions kept: %d, the second %q with a reason of %d bytes", len(trimmed.Status.Conditions), trimmed.Status.Conditions[1].Type,
			len(trimmed.Status.Conditions[1].Reason))
	}
	odd := trimmed.Status.Conditions[len(trimmed.Status.Conditions)-1]
	if len(odd.Status) > maxConditionStatus || trimmed.Status.Conditions[1].Status != corev1.ConditionFalse {
		t.Errorf("statuses kept: %d bytes of a 10 KiB one, %q", len(odd.Status), trimmed.Status.Conditions[1].Status)
	}
	changed := n.DeepCopy()
	changed.Annotations[remediationv1alpha1.RemediationRequestAnnotation] = huge[:len(huge)-1] + "8"
	out2, _ := TrimNode(changed)
	if out2.(*corev1.Node).Annotations[remediationv1alpha1.RemediationRequestAnnotation] == v {
		t.Error("a changed huge value looks unchanged in the cache")
	}
	changed.Status.Conditions[len(changed.Status.Conditions)-1].Status += "t"
	out3, _ := TrimNode(changed)
	if c := out3.(*corev1.Node).Status.Conditions; c[len(c)-1].Status == odd.Status {
		t.Error("a changed huge status looks unchanged in the cache")
	}
}

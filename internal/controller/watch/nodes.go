package watch

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/nodeinput"
	"github.com/medik8s/node-healthcheck/internal/nodetaints"
)

// NodeChangePredicate passes node creations and deletions, and updates that change what decisions
// read: labels, annotations, a condition's type, status or transition time, cordoning, the taints
// the cache keeps (TrimNode), or the kubelet version. A heartbeat, which only moves lastHeartbeatTime, passes nothing.
func NodeChangePredicate() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldNode, ok1 := e.ObjectOld.(*corev1.Node)
			newNode, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 {
				return true
			}
			return !maps.Equal(oldNode.Labels, newNode.Labels) ||
				!maps.Equal(oldNode.Annotations, newNode.Annotations) ||
				oldNode.Spec.Unschedulable != newNode.Spec.Unschedulable ||
				oldNode.Status.NodeInfo.KubeletVersion != newNode.Status.NodeInfo.KubeletVersion ||
				!slices.EqualFunc(oldNode.Spec.Taints, newNode.Spec.Taints, func(a, b corev1.Taint) bool { return a.Key == b.Key && a.Effect == b.Effect }) ||
				!sameConditions(oldNode.Status.Conditions, newNode.Status.Conditions)
		},
	}
}

func sameConditions(a, b []corev1.NodeCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status || !a[i].LastTransitionTime.Equal(&b[i].LastTransitionTime) {
			return false
		}
	}
	return true
}

// TrimNode is a cache transform that keeps of a Node only what decisions read (metadata without
// managed fields, cordoning, the conditions without messages, the kubelet version, and the taints
// that say who removes the node or that a remediator fenced it, nodetaints.Keep), so the node
// cache stays small on large clusters. Other taints are dropped: the node lifecycle adds two to
// every node that fails.
//
// What a node can write itself is bounded here, once, for every reader of the cache: of its
// annotations (up to 256 KiB, any key) only those decisions read (ReadAnnotations), each cut to
// nodeinput.MaxValueLen (nodeinput.Bounded); a condition's reason to maxReason bytes, a status
// longer than maxConditionStatus to its hash; a condition whose type is longer than any unhealthy
// condition may name (maxConditionType) is dropped.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: n.ObjectMeta}
	trimmed.ManagedFields = nil
	trimmed.Annotations = nil
	for _, key := range ReadAnnotations {
		if v, ok := n.Annotations[key]; ok {
			if trimmed.Annotations == nil {
				trimmed.Annotations = map[string]string{}
			}
			trimmed.Annotations[key] = nodeinput.Bounded(v)
		}
	}
	trimmed.Spec.Unschedulable = n.Spec.Unschedulable
	for _, t := range n.Spec.Taints {
		if nodetaints.Keep(t) {
			trimmed.Spec.Taints = append(trimmed.Spec.Taints, t)
		}
	}
	trimmed.Status.NodeInfo.KubeletVersion = n.Status.NodeInfo.KubeletVersion
	trimmed.Status.Conditions = make([]corev1.NodeCondition, 0, len(n.Status.Conditions))
	for _, c := range n.Status.Conditions {
		if len(c.Type) > maxConditionType {
			continue
		}
		c.Message = ""
		if len(c.Reason) > maxReason {
			c.Reason = c.Reason[:maxReason]
		}
		if len(c.Status) > maxConditionStatus {
			// No rule can name it (True, False, Unknown); its hash still shows it change.
			c.Status = corev1.ConditionStatus("bounded/" + nodeinput.Hash(string(c.Status)))
		}
		trimmed.Status.Conditions = append(trimmed.Status.Conditions, c)
	}
	return trimmed, nil
}

// ReadAnnotations are the node annotations decisions read; the node cache keeps no other
// (TrimNode). docs/architecture.md's trust table says who can write each and what is done with it.
var ReadAnnotations = []string{
	remediationv1alpha1.RemediationRequestAnnotation,
	remediationv1alpha1.RemediationRequestHandledAnnotation,
	remediationv1alpha1.RepairBudgetResetAnnotation,
	remediationv1alpha1.ManuallyConfirmedHealthyAnnotation,
	remediationv1alpha1.MachineConfigCurrentAnnotation,
	remediationv1alpha1.MachineConfigDesiredAnnotation,
	machines.OpenShiftMachineAnnotation,
	machines.ClusterAPIMachineAnnotation,
	machines.ClusterAPINamespaceAnnotation,
	machines.ClusterAPIClusterNameAnnotation,
}

// maxConditionType is the longest condition type an unhealthy condition may name (the CRD's bound
// on unhealthyConditions[].type: a qualified name); maxReason bounds a condition's reason, which
// decisions do not read (events and explain may show it); a status longer than maxConditionStatus
// is none a rule can name, and is kept as its hash (the API server does not bound it).
const (
	maxConditionType   = 316
	maxReason          = 128
	maxConditionStatus = 32
)

package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultUnhealthyConditionDuration is how long Ready must be False or Unknown before a node counts
// as unhealthy by default: long enough to ride out a kubelet restart or a short network hiccup.
const DefaultUnhealthyConditionDuration = 300 * time.Second

// DefaultMinHealthy is the minHealthy used when neither minHealthy nor maxUnhealthy is set: a
// majority of the selected nodes must be healthy before another one is remediated.
var DefaultMinHealthy = intstr.FromString("51%")

// MinEscalationTimeout is the shortest timeout an escalation step may have: a remediator needs at
// least this long to fence or reboot a node and report back.
const MinEscalationTimeout = time.Minute

// MaxEscalatingRemediations bounds spec.escalatingRemediations so that CEL validation of the list has
// a bounded cost; real clusters use two or three steps. The CRD repeats it: maxItems, and the
// positions its duplicate-order message reads (TestDuplicateOrderMessageReadsEveryStep).
const MaxEscalatingRemediations = 20

// DefaultUnhealthyConditions returns the unhealthy conditions used when spec.unhealthyConditions is
// empty: Ready False or Unknown for DefaultUnhealthyConditionDuration. Each call returns a new slice.
func DefaultUnhealthyConditions() []UnhealthyCondition {
	return []UnhealthyCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Duration: metav1.Duration{Duration: DefaultUnhealthyConditionDuration}},
		{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Duration: metav1.Duration{Duration: DefaultUnhealthyConditionDuration}},
	}
}

// SetDefaults applies every default of the API to nhc, in place. It is the one place defaults are
// applied: the mutating webhook calls it, and so does the controller for objects admitted without
// the webhook.
func SetDefaults(nhc *NodeHealthCheck) {
	if len(nhc.Spec.UnhealthyConditions) == 0 {
		nhc.Spec.UnhealthyConditions = DefaultUnhealthyConditions()
	}
	if nhc.Spec.MinHealthy == nil && nhc.Spec.MaxUnhealthy == nil {
		mh := DefaultMinHealthy
		nhc.Spec.MinHealthy = &mh
	}
}

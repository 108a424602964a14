package targets

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// upgradeOutcome decides the NodeHealthCheck's UpgradeInProgress condition from the gate's
// cluster-wide signals and the node-level ones of its own nodes: a kubelet rolling upgrade among the
// selected nodes (when that detector is on) and, on OpenShift, a MachineConfig update of a node
// about to be remediated (unhealthy, without a remediation yet). The gate remembers when this
// NodeHealthCheck first saw each node-level signal, for the maximum pause.
func upgradeOutcome(gate *upgrade.Gate, stored *remediationv1alpha1.NodeHealthCheck, v upgrade.Verdict, nodes []*corev1.Node,
	crs map[string][]unstructured.Unstructured, conditions []remediationv1alpha1.UnhealthyCondition, maxPause time.Duration, now time.Time) upgrade.Outcome {
	var node []upgrade.Signal
	if v.NodeRollout {
		if s := upgrade.RollingUpgrade(nodes); s != nil {
			node = append(node, *s)
		}
	}
	if v.OpenShift {
		for _, n := range nodes {
			if len(crs[n.Name]) > 0 {
				continue
			}
			if s := upgrade.MachineConfigUpdating(n); s != nil && health.EvaluateNode(conditions, n.Status.Conditions, now).State == health.Unhealthy {
				node = append(node, *s)
			}
		}
	}
	if gate != nil {
		node = gate.NodeSignals(stored.Name, node, now) // when each began, and the gate metric
	}
	signals := append(slices.Clone(v.Closed), node...)
	return upgrade.Condition(upgrade.ConditionInput{Known: v.Known, Pending: v.Pending, Signals: signals, MaxPause: maxPause,
		Previous: meta.FindStatusCondition(stored.Status.Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress),
		Now:      now, Generation: stored.Generation})
}

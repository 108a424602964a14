package nhc

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
// selected nodes (when that detector is on) and, on hosted control planes, a MachineConfig update of
// a node about to be remediated (unhealthy, without a remediation yet).
func (r *Reconciler) upgradeOutcome(stored *remediationv1alpha1.NodeHealthCheck, v upgrade.Verdict, nodes []corev1.Node,
	crs map[string][]unstructured.Unstructured, conditions []remediationv1alpha1.UnhealthyCondition, now time.Time) upgrade.Outcome {
	signals := slices.Clone(v.Closed)
	var rolling *upgrade.Signal
	if v.NodeRollout {
		rolling = upgrade.RollingUpgrade(nodes)
		if rolling != nil {
			signals = append(signals, *rolling)
		}
	}
	updating := false
	if v.HostedControlPlane {
		for i := range nodes {
			n := &nodes[i]
			if len(crs[n.Name]) > 0 {
				continue
			}
			if s := upgrade.MachineConfigUpdating(n); s != nil && health.EvaluateNode(conditions, n.Status.Conditions, now).State == health.Unhealthy {
				signals = append(signals, *s)
				updating = true
			}
		}
	}
	if r.Gate != nil {
		r.Gate.ReportNode(upgrade.DetectorNodeRollout, stored.Name, rolling != nil)
		r.Gate.ReportNode(upgrade.DetectorMachineConfig, stored.Name, updating)
	}
	return upgrade.Condition(upgrade.ConditionInput{Known: v.Known, Pending: v.Pending, Signals: signals, MaxPause: r.MaxPause,
		Previous: meta.FindStatusCondition(stored.Status.Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress),
		Now:      now, Generation: stored.Generation})
}

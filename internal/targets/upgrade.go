package targets

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// UpgradeGate is what a snapshot reads of the upgrade gate (upgrade.Gate). The upgradeguard
// controller is the gate's only writer; a Gatherer only reads it.
type UpgradeGate interface {
	// Verdict returns the gate's current state.
	Verdict() upgrade.Verdict
	// NodeSince returns a NodeHealthCheck's node-level signals with Since set where it is zero: when
	// the upgradeguard first saw the signal, or now when it has not recorded it yet.
	NodeSince(nhc string, signals []upgrade.Signal, now time.Time) []upgrade.Signal
}

// upgradeOutcome decides the NodeHealthCheck's UpgradeInProgress condition from the gate's
// cluster-wide signals and the node-level ones of its own nodes (nodeSignals), each dated by the
// gate: when the upgradeguard first saw it for this NodeHealthCheck, for the maximum pause.
func upgradeOutcome(gate UpgradeGate, stored *remediationv1alpha1.NodeHealthCheck, v upgrade.Verdict, nodes []*corev1.Node,
	crs map[string][]unstructured.Unstructured, conditions []remediationv1alpha1.UnhealthyCondition, maxPause time.Duration, now time.Time) upgrade.Outcome {
	node, _ := nodeSignals(v, nodes, crs, conditions, now)
	if gate != nil {
		node = gate.NodeSince(stored.Name, node, now) // when each began
	}
	signals := append(slices.Clone(v.Closed), node...)
	return upgrade.Condition(upgrade.ConditionInput{Known: v.Known, Pending: v.Pending, Signals: signals, MaxPause: maxPause,
		Previous: meta.FindStatusCondition(stored.Status.Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress),
		Now:      now, Generation: stored.Generation})
}

// nodeSignals returns the node-level upgrade signals among a NodeHealthCheck's selected nodes at
// now, without Since: a kubelet rolling upgrade (when that detector is on) and, on OpenShift, a
// MachineConfig update of a node about to be remediated (unhealthy, without a remediation CR of
// this NodeHealthCheck yet). next is when a node being updated becomes unhealthy, and with it a
// signal, on its own; zero when none will.
func nodeSignals(v upgrade.Verdict, nodes []*corev1.Node, crs map[string][]unstructured.Unstructured,
	conditions []remediationv1alpha1.UnhealthyCondition, now time.Time) (signals []upgrade.Signal, next time.Time) {
	if v.NodeRollout {
		if s := upgrade.RollingUpgrade(nodes); s != nil {
			signals = append(signals, *s)
		}
	}
	if v.OpenShift {
		for _, n := range nodes {
			if len(crs[n.Name]) > 0 {
				continue
			}
			s := upgrade.MachineConfigUpdating(n)
			if s == nil {
				continue
			}
			switch h := health.EvaluateNode(conditions, n.Status.Conditions, now); h.State {
			case health.Unhealthy:
				signals = append(signals, *s)
			case health.SoonUnhealthy:
				next = health.Earliest(next, h.Next)
			}
		}
	}
	return signals, next
}

// UpgradeNodeSignals returns the node-level upgrade signals of one NodeHealthCheck at now, without
// Since, as Gather's read finds them with the gate's verdict v (the same nodes, the same remediation
// CRs of the NodeHealthCheck, its conditions with defaults applied),
// and when they may change without an event (zero: only on events). The upgradeguard controller
// records from it when each began; it reads nothing while no node-level detector is on.
func (g *Gatherer) UpgradeNodeSignals(ctx context.Context, stored *remediationv1alpha1.NodeHealthCheck, v upgrade.Verdict, now time.Time) ([]upgrade.Signal, time.Time, error) {
	if !v.NodeRollout && !v.OpenShift {
		return nil, time.Time{}, nil
	}
	nhc := stored.DeepCopy()
	remediationv1alpha1.SetDefaults(nhc)
	if _, err := metav1.LabelSelectorAsSelector(&nhc.Spec.Selector); err != nil {
		return nil, time.Time{}, nil // nothing is selected (Gather: badSelector)
	}
	nodes, err := g.selectedNodes(ctx, nhc)
	if err != nil {
		return nil, time.Time{}, err
	}
	var crs map[string][]unstructured.Unstructured
	if v.OpenShift {
		nhcs, err := g.nodeHealthChecks(ctx)
		if err != nil {
			return nil, time.Time{}, err
		}
		all, _, err := g.remediationCRs(ctx, nhc, nhcs, nodes)
		if err != nil {
			return nil, time.Time{}, err
		}
		crs = sortByOwner(all, stored.UID, nodes).ours
	}
	signals, next := nodeSignals(v, nodes, crs, nhc.Spec.UnhealthyConditions, now)
	return signals, next, nil
}

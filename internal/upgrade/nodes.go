package upgrade

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/nodeinput"
	"github.com/medik8s/node-healthcheck/internal/nodetaints"
)

// MachineConfigUpdating returns the MachineConfig signal when the Machine Config Operator is updating
// the node: its desired config is set and differs from its current one.
func MachineConfigUpdating(n *corev1.Node) *Signal {
	desired := n.Annotations[remediationv1alpha1.MachineConfigDesiredAnnotation]
	current := n.Annotations[remediationv1alpha1.MachineConfigCurrentAnnotation]
	if desired == "" || desired == current {
		return nil
	}
	return &Signal{Detector: DetectorMachineConfig, Reason: remediationv1alpha1.ConditionReasonMachineConfigUpdating,
		Message: fmt.Sprintf("node %s is being updated by the Machine Config Operator (current config %s, desired %s)", n.Name, nodeinput.Quote(current), nodeinput.Quote(desired)),
		Object:  &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name}}
}

// maxNamedNodes bounds how many nodes a message names.
const maxNamedNodes = 3

// RollingUpgrade returns the node rolling-upgrade signal when the nodes run kubelets of at least two
// minor versions and at least one of them is cordoned: the pattern of a node-by-node upgrade (drain,
// upgrade, uncordon). A node a remediator has tainted (fenced, out of service) is cordoned by the
// remediation, not by an upgrade, and does not count. Kubelet versions that do not parse are
// ignored.
func RollingUpgrade(nodes []*corev1.Node) *Signal {
	count := map[string]int{}
	var cordoned []string
	for _, n := range nodes {
		if v, err := version.ParseGeneric(n.Status.NodeInfo.KubeletVersion); err == nil {
			count[fmt.Sprintf("%d.%d", v.Major(), v.Minor())]++
		}
		if n.Spec.Unschedulable && !nodetaints.UnderRemediation(n) {
			cordoned = append(cordoned, n.Name)
		}
	}
	if len(count) < 2 || len(cordoned) == 0 {
		return nil
	}
	minors := make([]string, 0, len(count))
	for m := range count {
		minors = append(minors, m)
	}
	slices.SortFunc(minors, func(a, b string) int {
		c, _ := version.MustParseGeneric(a).Compare(b)
		return c
	})
	parts := make([]string, 0, len(minors))
	for _, m := range minors {
		parts = append(parts, fmt.Sprintf("%s (%d)", m, count[m]))
	}
	slices.Sort(cordoned)
	named := cordoned
	more := ""
	if len(named) > maxNamedNodes {
		named, more = named[:maxNamedNodes], fmt.Sprintf(" and %d more", len(cordoned)-maxNamedNodes)
	}
	return &Signal{Detector: DetectorNodeRollout, Reason: remediationv1alpha1.ConditionReasonNodeRollingUpgrade,
		Message: fmt.Sprintf("selected nodes run kubelet minor versions %s and %s%s cordoned: a rolling upgrade",
			strings.Join(parts, ", "), strings.Join(named, ", "), more+plural(len(cordoned), " is", " are"))}
}

// LeftToMachineHealthCheck reports whether the default termination-handler MachineHealthCheck
// handles the node: its Terminating condition has the status that MachineHealthCheck acts on.
func LeftToMachineHealthCheck(m MachineHealthChecks, n *corev1.Node) bool {
	if m.Terminating == "" {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == TerminatingCondition && c.Status == m.Terminating {
			return true
		}
	}
	return false
}

// TerminatingCondition is the node condition the default termination-handler MachineHealthCheck
// watches (set when a spot instance is about to be reclaimed).
const TerminatingCondition corev1.NodeConditionType = "Terminating"

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

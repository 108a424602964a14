// Package nodetaints tells, from a node's taints, who is removing the node (the cluster
// autoscaler, Karpenter, the cloud provider) and which taints are a remediator's own, which never
// mean the node is being removed or upgraded. The node cache keeps exactly these taints (Keep).
package nodetaints

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Taints of the parties that remove nodes.
const (
	// ClusterAutoscaler marks a node the cluster autoscaler is deleting.
	ClusterAutoscaler = "ToBeDeletedByClusterAutoscaler"
	// Karpenter marks a node Karpenter is disrupting (consolidation, drift, expiry): it drains and
	// deletes it.
	Karpenter = "karpenter.sh/disrupted"
	// CloudShutdown marks a node whose instance the cloud provider reports shut down.
	CloudShutdown = "node.cloudprovider.kubernetes.io/shutdown"
	// OutOfService marks a node a remediator (or an administrator) fenced: its workloads may move
	// away. A remediator's, never a removal.
	OutOfService = "node.kubernetes.io/out-of-service"
)

var removers = map[string]string{
	ClusterAutoscaler: "the cluster autoscaler",
	Karpenter:         "Karpenter",
	CloudShutdown:     "the cloud provider (the instance is shut down)",
}

// BeingRemoved says who is removing the node, by its taints ("": nobody).
func BeingRemoved(n *corev1.Node) string {
	for _, t := range n.Spec.Taints {
		if who, ok := removers[t.Key]; ok {
			return fmt.Sprintf("%s (taint %s)", who, t.Key)
		}
	}
	return ""
}

// Remediator reports whether a taint is a remediator's: self-node-remediation's and fence-agents'
// (medik8s.io/..., remediation.medik8s.io/...) and the out-of-service taint they set.
func Remediator(t corev1.Taint) bool {
	return t.Key == OutOfService || strings.HasPrefix(t.Key, "medik8s.io/") || strings.HasPrefix(t.Key, "remediation.medik8s.io/")
}

// UnderRemediation reports whether a remediator has tainted the node.
func UnderRemediation(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if Remediator(t) {
			return true
		}
	}
	return false
}

// Keep reports whether the node cache keeps a taint: those that say who removes the node and the
// remediators' own.
func Keep(t corev1.Taint) bool {
	_, removal := removers[t.Key]
	return removal || Remediator(t)
}

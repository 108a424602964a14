// Package nodetaints tells, from a node's taints and deletion, who is removing the node (the
// cluster autoscaler, Karpenter, the API server's deletion) and since when, which node is a stopped
// instance the cloud keeps, and which taints are a remediator's own, which never mean the node is
// being removed or upgraded. The node cache keeps exactly these taints (Keep).
//
// Under NodeRestriction a kubelet may not change its Node's taints after it registered, nor set a
// deletion time: what is read here is written by the removing party or the API server.
package nodetaints

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Taints of the parties that remove nodes.
const (
	// ClusterAutoscaler marks a node the cluster autoscaler is deleting.
	ClusterAutoscaler = "ToBeDeletedByClusterAutoscaler"
	// Karpenter marks a node Karpenter is disrupting (consolidation, drift, expiry): it drains and
	// deletes it. KarpenterLegacy is the same taint of Karpenter before v1 (value "disrupting").
	Karpenter       = "karpenter.sh/disrupted"
	KarpenterLegacy = "karpenter.sh/disruption"
	// CloudShutdown marks a node whose instance the cloud provider reports shut down: a stopped
	// instance, which the cloud keeps and nobody removes (Stopped). It is no removal.
	CloudShutdown = "node.cloudprovider.kubernetes.io/shutdown"
	// OutOfService marks a node a remediator (or an administrator) fenced: its workloads may move
	// away. A remediator's, never a removal.
	OutOfService = "node.kubernetes.io/out-of-service"
)

var removers = map[string]string{
	ClusterAutoscaler: "the cluster autoscaler",
	Karpenter:         "Karpenter",
	KarpenterLegacy:   "Karpenter",
}

// Removal says who is removing a node and since when.
type Removal struct {
	// By names the removing party and its signal ("": nobody removes the node).
	By string
	// Since is when the removal began, where the signal says (the deletion's time, the cluster
	// autoscaler's taint value or the taint's timeAdded); zero when it does not.
	Since time.Time
}

// BeingRemoved says who is removing the node: its deletion (a finalizer, such as Karpenter's,
// keeps it while it drains), or a removing party's taint.
func BeingRemoved(n *corev1.Node) Removal {
	if n.DeletionTimestamp != nil {
		return Removal{By: fmt.Sprintf("its deletion (requested at %s)", n.DeletionTimestamp.UTC().Format(time.RFC3339)), Since: n.DeletionTimestamp.Time}
	}
	for _, t := range n.Spec.Taints {
		who, ok := removers[t.Key]
		if !ok {
			continue
		}
		r := Removal{By: fmt.Sprintf("%s (taint %s)", who, t.Key)}
		if t.TimeAdded != nil {
			r.Since = t.TimeAdded.Time
		}
		if t.Key == ClusterAutoscaler {
			// The autoscaler writes the time it began as unix seconds.
			if secs, err := strconv.ParseInt(t.Value, 10, 64); err == nil && secs > 0 && len(t.Value) <= 12 {
				r.Since = time.Unix(secs, 0)
			}
		}
		return r
	}
	return Removal{}
}

// Stopped reports whether the cloud provider reports the node's instance shut down. A stopped
// instance is not being removed: the cloud keeps it, nobody deletes it, and it serves nothing; it is
// remediated as any unhealthy node (a fence agent's power-on, or a replacement, is what it needs).
func Stopped(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == CloudShutdown {
			return true
		}
	}
	return false
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

// Keep reports whether the node cache keeps a taint: those that say who removes the node, that its
// instance is stopped, and the remediators' own.
func Keep(t corev1.Taint) bool {
	_, removal := removers[t.Key]
	return removal || t.Key == CloudShutdown || Remediator(t)
}

package remediation

import (
	"context"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// Node annotations that name a node's Machine (internal/machines): OpenShift's, as
// "<namespace>/<name>", and Cluster API's, the name and the namespace in two annotations.
const (
	MachineAnnotation             = machines.OpenShiftMachineAnnotation
	ClusterAPIMachineAnnotation   = machines.ClusterAPIMachineAnnotation
	ClusterAPINamespaceAnnotation = machines.ClusterAPINamespaceAnnotation
)

// machineOf returns what the node's Machine adds to its CR in the template's namespace: an owner
// reference to it, as Metal3's remediation expects of a CR, and whether it is a control-plane
// Machine. Only a Machine that confirms the node's claim counts (its status.nodeRef names the node,
// see machines.Verify): the claim is the node's own annotation, which a compromised kubelet could
// point at a healthy control-plane Machine, so that Metal3 reboots that host. A claim that does not
// verify adds nothing and is reported once per node and Machine (reportMachineLink).
//
// The link is the snapshot's (Snapshot.MachineLink), read from the cache with the decision: no
// request per remediation, nothing read again after deciding, and the CR's control-plane label
// agrees with the decision's one-at-a-time rule, which read the same link. A Machine's
// status.nodeRef does not move to another node.
func (r *Reconciler) machineOf(ctx context.Context, snap *targets.Snapshot, node *corev1.Node, namespace string) (remediationcr.Machine, error) {
	nhc := snap.Stored
	link, err := snap.MachineLink(node.Name)
	if err != nil {
		return remediationcr.Machine{}, err
	}
	if link.Rejected != "" {
		r.reportMachineLink(ctx, nhc, node.Name, link.Claim, link.Rejected)
	}
	m := link.ForCR(namespace)
	if link.Verified && m.Owner == nil {
		ctrl.LoggerFrom(ctx).V(1).Info("The node's Machine lives in another namespace than its CR: no owner reference", "node", node.Name,
			"machine", link.Claim.String(), "namespace", namespace)
	}
	return m, nil
}

// reportMachineLink emits a MachineLinkRejected warning, once per NodeHealthCheck, node, Machine and
// cause (again after a restart at most, or once the node left the NodeHealthCheck; see memory), regarding the NodeHealthCheck and related to the node, and logs it.
func (r *Reconciler) reportMachineLink(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, claim machines.Claim, why string) {
	if !r.memory.first(nhc.UID, node, onceMachineLink, fmt.Sprintf("%s/%s/%s", claim.Kind, claim, why)) {
		return
	}
	msg := fmt.Sprintf("Node %s names %s %s in its %s annotation, but %s: its remediation CR gets no Machine owner, and the Machine's role does not count",
		node, claim.Kind, claim, claim.Annotation, why)
	ctrl.LoggerFrom(ctx).Info(msg, "node", node)
	// An action per note: the recorder merges a series by reason, action, regarding and related
	// object and keeps its first note (see skipAction).
	h := fnv.New32a()
	h.Write([]byte(msg))
	r.Recorder.Eventf(nhc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeWarning, remediationv1alpha1.EventReasonMachineLinkRejected,
		fmt.Sprintf("VerifyMachine-%08x", h.Sum32()), "%s", msg)
}

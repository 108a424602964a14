// Package clusterapi names the Cluster API kinds the operator reads, once: Machines (a node's
// Machine, and control-plane Machines), MachineHealthChecks (whose coverage pauses or yields to
// this operator), MachineDeployments and KubeadmControlPlanes (whose rollouts are upgrades). Their
// versions are not named: Cluster API serves v1beta1 and v1beta2, and the code that reads them asks
// the RESTMapper for the preferred one, or finds no mapping and does without.
package clusterapi

import "k8s.io/apimachinery/pkg/runtime/schema"

const (
	// Group is Cluster API's core group.
	Group = "cluster.x-k8s.io"
	// ControlPlaneGroup is the group of Cluster API's control-plane providers (KubeadmControlPlane
	// and others): a Machine one of them owns is a control-plane Machine.
	ControlPlaneGroup = "controlplane.cluster.x-k8s.io"
)

var (
	// Machine is a Cluster API Machine.
	Machine = schema.GroupKind{Group: Group, Kind: "Machine"}
	// MachineHealthCheck is Cluster API's own health check.
	MachineHealthCheck = schema.GroupKind{Group: Group, Kind: "MachineHealthCheck"}
	// MachineDeployment rolls out worker Machines.
	MachineDeployment = schema.GroupKind{Group: Group, Kind: "MachineDeployment"}
	// KubeadmControlPlane rolls out control-plane Machines.
	KubeadmControlPlane = schema.GroupKind{Group: ControlPlaneGroup, Kind: "KubeadmControlPlane"}
)

// Package openshift names the OpenShift kinds the operator reads, once: the cluster's version and
// infrastructure singletons (config.openshift.io) and the Machine API (machine.openshift.io). The
// operator runs on any cluster; on one that does not serve these kinds, the code that reads them
// finds no mapping and does without.
package openshift

import "k8s.io/apimachinery/pkg/runtime/schema"

var (
	// ClusterVersion reports the cluster's version and whether an upgrade is in progress; the
	// config.openshift.io group being served is how the operator tells it runs on OpenShift.
	ClusterVersion = schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "ClusterVersion"}
	// Infrastructure is the cluster-scoped singleton that reports the control-plane topology.
	Infrastructure = schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "Infrastructure"}
	// Machine is a Machine API machine, which a node names in an annotation (internal/machines).
	Machine = schema.GroupVersionKind{Group: "machine.openshift.io", Version: "v1beta1", Kind: "Machine"}
	// MachineHealthCheck is the Machine API's own health check; one remediating pauses new remediation.
	MachineHealthCheck = schema.GroupVersionKind{Group: "machine.openshift.io", Version: "v1beta1", Kind: "MachineHealthCheck"}
)

// InfrastructureName is the name of the Infrastructure singleton.
const InfrastructureName = "cluster"

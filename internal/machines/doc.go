// Package machines owns the link between a Node and its Machine, as pure checks: which Machine a
// node's annotations claim (ClaimOf), whether that Machine confirms the claim (Verify), whether it
// is a control-plane Machine (IsControlPlane), and the trimmed form in which the operator caches
// Machines (Transform). It reads no API: internal/targets reads the Machines through the cache.
//
// A node's annotations are written with the node's own credentials, so a claim is only a hint: a
// compromised kubelet could name a healthy control-plane Machine and, by reporting NotReady, have
// that Machine's host rebooted (Metal3 remediates the CR's Machine owner). The claim counts only
// where the Machine, which the node cannot write, confirms it: its status.nodeRef.name names the
// node (and, for Cluster API, its spec.clusterName is the cluster the node names).
//
// Two kinds of link exist:
//   - OpenShift Machine API: the annotation machine.openshift.io/machine: <namespace>/<name>, a
//     machine.openshift.io Machine.
//   - Cluster API: the annotations cluster.x-k8s.io/machine (the name) and
//     cluster.x-k8s.io/cluster-namespace, and cluster.x-k8s.io/cluster-name naming the cluster; a
//     cluster.x-k8s.io Machine in the version the API server prefers.
package machines

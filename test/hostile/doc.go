// Package hostile plays a compromised kubelet against the running operator on a real API server
// (issue 33, point 9). A kubelet may write any annotation and some labels on its own Node, its own
// status, and its own Lease in kube-node-lease; the operator must stay bounded in memory and events
// and go on remediating other nodes, whatever one node writes there.
//
// The suite starts kube-apiserver with the Node authorizer and the NodeRestriction admission
// plugin (--authorization-mode=Node,RBAC, --enable-admission-plugins=NodeRestriction) through
// test/localcluster, installs the chart, and gives a node its own credentials as a kubelet has them:
// a client certificate signed by the API server's client CA for user system:node:<name> in group
// system:nodes. Its specs:
//
//   - "NodeRestriction in force" checks, with those credentials, what the node may and may not do
//     (its own Node and status, another node's, restricted labels, taints, cordon, its Lease,
//     deleting and recreating itself) and reports the table;
//   - "a hostile kubelet" runs the image's manager binary (leader election, the chart's arguments)
//     against plain Node objects whose conditions the test writes, as the node lifecycle controller
//     would, and lets one node do, at random and for a while, everything its credentials allow on
//     its own Node and Lease, while another node really fails. It checks that the manager's memory
//     stays bounded (heap in use after a forced collection, after a warm-up and at the end), that
//     no other node is remediated or listed, that the failing node is remediated, that no start goes
//     beyond the repair budget or maxInFlight, that the leader never restarts, and that every
//     event the operator writes is accepted and at most 1 KiB.
//
// The attack is seeded: NHC_HOSTILE_SEED replays a run (the seed is printed), NHC_HOSTILE_DURATION
// makes it longer than its default 60s. Everything lives in the package's tests; docs/e2e.md
// describes the suite.
package hostile

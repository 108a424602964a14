// Package watch is the controllers' shared watch plumbing: what the one shared cache holds, which
// events pass, and which NodeHealthChecks each event reconciles. The controllers import it; it
// imports no controller, so no controller imports another.
//
// Routing (Affected). A NodeHealthCheck's decision (targets.Gather) reads, beyond its own nodes
// and CRs, the remediation CRs of other NodeHealthChecks for the nodes it selects (first wins) and
// the control-plane nodes remediated anywhere (one at a time). So Affected routes a node or CR
// event to the NodeHealthChecks that select the node, and to every NodeHealthCheck only when the
// node is, or was, a control-plane node or is not known: at 50 NodeHealthChecks one reconcile per
// event where every event reconciled all 50 before. A foreign party's node lease (a maintenance
// operator's) reconciles the NodeHealthChecks that select its node, so a node it held back is
// remediated as soon as it is released. Affected keeps each NodeHealthCheck's parsed selector and
// the names of the nodes it selects, updated by the events it routes before it enqueues anything,
// and serves them to the gatherers as their targets.NodeSource: a decision reads its pool's nodes
// from the node store by name instead of matching every node. NHCRequests maps what concerns every
// NodeHealthCheck, or those a test matches (a change of the upgrade gate, the clock skew verdict or
// a refused create; a template), to requests from the cached NodeHealthChecks, copying none.
//
// Nodes (NodeChangePredicate, TrimNode). A node event passes only when it changes what decisions
// read (labels, annotations, a condition's status or transition, cordoning, the kubelet version):
// heartbeats reconcile nothing. The cache keeps of a node only what decisions read.
//
// The cache (ConfigureManager). The manager's options both controllers rely on: unstructured reads
// (templates and remediation CRs) cached, Nodes and Machines trimmed, no managedFields, watch
// errors recorded for the gatherers (Errors, injected by NewWiring), and NodeHealthChecks that do not decode
// left out (decodeguard).
//
// Kinds known only at run time (Dynamic). Template and remediation CR kinds, and the upgrade
// detectors' kinds, are watched once per kind per controller from the first reconcile that reads
// them, through the shared cache; a kind the API server does not serve yet is tried again later.
//
// Wiring (NewWiring). Each controller gets, from the sources the process builds once (Sources: the
// Machine reader, the upgrade gate, the lease cache, the clock skew, refused creates, the node
// condition changes), a ready gatherer, its Affected routes, its Dynamic watch of remediation kinds
// (bound to the controller once built) and the wakeups that look at every NodeHealthCheck again;
// the controllers check at setup that they have what they need (Require) instead of falling back
// at each use.
//
// What only one controller routes (the nhc controller's CRD and template events) stays with it.
package watch

// Package watch is the controllers' shared watch plumbing: which NodeHealthChecks an event about
// a node, a remediation CR or a node lease reconciles. The controllers import it; it imports no
// controller, so no controller imports another.
//
// A NodeHealthCheck's decision (targets.Gather) reads, beyond its own nodes and CRs, the
// remediation CRs of other NodeHealthChecks for the nodes it selects (first wins) and the
// control-plane nodes remediated anywhere (one at a time). So Affected routes a node or CR event
// to the NodeHealthChecks that select the node, and to every NodeHealthCheck only when the node
// is, or was, a control-plane node or is not known: at 50 NodeHealthChecks one reconcile per event
// where every event reconciled all 50 before. A foreign party's node lease (a maintenance
// operator's) reconciles the NodeHealthChecks that select its node, so a node it held back is
// remediated as soon as it is released. Affected keeps each NodeHealthCheck's parsed selector and
// the names of the nodes it selects, updated by the events it routes before it enqueues anything,
// and serves them to the gatherers as their targets.NodeSource: a decision reads its pool's nodes
// from the node store by name instead of matching every node.
package watch

// Package remediation owns the remediation lifecycle: the remediation controller is the only writer
// of remediation CRs and node leases. Before it creates, escalates or deletes anything it gathers its
// own snapshot (internal/targets) and decides with the same pure internal/health functions as the
// nhc controller; NodeHealthCheck.status is a report it never takes orders from, and a status entry
// it cannot re-derive is reported (RemediationSkipped) and left alone (docs/architecture.md). It
// creates the first CR of a node the decision starts, escalates, removes the CRs of recovered nodes,
// and removes orphaned CRs of nodes that were deleted or are no longer selected (except while a
// remediator says it deletes the node for good).
//
// Files by capability: controller.go reconciles (gather, decide, act on each node's decision);
// start.go starts a remediation (control-plane nodes one at a time); escalate.go escalates a running
// one and flags old CRs; create.go builds and creates a CR and records the request it answers;
// cleanup.go deletes CRs (recovered, orphaned, made for an earlier Node of the name); lease.go holds
// and releases node leases; report.go emits events, each reported once where it would repeat;
// memory.go is the controller's own record of its writes and reports, pruned with nodes and
// NodeHealthChecks.
//
// Events, on the NodeHealthCheck (reasons declared in api/v1alpha1/events.go):
//   - RemediationCreated, RemediationRemoved: a CR created, deleted (the public operator's reasons);
//   - RemediationSkipped: a start or an escalation held back (another party's node lease, the etcd
//     guard, the gate of new remediations), or a status entry the controller cannot re-derive;
//   - NoTemplateLeft: the last escalation step timed out or failed and the node is still unhealthy;
//   - OldRemediationCR: a CR running for longer than 48 hours;
//   - RemediationRefused: the API server refused a CR's create for good (403, 422) several times;
//   - MachineLinkRejected: the Machine a node's annotations claim does not confirm it, so it owns no CR;
//   - WouldRemediate: what a dry-run NodeHealthCheck would escalate, for CRs that ran before dry-run.
//
// Metrics (metrics.go; docs/metrics.md lists all): nodehealthcheck_old_remediation_cr,
// nodehealthcheck_remediation_errors_total and nodehealthcheck_remediation_decisions_total (the
// decisions carried out per NodeHealthCheck, the tests' witness that this controller decided).
package remediation

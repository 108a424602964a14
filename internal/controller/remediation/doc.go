// Package remediation owns the remediation lifecycle: the remediation controller is the only writer
// of remediation CRs and node leases. Before it creates, escalates or deletes anything it gathers its
// own snapshot (internal/targets) and decides with the same pure internal/health functions as the
// nhc controller; NodeHealthCheck.status is a report it never takes orders from, and a status entry
// it cannot re-derive is reported (RemediationSkipped) and left alone (docs/architecture.md). It
// creates the first CR of a node the decision starts, escalates, removes the CRs of recovered nodes,
// and removes orphaned CRs of nodes that were deleted or are no longer selected (except while a
// remediator says it deletes the node for good).
//
// Events (the public operator's reasons): RemediationCreated, RemediationRemoved, RemediationSkipped
// (another NodeHealthCheck already remediates the node).
package remediation

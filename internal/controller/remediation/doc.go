// Package remediation owns the remediation lifecycle: the remediation controller is the only writer
// of remediation CRs. It acts on the decisions the nhc controller records in
// NodeHealthCheck.status.unhealthyNodes (docs/architecture.md): it creates the CR of an approved node
// from the template, removes the CRs of recovered nodes, and removes orphaned CRs of nodes that were
// deleted or are no longer selected (except while a remediator says it deletes the node for good).
//
// Events (the public operator's reasons): RemediationCreated, RemediationRemoved, RemediationSkipped
// (another NodeHealthCheck already remediates the node).
package remediation

// Package outcome derives how remediations end (issue 28.5): from a node's entry in
// NodeHealthCheck.status.unhealthyNodes before and after a status write, and what the status
// writer's snapshot shows of the node, it tells whether a remediation ended and how
// (api/v1alpha1's RemediationOutcome values), keeps the bounded record of each node's last
// outcomes (status.remediationOutcomes), and computes when a running remediation's escalation
// steps allow it to end (the deadline gauge).
//
// Everything here is a pure function of plain inputs: no client, no clock, no metrics. The nhc
// controller, the only writer of status, derives the outcomes of the status it is about to write
// from the status it replaces, records them in that same write, and counts them in the metric only
// once the write succeeded: a write that is held back (batched) or refused (a stale cache) is
// derived again from the stored status, so an outcome is neither lost nor doubled, also across
// restarts.
package outcome

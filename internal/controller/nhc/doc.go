// Package nhc owns the report: the NodeHealthCheck controller gathers a snapshot (internal/targets:
// the selected nodes, the referenced templates, every remediation CR of the NodeHealthCheck, the
// upgrade gate), which decides with internal/health, and writes NodeHealthCheck.status from it (it is
// its only writer): counts, unhealthyNodes, phase, reason, the Disabled condition, lastUpdateTime,
// and the outcomes of ended remediations (remediationOutcomes, derived by internal/outcome from the
// status it replaces, in the write that removes their CRs).
// The status is a report for people and tools; the remediation controller gathers and decides for
// itself and never takes it as an order (docs/architecture.md). It requeues at the next deadline
// the decision reports and never polls. Status writes of one NodeHealthCheck are batched
// (StatusBatch, holdWrite): many nodes changing within seconds cost a write per batch, not one each.
//
// Events (reasons kept from the public operator so existing alerts keep working): Disabled, Enabled,
// DetectedUnhealthy, RemediationSkipped; each on a transition, not on every reconcile. Besides, on
// nodes: RemediationRequested and RemediationRequestIgnored (a remediation request seen, or ignored
// and why; once per request value), InvalidNodeLabel, InvalidNodeAnnotation.
//
// Metrics (see docs/metrics.md): nodehealthcheck_ongoing_remediation (gauge, the public operator's
// labels), and the histograms nodehealthcheck_unhealthy_node_duration_seconds,
// nodehealthcheck_time_to_remediation_seconds and nodehealthcheck_time_to_recovery_seconds, labelled
// by NodeHealthCheck name and remediation kind only; nodehealthcheck_remediation_outcomes_total
// (counter: nhc, outcome, step) and nodehealthcheck_remediation_deadline_timestamp_seconds (gauge:
// nhc, node; escalation steps only). Histograms and the outcome counter are observed on status
// transitions after the status was written, so a restart never observes one twice. No series
// outlives what it describes: a NodeHealthCheck's go with it, and the per-node series of the public
// operator's metrics SeriesGrace after no NodeHealthCheck selects or lists the node (metricsState).
package nhc

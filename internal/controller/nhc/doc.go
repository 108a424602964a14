// Package nhc owns health evaluation: the NodeHealthCheck controller gathers the selected nodes, the
// referenced templates and the NodeHealthCheck's remediation CRs from the shared cache, asks
// internal/health for a decision, and writes NodeHealthCheck.status (it is its only writer): counts,
// unhealthyNodes (the decisions the remediation controller acts on, see docs/architecture.md), phase,
// reason, the Disabled condition and lastUpdateTime. It requeues at the next deadline the decision
// reports and never polls.
//
// Events (reasons kept from the public operator so existing alerts keep working): Disabled, Enabled,
// DetectedUnhealthy, RemediationSkipped; each on a transition, not on every reconcile.
//
// Metrics (see docs/metrics.md): nodehealthcheck_ongoing_remediation (gauge, the public operator's
// labels), and the histograms nodehealthcheck_unhealthy_node_duration_seconds,
// nodehealthcheck_time_to_remediation_seconds and nodehealthcheck_time_to_recovery_seconds, labelled
// by NodeHealthCheck name and remediation kind only. Histograms are observed on status transitions
// after the status was written, so a restart never observes one twice.
package nhc

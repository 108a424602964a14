// Package upgradeguard owns the upgrade gate (internal/upgrade): its controllers watch upgrade
// signals and are the gate's only writers; the nhc and remediation controllers only read it
// (upgrade.Reader) and are notified of its changes.
//
//   - Guard (controller "upgradeguard") evaluates the cluster-wide detectors: OpenShift's
//     ClusterVersion and Infrastructure and Machine API MachineHealthChecks, Cluster API
//     MachineHealthChecks (on automatically when the API server serves them, also when their CRDs
//     appear later), Cluster API rollouts and a cluster-wide pause ConfigMap or Lease (each on by
//     flag).
//   - NodeGuard (controller "upgradeguard-nodes") evaluates the node-level detectors for each
//     NodeHealthCheck (a kubelet rolling upgrade among its nodes, by flag; on OpenShift, a
//     MachineConfig update of a node about to be remediated) and records when each signal began,
//     for the maximum pause. The readers find the same signals in their own snapshots
//     (internal/targets), so a new one holds new remediations back at once.
//
// It writes no object: the nhc controller turns the gate into each NodeHealthCheck's
// UpgradeInProgress condition.
//
// Events (Guard, on the object that shows a signal): UpgradeDetected, UpgradeEnded,
// ConflictingMachineHealthCheck, TerminationHandlerTolerated.
//
// Metrics (see docs/metrics.md): nodehealthcheck_upgrade_gate (MetricGate, gauge; labels detector
// and state), read from the gate's DetectorStates at each scrape.
package upgradeguard

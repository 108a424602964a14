// Package upgrade holds what upgrade-aware pausing decides, with no API client, no
// controller-runtime and no metrics: the shared in-memory Gate, the pure node-level upgrade signals
// (MachineConfig updates on OpenShift, kubelet rolling upgrades), what the detectors read from
// objects, and the NodeHealthCheck condition that reports them (UpgradeInProgress), with the
// optional maximum pause.
//
// The gate is one-way: the upgradeguard controllers (internal/controller/upgradeguard) are its only
// writers, the cluster-wide detectors' reports and, per NodeHealthCheck, when each node-level signal
// began; the nhc and remediation controllers only read it (Reader) and are notified of its changes
// through a plain channel (Gate.Changes, watched through notify.Source). Its per-detector state
// (DetectorStates) is what the upgradeguard's gate metric shows.
//
// The gate starts unknown; unknown blocks new remediations until every detector the upgradeguard
// enabled has reported once. A closed gate blocks only new remediations: running ones continue,
// escalate and end as usual.
package upgrade

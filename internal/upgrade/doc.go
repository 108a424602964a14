// Package upgrade holds what upgrade-aware pausing decides, with no API client: the shared
// in-memory Gate that the upgradeguard controller feeds and the nhc and remediation controllers
// read, the pure node-level upgrade signals (MachineConfig updates on OpenShift, kubelet
// rolling upgrades), and the NodeHealthCheck condition that reports them (UpgradeInProgress), with
// the optional maximum pause.
//
// The gate starts unknown; unknown blocks new remediations until every detector the upgradeguard
// enabled has reported once. A closed gate blocks only new remediations: running ones continue,
// escalate and end as usual.
package upgrade

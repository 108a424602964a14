// Package targets gathers, from the shared cache, everything one NodeHealthCheck's decision depends
// on, and decides with the pure internal/health functions: the selected nodes, the remediation CRs
// the NodeHealthCheck owns (found by their owner reference, whatever kinds its spec names now), what
// other NodeHealthChecks remediate (first wins; one control-plane node at a time across all of them),
// its templates, the pause requests and the upgrade gate.
//
// Both controllers decide through it: the nhc controller to report the decision in status, and the
// remediation controller to re-derive each action right before it creates, escalates or deletes a
// remediation CR. Status is a report, not a command: writing it never causes a CR. Which events
// reconcile a NodeHealthCheck is internal/controller/watch's; the gatherer reads the selected
// nodes through a NodeSource (watch.Affected in the controllers).
package targets

package health

import (
	"fmt"
	"time"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/lease"
)

// The rules that hold a new CR back, as named chains (after cert-manager's policy chains): an
// ordered list of small checks, the first that holds gives the skip reason. One gate for every new
// CR: the rules that hold a node's first CR (startHolds) hold a running remediation's next step and
// its timed-out mark too (escalationHolds), but for those that concern a new remediation only:
//   - remediatedElsewhere, elsewhereUnknown: a running remediation is this NodeHealthCheck's own (the
//     node lease keeps the others off the node);
//   - repairBudget: it counts remediations started, not their steps;
//   - controlPlaneUnknown, controlPlaneBusy: one control-plane node at a time; a running one is that
//     one.
//
// And one for escalations only: dryRun, last, holds the real remediations a dry-run NodeHealthCheck
// ran before dry-run was set (its new ones are simulated, and escalate as simulated).
//
// Request headroom (limitRequests) and maxInFlight (limitInFlight) are applied after the chain, to
// the starts that passed it, since each weighs the starts against each other.

// holdCheck tells whether a rule holds the node's new CR: the skip reason and message ("" when it
// does not), and when to look again (zero: an event will say).
type holdCheck func(c *holdContext, n *Node) (SkipReason, string, time.Time)

// hold is one named rule.
type hold struct {
	name  string
	check holdCheck
}

// holdContext is what the rules read besides the node: the decision's input, the
// NodeHealthCheck-wide reason, the failure domains over their bound, and the control-plane node in
// remediation (which a start that passes every rule becomes).
type holdContext struct {
	in Input
	// d records the removals past their hold (beingRemoved).
	d *Decision
	// gateReason and gateMessage hold every node of the NodeHealthCheck: a blocker, an invalid
	// budget, the healthy-node threshold, returning nodes, storm recovery.
	gateReason  SkipReason
	gateMessage string
	// domains are the failure domains over their bound, with why.
	domains map[string]string
	// controlPlaneBusy names a control-plane node under remediation ("" none).
	controlPlaneBusy string
}

// startHolds hold a node's first CR, in order.
var startHolds = []hold{
	{"gate", holdByGate},
	{"failure domain", holdByFailureDomain},
	{"covered by a MachineHealthCheck", holdByMachineHealthCheck},
	{"remediated elsewhere", holdRemediatedElsewhere},
	{"remediated elsewhere, unknown", holdElsewhereUnknown},
	{"being removed", holdBeingRemoved},
	{"excluded", holdExcluded},
	{"repair budget", holdByRepairBudget},
	{"refused", holdRefused},
	{"leased", holdLeased},
	{"etcd quorum", holdByEtcdGuard},
	{"control plane unknown", holdControlPlaneUnknown},
	{"control plane busy", holdControlPlaneBusy},
}

// escalationHolds hold a running remediation's next step, in order: startHolds but for the rules of
// new remediations (see above).
var escalationHolds = []hold{
	{"gate", holdByGate},
	{"failure domain", holdByFailureDomain},
	{"covered by a MachineHealthCheck", holdByMachineHealthCheck},
	{"being removed", holdBeingRemoved},
	{"excluded", holdExcluded},
	{"refused", holdRefused},
	{"leased", holdLeased},
	{"etcd quorum", holdByEtcdGuard},
	{"dry run", holdDryRun},
}

// firstHold runs the chain on the node: the first rule that holds gives the reason and message, and
// the decision comes back when that rule says; "" when none holds.
func firstHold(chain []hold, c *holdContext, n *Node) (SkipReason, string) {
	for _, h := range chain {
		if r, m, again := h.check(c, n); r != "" {
			if !again.IsZero() {
				c.d.Next = Earliest(c.d.Next, again)
			}
			return r, m
		}
	}
	return "", ""
}

func holdByGate(c *holdContext, _ *Node) (SkipReason, string, time.Time) {
	return c.gateReason, c.gateMessage, time.Time{}
}

func holdByFailureDomain(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	if why := heldDomain(c.domains, n); why != "" {
		return SkipFailureDomain, why, time.Time{}
	}
	return "", "", time.Time{}
}

func holdByMachineHealthCheck(_ *holdContext, n *Node) (SkipReason, string, time.Time) {
	if n.CoveredBy == "" {
		return "", "", time.Time{}
	}
	return SkipCoveredByMachineHealthCheck, fmt.Sprintf("node %s is covered by Cluster API MachineHealthCheck %s, which remediates it", n.Name, n.CoveredBy), time.Time{}
}

func holdRemediatedElsewhere(_ *holdContext, n *Node) (SkipReason, string, time.Time) {
	if n.RemediatedElsewhere == "" {
		return "", "", time.Time{}
	}
	return SkipRemediatedElsewhere, fmt.Sprintf("node %s is remediated by NodeHealthCheck %s", n.Name, n.RemediatedElsewhere), time.Time{}
}

func holdElsewhereUnknown(_ *holdContext, n *Node) (SkipReason, string, time.Time) {
	if n.ElsewhereUnknown == "" {
		return "", "", time.Time{}
	}
	return SkipRemediatedElsewhere, n.ElsewhereUnknown, time.Time{}
}

func holdBeingRemoved(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	if !removing(c.in, n, c.d) {
		return "", "", time.Time{}
	}
	return SkipBeingRemoved, removalMessage(n, c.in.RemovalHold), time.Time{}
}

func holdExcluded(_ *holdContext, n *Node) (SkipReason, string, time.Time) {
	if !n.Excluded {
		return "", "", time.Time{}
	}
	return SkipExcluded, fmt.Sprintf("node %s is excluded by label %s=true", n.Name, remediationv1alpha1.ExcludeFromRemediationLabel), time.Time{}
}

func holdByRepairBudget(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	b := c.in.RepairBudget
	if b == nil {
		return "", "", time.Time{}
	}
	exhausted, until := b.Exhausted(n.Repairs, c.in.Now)
	if !exhausted {
		return "", "", time.Time{}
	}
	return SkipRepairBudget, fmt.Sprintf("node %s was remediated %d time(s) within %s (spec.repairBudget); the next remediation may start at %s, or after %s=%s=<time> is set on the NodeHealthCheck",
		n.Name, len(b.Counted(n.Repairs, c.in.Now)), b.Window, until.UTC().Format(time.RFC3339), remediationv1alpha1.RepairBudgetResetAnnotation, n.Name), until
}

func holdRefused(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	if n.Refused == "" {
		return "", "", time.Time{}
	}
	return SkipCreateRefused, n.Refused, recheck(n.RefusedUntil, c.in.Now)
}

func holdLeased(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	if n.LeasedBy == "" {
		return "", "", time.Time{}
	}
	return SkipLeased, leasedMessage(n), recheck(n.LeasedUntil, c.in.Now)
}

func holdByEtcdGuard(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	if !n.ControlPlane || n.EtcdGuard == "" {
		return "", "", time.Time{}
	}
	return SkipEtcdQuorum, n.EtcdGuard, c.in.Now.Add(lease.Recheck)
}

func holdDryRun(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	if !c.in.DryRun || n.Simulated {
		return "", "", time.Time{}
	}
	return SkipDryRun, fmt.Sprintf("the NodeHealthCheck is a dry run (spec.dryRun): node %s's running remediation, started before, is neither marked timed out nor followed by its next step", n.Name), time.Time{}
}

func holdControlPlaneUnknown(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	if !n.ControlPlane || c.in.ControlPlaneUnknown == "" {
		return "", "", time.Time{}
	}
	// A kind that syncs again may bring no event.
	return SkipControlPlane, fmt.Sprintf("control-plane node %s waits: %s", n.Name, c.in.ControlPlaneUnknown), c.in.Now.Add(lease.Recheck)
}

func holdControlPlaneBusy(c *holdContext, n *Node) (SkipReason, string, time.Time) {
	if !n.ControlPlane || c.controlPlaneBusy == "" {
		return "", "", time.Time{}
	}
	// One control-plane node at a time keeps etcd quorum and the API available.
	return SkipControlPlane, fmt.Sprintf("control-plane node %s waits until the remediation of control-plane node %s ends", n.Name, c.controlPlaneBusy), time.Time{}
}

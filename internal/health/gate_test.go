package health

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// nhcWideReasons are the skip reasons of the gate of new remediations that hold a whole
// NodeHealthCheck: while a start is skipped for one of them, no escalation is due either.
var nhcWideReasons = []SkipReason{SkipDisabled, SkipPaused, SkipUpgrade, SkipInvalidBudget, SkipThreshold, SkipStorm, SkipNodesReturning, SkipClockSkew}

// checkGate asserts the one-gate rule over a decision: an escalation acts only where a first step
// could start: no blocker, a resolvable budget, the threshold holding, not excluded, no lease of
// another party, no etcd objection; and a held one acts on nothing.
func checkGate(t *testing.T, in Input, d Decision) {
	t.Helper()
	closed := len(in.Blockers) > 0 || d.BudgetErr != nil || d.Healthy < d.MinHealthy
	for _, n := range d.Nodes {
		if n.Action == Skip && slices.Contains(nhcWideReasons, n.SkipReason) {
			closed = true
		}
	}
	byName := map[string]Node{}
	for _, n := range in.Nodes {
		byName[n.Name] = n
	}
	for _, nd := range d.Nodes {
		n := byName[nd.Name]
		switch {
		case nd.Action == StartRemediation && (n.LeasedBy != "" || n.Refused != "" || (n.ControlPlane && n.EtcdGuard != "")):
			t.Fatalf("started %s while leased by %q, refused (%q) or the etcd guard objects (%q)", nd.Name, n.LeasedBy, n.Refused, n.EtcdGuard)
		case nd.Action == StartRemediation && len(in.Steps) > 0 && (nd.Step == nil || *nd.Step != *Escalate(EscalationInput{Steps: in.Steps, Now: in.Now}).Next):
			t.Fatalf("started %s with step %v, want the first", nd.Name, nd.Step)
		case nd.Action != ContinueRemediation || !nd.Escalation.Due():
		case closed:
			t.Fatalf("escalated %s (%+v) although the gate of new remediations is closed", nd.Name, nd.Escalation)
		case n.Excluded || n.LeasedBy != "" || n.Refused != "" || n.CoveredBy != "" || (n.ControlPlane && n.EtcdGuard != ""):
			t.Fatalf("escalated %s although it is excluded, leased by %q, covered by %q or the etcd guard objects (%q)", nd.Name, n.LeasedBy, n.CoveredBy, n.EtcdGuard)
		}
		if nd.EscalationHeld() && (nd.Escalation.Due() || nd.Escalation.Exhausted || nd.SkipMessage == "") {
			t.Fatalf("held escalation of %s still acts: %+v (%q)", nd.Name, nd.Escalation, nd.SkipMessage)
		}
	}
	if !d.Next.IsZero() && !d.Next.After(in.Now) {
		t.Fatalf("next check %v is not after now %v: a held escalation would be retried in a hot loop", d.Next, in.Now)
	}
}

// One gate for every new CR: whatever holds a first step holds a running remediation's next step
// and its timeout mark; the running CR stays (the action is still ContinueRemediation).
func TestEscalationHeldByTheGateOfNewRemediations(t *testing.T) {
	healthy := ready(corev1.ConditionTrue, time.Hour)
	sick := ready(corev1.ConditionUnknown, 10*time.Minute)
	timedOutReboot := []StepCR{{StepKey: simulatedSteps[0].StepKey, Created: now.Add(-4 * time.Minute)}} // 3m timeout
	running := func(mods ...func(*Node)) Node {
		n := Node{Name: "esc", Conditions: []corev1.NodeCondition{sick}, Remediating: true, CRs: timedOutReboot}
		for _, m := range mods {
			m(&n)
		}
		return n
	}
	pool := func(esc Node, more ...Node) []Node {
		return append([]Node{esc, node("h1", false, healthy), node("h2", false, healthy), node("h3", false, healthy)}, more...)
	}
	three, four := intstr.FromInt32(3), intstr.FromInt32(4)
	leaseEnd := now.Add(7 * time.Minute)
	tests := []struct {
		name string
		in   Input
		held SkipReason
		next time.Time
	}{
		{name: "nothing holds it: the next step starts", in: Input{Nodes: pool(running())}},
		{name: "paused", in: Input{Nodes: pool(running()), Blockers: []Blocker{{Reason: SkipPaused, Message: "paused by admin"}}}, held: SkipPaused},
		{name: "an upgrade", in: Input{Nodes: pool(running()), Blockers: []Blocker{{Reason: SkipUpgrade, Message: "ClusterVersion progressing"}}}, held: SkipUpgrade},
		{name: "disabled", in: Input{Nodes: pool(running()), Blockers: []Blocker{{Reason: SkipDisabled, Message: "template gone"}}}, held: SkipDisabled},
		{name: "clock skew", in: Input{Nodes: pool(running()), Blockers: []Blocker{{Reason: SkipClockSkew, Message: "5m ahead"}}}, held: SkipClockSkew},
		{name: "the healthy-node threshold (a partition)", in: Input{Nodes: pool(running(), node("down", true, sick)), MinHealthy: &four}, held: SkipThreshold},
		{name: "an invalid budget", in: Input{Nodes: pool(running()), MinHealthy: ptrTo(intstr.FromInt32(9))}, held: SkipThreshold},
		{name: "storm recovery", in: Input{Nodes: pool(running()), StormCooldown: ptrTo(time.Hour), Storm: StormState{Active: true, CooldownSince: now.Add(-time.Minute)}},
			held: SkipStorm, next: now.Add(59 * time.Minute)},
		{name: "nodes returning", in: Input{ReturnGrace: 10 * time.Minute, MinHealthy: &three, Nodes: []Node{running(), node("h1", false, healthy), node("h2", false, healthy),
			{Name: "back", Conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue, time.Minute)}, Created: now.Add(-time.Hour)}}},
			held: SkipNodesReturning, next: now.Add(9 * time.Minute)},
		{name: "the exclusion label", in: Input{Nodes: pool(running(func(n *Node) { n.Excluded = true }))}, held: SkipExcluded},
		{name: "a Cluster API MachineHealthCheck covers it", in: Input{Nodes: pool(running(func(n *Node) { n.CoveredBy = "ns/mhc" }))}, held: SkipCoveredByMachineHealthCheck},
		{name: "a lease someone else holds", in: Input{Nodes: pool(running(func(n *Node) { n.LeasedBy, n.LeasedUntil = "node-maintenance", leaseEnd }))},
			held: SkipLeased, next: leaseEnd},
		{name: "a lease someone else holds without expiry", in: Input{Nodes: pool(running(func(n *Node) { n.LeasedBy = "node-maintenance" }))},
			held: SkipLeased, next: now.Add(time.Minute)},
		{name: "the etcd guard", in: Input{Nodes: pool(running(func(n *Node) { n.ControlPlane, n.EtcdGuard = true, "guard pod Ready=True" }))},
			held: SkipEtcdQuorum, next: now.Add(time.Minute)},
		{name: "CRs the API server refuses for good", in: Input{Nodes: pool(running(func(n *Node) { n.Refused, n.RefusedUntil = "forbidden", now.Add(10*time.Minute) }))},
			held: SkipCreateRefused, next: now.Add(10 * time.Minute)},
		{name: "the etcd guard speaks only for control-plane nodes", in: Input{Nodes: pool(running(func(n *Node) { n.EtcdGuard = "guard pod Ready=True" }))}},
		{name: "a dry run: its real CRs, started before it, run on unescalated", in: Input{DryRun: true, Nodes: pool(running())}, held: SkipDryRun},
		{name: "a dry run: its simulated remediation escalates, as simulated", in: Input{DryRun: true, Nodes: pool(running(func(n *Node) { n.Simulated = true }))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now, tt.in.UnhealthyConditions, tt.in.Steps = now, defaults, simulatedSteps
			if tt.name == "an invalid budget" {
				tt.in.MinHealthy = nil
				tt.in.MaxUnhealthy = ptrTo(intstr.FromInt32(9))
				tt.held = SkipInvalidBudget
			}
			d := Decide(tt.in)
			checkGate(t, tt.in, d)
			i := slices.IndexFunc(d.Nodes, func(n NodeDecision) bool { return n.Name == "esc" })
			nd := d.Nodes[i]
			if nd.Action != ContinueRemediation {
				t.Fatalf("action %v, want the running remediation to continue", nd.Action)
			}
			if tt.held == "" {
				if nd.EscalationHeld() || nd.Escalation.Next == nil || nd.Escalation.Next.TemplateName != "fence" || !slices.Equal(nd.Escalation.TimeOut, []int{0}) {
					t.Fatalf("escalation %+v (held %q), want reboot timed out and fence next", nd.Escalation, nd.SkipReason)
				}
				return
			}
			if nd.SkipReason != tt.held || !nd.EscalationHeld() || nd.Escalation.Due() {
				t.Fatalf("escalation %+v held for %q (%q), want held for %q", nd.Escalation, nd.SkipReason, nd.SkipMessage, tt.held)
			}
			if w := nd.Escalation.Withheld; w == nil || w.Next == nil || w.Next.TemplateName != "fence" || !slices.Equal(w.TimeOut, []int{0}) {
				t.Fatalf("withheld escalation %+v, want what it would have done: reboot timed out and fence next", w)
			}
			if !d.Next.Equal(tt.next) {
				t.Fatalf("next %v, want %v", d.Next, tt.next)
			}
			if held := d.Held(); len(held) != 1 || held[0].Name != "esc" {
				t.Fatalf("Held() = %v", held)
			}
		})
	}
}

// A start carries its first step, and the node's own holds (a lease someone else holds, the etcd
// guard) skip it with a reason that names them; an etcd objection on one control-plane node does
// not take the one control-plane slot from another.
func TestStartCarriesItsStepAndTheNodesHolds(t *testing.T) {
	healthy := ready(corev1.ConditionTrue, time.Hour)
	sick := ready(corev1.ConditionUnknown, 10*time.Minute)
	in := Input{Now: now, UnhealthyConditions: defaults, Steps: simulatedSteps, Nodes: []Node{
		{Name: "cp-a", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true, EtcdGuard: "the etcd guard pod of cp-a is Ready=True"},
		{Name: "cp-b", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true},
		{Name: "leased", Conditions: []corev1.NodeCondition{sick}, LeasedBy: "node-maintenance", LeasedUntil: now.Add(5 * time.Minute)},
		{Name: "w", Conditions: []corev1.NodeCondition{sick}},
		node("h1", false, healthy), node("h2", false, healthy), node("h3", false, healthy), node("h4", false, healthy), node("h5", false, healthy),
	}}
	d := Decide(in)
	checkGate(t, in, d)
	want := map[string]SkipReason{"cp-a": SkipEtcdQuorum, "leased": SkipLeased}
	for _, nd := range d.Nodes {
		switch r, skipped := want[nd.Name]; {
		case skipped && (nd.Action != Skip || nd.SkipReason != r):
			t.Errorf("%s: %v %q, want skipped for %q", nd.Name, nd.Action, nd.SkipReason, r)
		case !skipped && (nd.Action != StartRemediation || nd.Step == nil || nd.Step.TemplateName != "reboot"):
			t.Errorf("%s: %v with step %v, want started with reboot", nd.Name, nd.Action, nd.Step)
		}
	}
	if !d.Next.Equal(now.Add(time.Minute)) {
		t.Errorf("next %v, want the etcd recheck a minute from now", d.Next)
	}
	if got := in.MayAct(); !slices.Equal(got, []string{"cp-a", "cp-b", "leased", "w"}) {
		t.Errorf("MayAct() = %v", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestHoldChains: one gate for every new CR. Every rule that holds a running remediation's next step
// holds a first CR too, in the same order, but the dry run (of escalations alone, last), and the rules
// of first CRs alone are exactly the documented exceptions (holds.go).
func TestHoldChains(t *testing.T) {
	var starts, escalations []string
	for _, h := range startHolds {
		starts = append(starts, h.name)
	}
	// Of escalations alone: dry run, last (a dry run's new remediations are simulated).
	var escalationOnly []string
	for _, h := range escalationHolds {
		if h.name == "dry run" {
			escalationOnly = append(escalationOnly, h.name)
			continue
		}
		escalations = append(escalations, h.name)
	}
	if !slices.Equal(escalationOnly, []string{"dry run"}) || escalationHolds[len(escalationHolds)-1].name != "dry run" {
		t.Fatalf("rules of escalations alone: %v, want the dry run, last", escalationOnly)
	}
	exceptions := []string{"remediated elsewhere", "remediated elsewhere, unknown", "repair budget", "control plane unknown", "control plane busy"}
	var startOnly []string
	at := 0
	for _, name := range starts {
		if at < len(escalations) && escalations[at] == name {
			at++
			continue
		}
		startOnly = append(startOnly, name)
	}
	if at != len(escalations) {
		t.Fatalf("escalation holds %v are not the start holds %v, in order, but for the exceptions", escalations, starts)
	}
	if !slices.Equal(startOnly, exceptions) {
		t.Fatalf("rules of first CRs alone: %v, want %v", startOnly, exceptions)
	}
}

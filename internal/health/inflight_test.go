package health

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestMaxInFlight: at most spec.maxInFlight selected nodes are under remediation at once; the
// running ones count first, the starts go in the order their nodes became unhealthy, the others
// wait with the reason RemediationsInFlight; escalation is not limited.
func TestMaxInFlight(t *testing.T) {
	healthy := func(name string) Node { return node(name, false, ready(corev1.ConditionTrue, time.Hour)) }
	sick := func(name string, since time.Duration) Node {
		return node(name, false, ready(corev1.ConditionUnknown, since))
	}
	running := func(name string) Node { return node(name, true, ready(corev1.ConditionUnknown, time.Hour)) }
	// exhausted ran every step; the last one is marked timed out.
	exhausted := func(name string) Node {
		n := running(name)
		n.CRs = []StepCR{
			{StepKey: simulatedSteps[0].StepKey, Created: now.Add(-50 * time.Minute), TimedOut: true, TimedOutAt: now.Add(-47 * time.Minute)},
			{StepKey: simulatedSteps[1].StepKey, Created: now.Add(-47 * time.Minute), TimedOut: true, TimedOutAt: now.Add(-37 * time.Minute)},
			{StepKey: simulatedSteps[2].StepKey, Created: now.Add(-37 * time.Minute), TimedOut: true, TimedOutAt: now.Add(-5 * time.Minute)}}
		return n
	}
	// lastStepOver ran every step; the last one is over but not marked yet: it still acts (the mark).
	lastStepOver := func(name string) Node {
		n := exhausted(name)
		n.CRs[2].TimedOut, n.CRs[2].TimedOutAt = false, time.Time{}
		return n
	}
	// confirming is healthy again and waits for an administrator's confirmation (negative delay).
	confirming := func(name string) Node { return node(name, true, ready(corev1.ConditionTrue, time.Minute)) }
	pool := func(extra ...Node) []Node {
		var out []Node
		for i := range 10 {
			out = append(out, healthy(fmt.Sprintf("h%d", i)))
		}
		return append(out, extra...)
	}
	two, pct := intstr.FromInt32(2), intstr.FromString("10%")
	zero, tiny := intstr.FromInt32(0), intstr.FromString("1%")
	minHealthy := intstr.FromInt32(1)
	tests := []struct {
		name     string
		max      *intstr.IntOrString
		nodes    []Node
		started  []string
		inFlight []string // skipped for RemediationsInFlight
		reason   SkipReason
		delay    time.Duration
		// unselected counts the nodes no longer selected whose CRs are kept.
		unselected int
		stalled    map[string]StallReason
	}{
		{name: "unset: every start", nodes: pool(sick("a", 10*time.Minute), sick("b", 20*time.Minute), sick("c", 30*time.Minute)),
			started: []string{"a", "b", "c"}},
		{name: "two: the nodes that failed first", max: &two, nodes: pool(sick("a", 10*time.Minute), sick("b", 20*time.Minute), sick("c", 30*time.Minute)),
			started: []string{"b", "c"}, inFlight: []string{"a"}},
		{name: "same time: by name", max: &two, nodes: pool(sick("z", 10*time.Minute), sick("y", 10*time.Minute), sick("x", 10*time.Minute)),
			started: []string{"x", "y"}, inFlight: []string{"z"}},
		{name: "running ones count first", max: &two, nodes: pool(running("r"), sick("a", 10*time.Minute), sick("b", 20*time.Minute)),
			started: []string{"b"}, inFlight: []string{"a"}},
		{name: "full: nothing starts", max: &two, nodes: pool(running("r"), running("s"), sick("a", 10*time.Minute)),
			inFlight: []string{"a"}},
		{name: "a percentage rounds up: 10% of 13 is 2", max: &pct, nodes: pool(sick("a", 10*time.Minute), sick("b", 20*time.Minute), sick("c", 30*time.Minute)),
			started: []string{"b", "c"}, inFlight: []string{"a"}},
		{name: "a small percentage still lets one go", max: &tiny, nodes: pool(sick("a", 10*time.Minute), sick("b", 20*time.Minute)),
			started: []string{"b"}, inFlight: []string{"a"}},
		{name: "zero is invalid: nothing starts", max: &zero, nodes: pool(sick("a", 10*time.Minute)), reason: SkipInvalidBudget},
		{name: "a remediation whose steps are exhausted holds no slot", max: &two, nodes: pool(exhausted("r"), running("s"), sick("a", 10*time.Minute)),
			started: []string{"a"}, stalled: map[string]StallReason{"r": StallStepsExhausted}},
		{name: "one whose last step is over but not marked yet still does", max: &two, nodes: pool(lastStepOver("r"), running("s"), sick("a", 10*time.Minute)),
			inFlight: []string{"a"}},
		{name: "one waiting for manual confirmation holds no slot", max: &two, delay: -1, nodes: pool(confirming("r"), running("s"), sick("a", 10*time.Minute)),
			started: []string{"a"}, stalled: map[string]StallReason{"r": StallAwaitingConfirmation}},
		{name: "one kept by a positive healthy delay still does", max: &two, delay: time.Hour, nodes: pool(confirming("r"), running("s"), sick("a", 10*time.Minute)),
			inFlight: []string{"a"}},
		{name: "unselected nodes whose CRs are kept (being replaced) hold slots", max: &two, unselected: 1, nodes: pool(running("s"), sick("a", 10*time.Minute)),
			inFlight: []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: now, Nodes: tc.nodes, UnhealthyConditions: defaults, MinHealthy: &minHealthy, MaxInFlight: tc.max, InFlightUnselected: tc.unselected,
				Steps: simulatedSteps}
			if tc.delay != 0 {
				in.HealthyDelay = &tc.delay
			}
			d := Decide(in)
			stalled := map[string]StallReason{}
			for _, nd := range d.Stalled() {
				stalled[nd.Name] = nd.Stalled()
			}
			if len(stalled) != len(tc.stalled) || (len(stalled) > 0 && !maps.Equal(stalled, tc.stalled)) {
				t.Fatalf("stalled %v, want %v", stalled, tc.stalled)
			}
			checkDecision(t, d, tc.nodes, now)
			got := d.Started()
			slices.Sort(got)
			if !slices.Equal(got, tc.started) {
				t.Fatalf("started %v, want %v", got, tc.started)
			}
			var waiting []string
			for _, n := range d.Skipped() {
				switch {
				case n.SkipReason == SkipInFlight:
					waiting = append(waiting, n.Name)
					if !strings.Contains(n.SkipMessage, "maxInFlight "+tc.max.String()) || n.Step != nil {
						t.Fatalf("%s: %s, step %v", n.Name, n.SkipMessage, n.Step)
					}
				case n.SkipReason != tc.reason:
					t.Fatalf("%s skipped for %s: %s", n.Name, n.SkipReason, n.SkipMessage)
				}
			}
			if !slices.Equal(waiting, tc.inFlight) {
				t.Fatalf("waiting for a remediation to end: %v, want %v", waiting, tc.inFlight)
			}
			for _, n := range d.Nodes {
				if n.Action == ContinueRemediation && n.SkipReason != "" {
					t.Fatalf("running remediation of %s held: %s", n.Name, n.SkipReason)
				}
			}
		})
	}
}

// TestNodesBeingRemoved: a node someone removes gets no new remediation where
// spec.skipNodesBeingRemoved set BeingRemovedBy; its running remediation continues.
func TestNodesBeingRemoved(t *testing.T) {
	minHealthy := intstr.FromInt32(1)
	removed := node("removed", false, ready(corev1.ConditionUnknown, time.Hour))
	removed.BeingRemovedBy = "Karpenter (taint karpenter.sh/disrupted)"
	running := node("running", true, ready(corev1.ConditionUnknown, time.Hour))
	running.BeingRemovedBy = "the cluster autoscaler (taint ToBeDeletedByClusterAutoscaler)"
	nodes := []Node{node("h1", false, ready(corev1.ConditionTrue, time.Hour)), node("h2", false, ready(corev1.ConditionTrue, time.Hour)),
		removed, running, node("sick", false, ready(corev1.ConditionUnknown, time.Hour))}
	d := Decide(Input{Now: now, Nodes: nodes, UnhealthyConditions: defaults, MinHealthy: &minHealthy})
	checkDecision(t, d, nodes, now)
	if got := d.Started(); !slices.Equal(got, []string{"sick"}) {
		t.Fatalf("started %v, want [sick]", got)
	}
	byName := map[string]NodeDecision{}
	for _, n := range d.Nodes {
		byName[n.Name] = n
	}
	r := byName["removed"]
	if r.SkipReason != SkipBeingRemoved || !strings.Contains(r.SkipMessage, "node removed is being removed by Karpenter") {
		t.Fatalf("removed: %s %s", r.SkipReason, r.SkipMessage)
	}
	if c := byName["running"]; c.Action != ContinueRemediation || c.SkipReason != "" {
		t.Fatalf("running: %v %s", c.Action, c.SkipReason)
	}
}

// TestRemovalHoldsEscalationForABoundedTime: a due escalation on a node being removed is held (a
// destructive step on a node going away does harm and no good); a removal that lasted
// Input.RemovalHold or longer holds nothing, and is reported; one that may still end brings the
// decision back when it would.
func TestRemovalHoldsEscalationForABoundedTime(t *testing.T) {
	minHealthy := intstr.FromInt32(1)
	hold := 30 * time.Minute
	timedOutReboot := []StepCR{{StepKey: simulatedSteps[0].StepKey, Created: now.Add(-4 * time.Minute)}} // 3m timeout
	for _, tc := range []struct {
		name    string
		since   time.Duration // ago
		held    bool
		overdue bool
	}{
		{name: "removal began 10 minutes ago: held", since: 10 * time.Minute, held: true},
		{name: "removal began an hour ago: no longer held", since: time.Hour, overdue: true},
		{name: "no time known: held", held: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			running := node("running", true, ready(corev1.ConditionUnknown, time.Hour))
			running.CRs = timedOutReboot
			running.BeingRemovedBy = "Karpenter (taint karpenter.sh/disrupted)"
			if tc.since > 0 {
				running.BeingRemovedSince = now.Add(-tc.since)
			}
			nodes := []Node{node("h1", false, ready(corev1.ConditionTrue, time.Hour)), node("h2", false, ready(corev1.ConditionTrue, time.Hour)), running}
			d := Decide(Input{Now: now, Nodes: nodes, UnhealthyConditions: defaults, MinHealthy: &minHealthy, Steps: simulatedSteps, RemovalHold: hold})
			checkDecision(t, d, nodes, now)
			nd, _ := findDecision(d, "running")
			if held := nd.EscalationHeld() && nd.SkipReason == SkipBeingRemoved; held != tc.held {
				t.Fatalf("held %v (%s: %s), want %v", held, nd.SkipReason, nd.SkipMessage, tc.held)
			}
			if !tc.held && nd.Escalation.Next == nil {
				t.Fatalf("not held, yet no next step: %+v", nd.Escalation)
			}
			if overdue := len(d.RemovalsOverdue) == 1; overdue != tc.overdue {
				t.Fatalf("removals overdue %+v, want %v", d.RemovalsOverdue, tc.overdue)
			}
			if tc.held && tc.since > 0 && !d.Next.Equal(now.Add(-tc.since).Add(hold)) {
				t.Fatalf("next %v, want the hold's end", d.Next)
			}
		})
	}
}

// TestFailureDomains: a zone that loses more nodes than its bound starts no new remediation (nor
// escalation), while the other zones go on; nodes without the label form a domain of their own.
func TestFailureDomains(t *testing.T) {
	in := func(zone string, n Node) Node { n.Domain = zone; return n }
	healthy := func(name, zone string) Node {
		return in(zone, node(name, false, ready(corev1.ConditionTrue, time.Hour)))
	}
	sick := func(name, zone string) Node {
		return in(zone, node(name, false, ready(corev1.ConditionUnknown, time.Hour)))
	}
	soon := func(name, zone string) Node {
		return in(zone, node(name, false, ready(corev1.ConditionFalse, time.Minute)))
	}
	minHealthy := intstr.FromString("51%")
	one, quarter := intstr.FromInt32(1), intstr.FromString("25%")
	// Three zones of four; zone a loses three (33% of the pool: a flat 51% threshold would let them all go).
	pool := []Node{sick("a1", "a"), sick("a2", "a"), soon("a3", "a"), healthy("a4", "a"),
		sick("b1", "b"), healthy("b2", "b"), healthy("b3", "b"), healthy("b4", "b"),
		healthy("c1", "c"), healthy("c2", "c"), healthy("c3", "c"), healthy("c4", "c"),
		sick("x1", NoDomain), healthy("x2", NoDomain)}
	for _, tc := range []struct {
		name    string
		bound   *intstr.IntOrString
		started []string
	}{
		{"no bound: every unhealthy node", nil, []string{"a1", "a2", "b1", "x1"}},
		{"at most 1 per zone: zone a waits, b and the unlabelled go on", &one, []string{"b1", "x1"}},
		{"25% of a zone of 4 rounds up to 1", &quarter, []string{"b1", "x1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := Input{Now: now, Nodes: pool, UnhealthyConditions: defaults, MinHealthy: &minHealthy}
			if tc.bound != nil {
				input.FailureDomain = &FailureDomain{TopologyKey: "topology.kubernetes.io/zone", MaxUnhealthy: *tc.bound}
			}
			d := Decide(input)
			checkDecision(t, d, pool, now)
			got := d.Started()
			slices.Sort(got)
			if !slices.Equal(got, tc.started) {
				t.Fatalf("started %v, want %v", got, tc.started)
			}
			for _, n := range d.Skipped() {
				if n.SkipReason != SkipFailureDomain || !strings.Contains(n.SkipMessage, "in failure domain topology.kubernetes.io/zone=a 3 of 4 selected nodes are unhealthy or about to be, at most 1 allowed") {
					t.Fatalf("%s: %s %s", n.Name, n.SkipReason, n.SkipMessage)
				}
			}
		})
	}

	// A running remediation in the held zone does not escalate; one elsewhere does.
	running := func(name, zone string) Node {
		n := in(zone, node(name, true, ready(corev1.ConditionUnknown, time.Hour)))
		n.CRs = []StepCR{{StepKey: StepKey{TemplateKind: "T", TemplateName: "first"}, Created: now.Add(-time.Hour)}}
		return n
	}
	steps := []Step{{StepKey: StepKey{TemplateKind: "T", TemplateName: "first"}, Order: 1, Timeout: time.Minute},
		{StepKey: StepKey{TemplateKind: "T", TemplateName: "second"}, Order: 2, Timeout: time.Minute}}
	nodes := []Node{running("a1", "a"), sick("a2", "a"), healthy("a3", "a"), healthy("a4", "a"),
		running("b1", "b"), healthy("b2", "b"), healthy("b3", "b"), healthy("b4", "b")}
	d := Decide(Input{Now: now, Nodes: nodes, UnhealthyConditions: defaults, MinHealthy: &one, Steps: steps,
		FailureDomain: &FailureDomain{TopologyKey: "zone", MaxUnhealthy: one}})
	for _, n := range d.Nodes {
		switch n.Name {
		case "a1":
			if n.SkipReason != SkipFailureDomain || n.Escalation.Next != nil {
				t.Fatalf("a1 escalates in a held zone: %s %+v", n.SkipReason, n.Escalation)
			}
		case "b1":
			if n.SkipReason != "" || n.Escalation.Next == nil {
				t.Fatalf("b1 does not escalate: %s %+v", n.SkipReason, n.Escalation)
			}
		}
	}
}

// TestFailureDomainsANodeCannotEscape: a node that moved between domains lately (its own kubelet may
// set its zone label) counts as failing in each of them, in no domain's size, and is held by any of
// them: leaving a held domain does not start it, joining another holds that one too, and joining one
// does not lift its percentage bound.
func TestFailureDomainsANodeCannotEscape(t *testing.T) {
	minHealthy := intstr.FromString("51%")
	one, quarter := intstr.FromInt32(1), intstr.FromString("25%")
	at := func(zone string, n Node, was ...string) Node { n.Domain, n.OtherDomains = zone, was; return n }
	healthy := func(name, zone string, was ...string) Node {
		return at(zone, node(name, false, ready(corev1.ConditionTrue, time.Hour)), was...)
	}
	sick := func(name, zone string, was ...string) Node {
		return at(zone, node(name, false, ready(corev1.ConditionUnknown, time.Hour)), was...)
	}
	for _, tc := range []struct {
		name    string
		bound   intstr.IntOrString
		nodes   []Node
		started []string
		held    []string
	}{
		{name: "a failing node that left a held zone is still held, and still counts there", bound: one,
			nodes: []Node{sick("a1", "a"), sick("fled", "b", "a"), healthy("a2", "a"), healthy("a3", "a"), healthy("b1", "b"), healthy("b2", "b"), healthy("b3", "b")},
			held:  []string{"a1", "fled"}},
		{name: "it also counts in the zone it joined", bound: one,
			nodes: []Node{sick("b1", "b"), sick("moved", "b", "a"), healthy("a2", "a"), healthy("a3", "a"), healthy("b2", "b"), healthy("b3", "b"), healthy("b4", "b")},
			held:  []string{"b1", "moved"}},
		// 25% of zone a's 3 nodes is 1; counting the two that joined, 25% of 5 would be 2.
		{name: "healthy nodes joining a zone do not lift its percentage bound", bound: quarter,
			nodes: []Node{sick("a1", "a"), sick("a2", "a"), healthy("a3", "a"), healthy("j1", "a", "b"), healthy("j2", "a", "b"),
				healthy("b1", "b"), healthy("b2", "b"), healthy("b3", "b"), healthy("b4", "b")},
			held: []string{"a1", "a2"}},
		{name: "without moves, the same zones go on", bound: one,
			nodes:   []Node{sick("a1", "a"), sick("b0", "b"), healthy("a2", "a"), healthy("a3", "a"), healthy("b1", "b"), healthy("b2", "b"), healthy("b3", "b")},
			started: []string{"a1", "b0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := Input{Now: now, Nodes: tc.nodes, UnhealthyConditions: defaults, MinHealthy: &minHealthy,
				FailureDomain: &FailureDomain{TopologyKey: "topology.kubernetes.io/zone", MaxUnhealthy: tc.bound}}
			d := Decide(input)
			checkDecision(t, d, tc.nodes, now)
			got := d.Started()
			slices.Sort(got)
			if !slices.Equal(got, tc.started) {
				t.Fatalf("started %v, want %v", got, tc.started)
			}
			var held []string
			for _, n := range d.Skipped() {
				if n.SkipReason == SkipFailureDomain {
					held = append(held, n.Name)
				}
			}
			slices.Sort(held)
			if !slices.Equal(held, tc.held) {
				t.Fatalf("held %v, want %v", held, tc.held)
			}
		})
	}
}

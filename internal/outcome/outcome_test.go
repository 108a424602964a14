package outcome

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

var t0 = time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)

// Three escalation steps of two kinds, given out of order, as a spec may list them.
var (
	reboot    = health.Step{StepKey: health.StepKey{TemplateKind: "RebootTemplate", TemplateName: "reboot"}, Order: 1, Timeout: 5 * time.Minute}
	reboot2   = health.Step{StepKey: health.StepKey{TemplateKind: "RebootTemplate", TemplateName: "hard-reboot"}, Order: 2, Timeout: 10 * time.Minute}
	reprov    = health.Step{StepKey: health.StepKey{TemplateKind: "ReprovisionTemplate", TemplateName: "reprovision"}, Order: 3, Timeout: time.Hour}
	escalated = []health.Step{reprov, reboot, reboot2}
	single    = []health.Step{{StepKey: health.StepKey{TemplateKind: "RebootTemplate", TemplateName: "reboot"}}}
)

// cr is the status record of a CR of the step, created at t0+at, marked timed out at t0+timedOut
// (negative: not marked).
func cr(uid string, step health.Step, at, timedOut time.Duration) remediationv1alpha1.Remediation {
	r := remediationv1alpha1.Remediation{
		Resource: corev1.ObjectReference{Kind: strings.TrimSuffix(step.TemplateKind, "Template"), Namespace: "ns", Name: "n1", UID: types.UID(uid)},
		Started:  metav1.NewTime(t0.Add(at)), TemplateName: step.TemplateName,
	}
	if timedOut >= 0 {
		r.TimedOut = &metav1.Time{Time: t0.Add(timedOut)}
	}
	return r
}

func entry(rems ...remediationv1alpha1.Remediation) *remediationv1alpha1.UnhealthyNode {
	return &remediationv1alpha1.UnhealthyNode{Name: "n1", Remediations: rems}
}

func healthyEntry(rems ...remediationv1alpha1.Remediation) *remediationv1alpha1.UnhealthyNode {
	e := entry(rems...)
	e.ConditionsHealthyTimestamp = &metav1.Time{Time: t0.Add(20 * time.Minute)}
	return e
}

func list(e *remediationv1alpha1.UnhealthyNode) []remediationv1alpha1.UnhealthyNode {
	if e == nil {
		return nil
	}
	return []remediationv1alpha1.UnhealthyNode{*e}
}

// Node facts: a node that existed before the remediation.
var (
	unhealthy  = Node{Exists: true, Created: t0.Add(-time.Hour), Selected: true}
	healthy    = Node{Exists: true, Created: t0.Add(-time.Hour), Selected: true, Healthy: true}
	gone       = Node{}
	unselected = Node{Exists: true, Created: t0.Add(-time.Hour)}
	replaced   = Node{Exists: true, Created: t0.Add(30 * time.Minute), Selected: true, Healthy: true}
	recreated  = Node{Exists: true, Created: t0.Add(30 * time.Minute), Selected: true}
)

func TestDerive(t *testing.T) {
	now := t0.Add(time.Hour + 500*time.Millisecond)
	at := func(o remediationv1alpha1.RemediationOutcome, step int, template string, ended time.Time) []remediationv1alpha1.EndedRemediation {
		return []remediationv1alpha1.EndedRemediation{{Outcome: o, Step: step, Template: template, Started: metav1.NewTime(t0), Ended: metav1.NewTime(ended)}}
	}
	end := now.Truncate(time.Second)
	for _, tc := range []struct {
		name          string
		before, after *remediationv1alpha1.UnhealthyNode
		steps         []health.Step
		node          Node
		want          []remediationv1alpha1.EndedRemediation
	}{
		{"a remediation starts: nothing ended", nil, entry(cr("a", reboot, 0, -1)), single, unhealthy, nil},
		{"listed without CRs, then gone: nothing ended", &remediationv1alpha1.UnhealthyNode{Name: "n1"}, nil, single, healthy, nil},
		{"running on: nothing ended", entry(cr("a", reboot, 0, -1)), entry(cr("a", reboot, 0, -1)), single, unhealthy, nil},
		{"the next step starts: nothing ended", entry(cr("a", reboot, 0, -1)), entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, -1)), escalated, unhealthy, nil},
		{"the next step replaces a timed-out CR whose name it needs: nothing ended", entry(cr("a", reboot, 0, -1)),
			entry(cr("b", reboot2, 5*time.Minute, -1)), escalated, unhealthy, nil},
		{"reported healthy, then its CRs go: Healthy after step 1", healthyEntry(cr("a", reboot, 0, -1)), nil, single, healthy,
			at(remediationv1alpha1.OutcomeHealthy, 1, "reboot", end)},
		{"healthy and its CRs gone within one batch: Healthy", entry(cr("a", reboot, 0, -1)), nil, single, healthy,
			at(remediationv1alpha1.OutcomeHealthy, 1, "reboot", end)},
		{"reported healthy, unhealthy again when its CRs go: Healthy", healthyEntry(cr("a", reboot, 0, -1)), nil, single, unhealthy,
			at(remediationv1alpha1.OutcomeHealthy, 1, "reboot", end)},
		{"healthy after step 2 of three", healthyEntry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, -1)), nil, escalated, healthy,
			at(remediationv1alpha1.OutcomeHealthy, 2, "hard-reboot", end)},
		{"the node object is gone: NodeDeleted", entry(cr("a", reboot, 0, -1)), nil, single, gone, at(remediationv1alpha1.OutcomeNodeDeleted, 1, "reboot", end)},
		{"recreated and healthy: NodeReplaced", entry(cr("a", reboot, 0, -1)), nil, single, replaced, at(remediationv1alpha1.OutcomeNodeReplaced, 1, "reboot", end)},
		{"recreated and not healthy: NodeDeleted", entry(cr("a", reboot, 0, -1)), nil, single, recreated, at(remediationv1alpha1.OutcomeNodeDeleted, 1, "reboot", end)},
		{"recreated, listed again without CRs: NodeDeleted", entry(cr("a", reboot, 0, -1)), &remediationv1alpha1.UnhealthyNode{Name: "n1"}, single, recreated,
			at(remediationv1alpha1.OutcomeNodeDeleted, 1, "reboot", end)},
		{"no longer selected: NodeLeftSelector", entry(cr("a", reboot, 0, -1)), nil, single, unselected, at(remediationv1alpha1.OutcomeNodeLeftSelector, 1, "reboot", end)},
		{"its CRs went while it is unhealthy: Stopped", entry(cr("a", reboot, 0, -1)), &remediationv1alpha1.UnhealthyNode{Name: "n1"}, single, unhealthy,
			at(remediationv1alpha1.OutcomeStopped, 1, "reboot", end)},
		{"its CR deleted and created anew: Stopped", entry(cr("a", reboot, 0, -1)), entry(cr("a2", reboot, 30*time.Minute, -1)), single, unhealthy,
			at(remediationv1alpha1.OutcomeStopped, 1, "reboot", end)},
		{"its CRs deleted at step 2 and the first step created anew: Stopped after step 2",
			entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, -1)), entry(cr("a2", reboot, 30*time.Minute, -1)), escalated, unhealthy,
			at(remediationv1alpha1.OutcomeStopped, 2, "hard-reboot", end)},
		{"the last step times out: StepsExhausted at its mark, once",
			entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, 15*time.Minute), cr("c", reprov, 15*time.Minute, -1)),
			entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, 15*time.Minute), cr("c", reprov, 15*time.Minute, 75*time.Minute)), escalated, unhealthy,
			at(remediationv1alpha1.OutcomeStepsExhausted, 3, "reprovision", t0.Add(75*time.Minute))},
		{"every step timed out while the status writer was away: StepsExhausted", entry(cr("a", reboot, 0, -1)),
			entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, 15*time.Minute), cr("c", reprov, 15*time.Minute, 75*time.Minute)), escalated, unhealthy,
			at(remediationv1alpha1.OutcomeStepsExhausted, 3, "reprovision", t0.Add(75*time.Minute))},
		{"a single template that failed: StepsExhausted after step 1", entry(cr("a", reboot, 0, -1)), entry(cr("a", reboot, 0, 2*time.Minute)), single, unhealthy,
			at(remediationv1alpha1.OutcomeStepsExhausted, 1, "reboot", t0.Add(2*time.Minute))},
		{"every CR timed out but a step is left (its CR comes next): nothing ended", entry(cr("a", reboot, 0, -1)),
			entry(cr("a", reboot, 0, 5*time.Minute)), escalated, unhealthy, nil},
		{"exhausted before and after: nothing more",
			entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, 15*time.Minute), cr("c", reprov, 15*time.Minute, 75*time.Minute)),
			entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, 15*time.Minute), cr("c", reprov, 15*time.Minute, 75*time.Minute)), escalated, unhealthy, nil},
		{"exhausted, then healthy and its CRs gone: nothing more",
			entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, 15*time.Minute), cr("c", reprov, 15*time.Minute, 75*time.Minute)),
			nil, escalated, healthy, nil},
		{"exhausted, then the node deleted: nothing more", entry(cr("a", reboot, 0, 2*time.Minute)), nil, single, gone, nil},
		{"dry-run's simulated steps end: nothing recorded", &remediationv1alpha1.UnhealthyNode{Name: "n1",
			DryRunRemediations: []remediationv1alpha1.DryRunRemediation{{Started: metav1.NewTime(t0)}}}, nil, single, healthy, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := false
			got := Derive(list(tc.before), list(tc.after), tc.steps, func(name string) Node {
				if name != "n1" {
					t.Errorf("asked about node %s", name)
				}
				asked = true
				return tc.node
			}, now)
			var outcomes []remediationv1alpha1.EndedRemediation
			for _, e := range got {
				if e.Node != "n1" {
					t.Errorf("ended for node %s", e.Node)
				}
				outcomes = append(outcomes, e.EndedRemediation)
			}
			if !equality.Semantic.DeepEqual(outcomes, tc.want) {
				t.Errorf("Derive = %+v, want %+v", outcomes, tc.want)
			}
			if asked && (len(tc.want) == 0 || tc.want[0].Outcome == remediationv1alpha1.OutcomeStepsExhausted) {
				t.Errorf("asked about the node, though no remediation ended by losing its CRs")
			}
		})
	}
}

func TestDeriveSortsByNodeAndSeesEveryEntry(t *testing.T) {
	mk := func(name string, healthyAgain bool) remediationv1alpha1.UnhealthyNode {
		e := entry(cr(name, reboot, 0, -1))
		e.Name = name
		if healthyAgain {
			e.ConditionsHealthyTimestamp = &metav1.Time{Time: t0}
		}
		return *e
	}
	before := []remediationv1alpha1.UnhealthyNode{mk("c", true), mk("a", true), mk("b", false)}
	after := []remediationv1alpha1.UnhealthyNode{mk("b", false)}
	got := Derive(before, after, single, func(string) Node { return healthy }, t0.Add(time.Hour))
	if len(got) != 2 || got[0].Node != "a" || got[1].Node != "c" {
		t.Fatalf("Derive = %+v, want a and c, in that order", got)
	}
}

func TestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		entry  *remediationv1alpha1.UnhealthyNode
		steps  []health.Step
		want   time.Time
		wantOK bool
	}{
		{"escalation: first CR plus every step's timeout", entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, -1)), escalated,
			t0.Add(75 * time.Minute), true},
		{"a single template has no timeout", entry(cr("a", reboot, 0, -1)), single, time.Time{}, false},
		{"no CR yet", entry(), escalated, time.Time{}, false},
		{"healthy again, its CRs kept by healthyDelay", healthyEntry(cr("a", reboot, 0, -1)), escalated, time.Time{}, false},
		{"exhausted: still running past its deadline", entry(cr("a", reboot, 0, 5*time.Minute), cr("b", reboot2, 5*time.Minute, 15*time.Minute),
			cr("c", reprov, 15*time.Minute, 75*time.Minute)), escalated, t0.Add(75 * time.Minute), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Deadline(tc.entry, tc.steps)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Errorf("Deadline = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func outcomeAt(o remediationv1alpha1.RemediationOutcome, ended time.Duration) remediationv1alpha1.EndedRemediation {
	return remediationv1alpha1.EndedRemediation{Outcome: o, Step: 1, Template: "reboot", Started: metav1.NewTime(t0), Ended: metav1.NewTime(t0.Add(ended))}
}

func TestRecord(t *testing.T) {
	record := []remediationv1alpha1.NodeRemediationOutcomes{
		{Name: "b", Outcomes: []remediationv1alpha1.EndedRemediation{outcomeAt(remediationv1alpha1.OutcomeHealthy, 1), outcomeAt(remediationv1alpha1.OutcomeStopped, 2),
			outcomeAt(remediationv1alpha1.OutcomeHealthy, 3)}},
	}
	kept := record[0].Outcomes[0]
	got := Record(record, []Ended{
		{Node: "c", EndedRemediation: outcomeAt(remediationv1alpha1.OutcomeNodeDeleted, 4)},
		{Node: "b", EndedRemediation: outcomeAt(remediationv1alpha1.OutcomeStepsExhausted, 5)},
		{Node: "a", EndedRemediation: outcomeAt(remediationv1alpha1.OutcomeHealthy, 6)},
	})
	want := []remediationv1alpha1.NodeRemediationOutcomes{
		{Name: "a", Outcomes: []remediationv1alpha1.EndedRemediation{outcomeAt(remediationv1alpha1.OutcomeHealthy, 6)}},
		{Name: "b", Outcomes: []remediationv1alpha1.EndedRemediation{outcomeAt(remediationv1alpha1.OutcomeStopped, 2), outcomeAt(remediationv1alpha1.OutcomeHealthy, 3),
			outcomeAt(remediationv1alpha1.OutcomeStepsExhausted, 5)}},
		{Name: "c", Outcomes: []remediationv1alpha1.EndedRemediation{outcomeAt(remediationv1alpha1.OutcomeNodeDeleted, 4)}},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("Record = %+v\nwant %+v", got, want)
	}
	if len(record) != 1 || len(record[0].Outcomes) != 3 || record[0].Outcomes[0] != kept {
		t.Errorf("Record changed the record it was given: %+v", record)
	}
	if got := Record(record, nil); !equality.Semantic.DeepEqual(got, record) {
		t.Errorf("Record without outcomes = %+v, want the record as it was", got)
	} else if &got[0] == &record[0] || &got[0].Outcomes[0] == &record[0].Outcomes[0] {
		t.Errorf("Record without outcomes shares memory with the record it was given (a cached object's)")
	}
	if got := Record(nil, nil); got != nil {
		t.Errorf("Record(nil, nil) = %+v, want nil", got)
	}
	if got := Of(want, "b"); len(got) != 3 || got[2].Outcome != remediationv1alpha1.OutcomeStepsExhausted {
		t.Errorf("Of(b) = %+v", got)
	}
	if got := Of(want, "d"); got != nil {
		t.Errorf("Of(d) = %+v, want nil", got)
	}
}

// A mass failure ends: the record keeps the nodes whose outcomes are newest, and stays small.
func TestRecordIsBounded(t *testing.T) {
	var record []remediationv1alpha1.NodeRemediationOutcomes
	const nodes = 5000
	for round := range 4 {
		var ended []Ended
		for i := range nodes {
			// Typical names: a cloud's node name, the self-node-remediation template's.
			o := outcomeAt(remediationv1alpha1.OutcomeHealthy, time.Duration(round*nodes+i)*time.Second)
			o.Template = "self-node-remediation-automatic-strategy-template"
			ended = append(ended, Ended{Node: fmt.Sprintf("ip-10-0-%04d-17.eu-west-1.compute.internal", i), EndedRemediation: o})
		}
		record = Record(record, ended)
	}
	if len(record) != remediationv1alpha1.MaxOutcomeNodes {
		t.Fatalf("%d nodes recorded, want %d", len(record), remediationv1alpha1.MaxOutcomeNodes)
	}
	for i, r := range record {
		if want := fmt.Sprintf("ip-10-0-%04d-17.eu-west-1.compute.internal", nodes-remediationv1alpha1.MaxOutcomeNodes+i); r.Name != want {
			t.Fatalf("record[%d] is node %s, want %s (the newest, by name)", i, r.Name, want)
		}
		if len(r.Outcomes) != remediationv1alpha1.MaxOutcomesPerNode {
			t.Fatalf("node %s has %d outcomes, want %d", r.Name, len(r.Outcomes), remediationv1alpha1.MaxOutcomesPerNode)
		}
	}

	// The largest record Kubernetes' names allow: 253-character node and template names.
	long := func(c string) string { return strings.Repeat(c, 253) }
	var largest []remediationv1alpha1.NodeRemediationOutcomes
	for i := range remediationv1alpha1.MaxOutcomeNodes {
		n := remediationv1alpha1.NodeRemediationOutcomes{Name: fmt.Sprintf("%04d", i) + long("n")[4:]}
		for range remediationv1alpha1.MaxOutcomesPerNode {
			n.Outcomes = append(n.Outcomes, remediationv1alpha1.EndedRemediation{Outcome: remediationv1alpha1.OutcomeNodeLeftSelector, Step: 20,
				Template: long("t"), Started: metav1.NewTime(t0), Ended: metav1.NewTime(t0)})
		}
		largest = append(largest, n)
	}
	raw, err := json.Marshal(largest)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 140<<10 {
		t.Errorf("the largest record takes %d bytes, more than the 140 KiB bounds.go promises", len(raw))
	}
	typical, err := json.Marshal(record)
	if err != nil {
		t.Fatal(err)
	}
	if len(typical) > 64<<10 {
		t.Errorf("a typical full record takes %d bytes, more than the 64 KiB bounds.go promises", len(typical))
	}
}

// FuzzDerive checks, for any pair of entries, that nothing panics, that a write that changes
// nothing ends nothing, and that at most one remediation ends by losing its CRs and at most one is
// exhausted per write.
func FuzzDerive(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, true)
	f.Add([]byte{0, 0, 255, 17, 42, 3, 9, 1, 0, 200}, false)
	f.Fuzz(func(t *testing.T, data []byte, escalating bool) {
		steps := single
		if escalating {
			steps = escalated
		}
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		build := func() *remediationv1alpha1.UnhealthyNode {
			b := next()
			if b%5 == 0 {
				return nil
			}
			e := entry()
			for range int(b % 4) {
				s := escalated[int(next())%3]
				timedOut := time.Duration(-1)
				if next()%2 == 0 {
					timedOut = time.Duration(next()) * time.Minute
				}
				e.Remediations = append(e.Remediations, cr(fmt.Sprint(next()%4), s, time.Duration(next())*time.Minute, timedOut))
			}
			if b%3 == 0 {
				e.ConditionsHealthyTimestamp = &metav1.Time{Time: t0}
			}
			return e
		}
		before, after := build(), build()
		node := Node{Exists: next()%2 == 0, Created: t0.Add(time.Duration(next()) * time.Minute), Selected: next()%2 == 0, Healthy: next()%2 == 0}
		nodeOf := func(string) Node { return node }
		got := Derive(list(before), list(after), steps, nodeOf, t0)
		if len(got) > 2 {
			t.Fatalf("%d outcomes from one write of one node: %+v", len(got), got)
		}
		exhausted := 0
		for _, e := range got {
			if e.Step < 1 {
				t.Fatalf("outcome with step %d", e.Step)
			}
			if e.Outcome == remediationv1alpha1.OutcomeStepsExhausted {
				exhausted++
			}
		}
		if exhausted > 1 || len(got)-exhausted > 1 {
			t.Fatalf("outcomes %+v", got)
		}
		if again := Derive(list(after), list(after), steps, nodeOf, t0); len(again) > 0 {
			t.Fatalf("a write that changes nothing ends %+v", again)
		}
	})
}

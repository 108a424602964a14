package health

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/medik8s/node-healthcheck/internal/lease"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEscalate(t *testing.T) {
	steps := []Step{ // given out of order on purpose
		{StepKey: StepKey{"CTemplate", "c2"}, Order: 4, Timeout: 4 * time.Minute},
		{StepKey: StepKey{"ATemplate", "a"}, Order: 1, Timeout: time.Minute},
		{StepKey: StepKey{"BTemplate", "b"}, Order: 2, Timeout: 2 * time.Minute},
		{StepKey: StepKey{"CTemplate", "c1"}, Order: 3, Timeout: 3 * time.Minute},
	}
	cr := func(kind, name string, age time.Duration, mods ...func(*StepCR)) StepCR {
		c := StepCR{StepKey: StepKey{kind, name}, Created: now.Add(-age)}
		for _, m := range mods {
			m(&c)
		}
		return c
	}
	timedOut := func(c *StepCR) { c.TimedOut = true }
	failed := func(c *StepCR) { c.Succeeded = metav1.ConditionFalse }
	succeeded := func(c *StepCR) { c.Succeeded = metav1.ConditionTrue }

	tests := []struct {
		name      string
		crs       []StepCR
		timeOut   []int
		next      string
		exhausted bool
		deadline  time.Time
		stale     []int
		soon      bool
		held      bool
	}{
		{name: "no CR yet: the lowest order starts", next: "a"},
		{name: "first step running", crs: []StepCR{cr("ATemplate", "a", 30*time.Second)}, deadline: now.Add(30 * time.Second)},
		{name: "first step timed out at its deadline", crs: []StepCR{cr("ATemplate", "a", time.Minute)}, timeOut: []int{0}, next: "b"},
		{name: "Succeeded=False skips ahead before the timeout", crs: []StepCR{cr("ATemplate", "a", time.Second, failed)}, timeOut: []int{0}, next: "b"},
		{name: "Succeeded=True is never marked, but escalation continues after the timeout",
			crs: []StepCR{cr("ATemplate", "a", 2*time.Minute, succeeded)}, next: "b"},
		{name: "Succeeded=True before the timeout waits", crs: []StepCR{cr("ATemplate", "a", time.Second, succeeded)}, deadline: now.Add(59 * time.Second)},
		{name: "already marked, next not created yet (restart between the two)", crs: []StepCR{cr("ATemplate", "a", time.Minute, timedOut)}, next: "b"},
		{name: "a step's timer starts when the previous one was marked, if that is after its CR was created",
			crs:      []StepCR{cr("ATemplate", "a", 3*time.Minute, func(c *StepCR) { c.TimedOut, c.TimedOutAt = true, now.Add(-30*time.Second) }), cr("BTemplate", "b", time.Minute)},
			deadline: now.Add(90 * time.Second)},
		{name: "second step running: the first's CR stays, the second's timer counts",
			crs: []StepCR{cr("ATemplate", "a", 3*time.Minute, timedOut), cr("BTemplate", "b", time.Minute)}, deadline: now.Add(time.Minute)},
		{name: "two steps of one kind are told apart by template name",
			crs:     []StepCR{cr("ATemplate", "a", 9*time.Minute, timedOut), cr("BTemplate", "b", 8*time.Minute, timedOut), cr("CTemplate", "c1", 3*time.Minute)},
			timeOut: []int{2}, next: "c2"},
		{name: "the last step timing out leaves nothing",
			crs:     []StepCR{cr("ATemplate", "a", 20*time.Minute, timedOut), cr("BTemplate", "b", 19*time.Minute, timedOut), cr("CTemplate", "c1", 17*time.Minute, timedOut), cr("CTemplate", "c2", 4*time.Minute)},
			timeOut: []int{3}, exhausted: true},
		{name: "exhausted and marked: still nothing, no new mark",
			crs:       []StepCR{cr("ATemplate", "a", 20*time.Minute, timedOut), cr("BTemplate", "b", 19*time.Minute, timedOut), cr("CTemplate", "c1", 17*time.Minute, timedOut), cr("CTemplate", "c2", 5*time.Minute, timedOut)},
			exhausted: true},
		{name: "a live CR of a step no longer in the spec holds the node until the longest timeout", crs: []StepCR{cr("XTemplate", "x", 3*time.Minute)},
			deadline: now.Add(time.Minute), stale: []int{0}},
		{name: "a stale CR past the longest timeout is timed out and the first step starts", crs: []StepCR{cr("XTemplate", "x", 4*time.Minute)},
			timeOut: []int{0}, next: "a"},
		{name: "a stale CR that failed is timed out at once", crs: []StepCR{cr("XTemplate", "x", time.Second, failed)}, timeOut: []int{0}, next: "a"},
		{name: "a timed-out CR of a step no longer in the spec is ignored", crs: []StepCR{cr("XTemplate", "x", time.Hour, timedOut)}, next: "a"},
		{name: "a stale CR after a timed-out step holds the next step back",
			crs: []StepCR{cr("ATemplate", "a", 3*time.Minute, timedOut), cr("XTemplate", "x", time.Minute)}, deadline: now.Add(3 * time.Minute), stale: []int{1}},
		{name: "a stale CR after a timed-out step, once over, lets the next step start",
			crs: []StepCR{cr("ATemplate", "a", 9*time.Minute, timedOut), cr("XTemplate", "x", 5*time.Minute)}, timeOut: []int{1}, next: "b"},
		{name: "a soon-unhealthy node holds a timed-out step", crs: []StepCR{cr("ATemplate", "a", time.Hour)}, soon: true, held: true},
		{name: "a soon-unhealthy node holds a failed step", crs: []StepCR{cr("ATemplate", "a", time.Second, failed)}, soon: true, held: true},
		{name: "a soon-unhealthy node still counts down a running step", crs: []StepCR{cr("ATemplate", "a", 30*time.Second)}, soon: true, deadline: now.Add(30 * time.Second)},
		{name: "a marked step goes on while the node is soon unhealthy (the mark was written)", crs: []StepCR{cr("ATemplate", "a", time.Minute, timedOut)}, soon: true, next: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Escalate(EscalationInput{Steps: steps, CRs: tt.crs, Now: now, Unhealthy: !tt.soon})
			next := ""
			if e.Next != nil {
				next = e.Next.TemplateName
			}
			if next != tt.next || e.Exhausted != tt.exhausted || !e.Deadline.Equal(tt.deadline) || len(e.TimeOut) != len(tt.timeOut) ||
				!slices.Equal(e.Stale, tt.stale) || e.Held != tt.held {
				t.Fatalf("got next %q exhausted %v deadline %v timeOut %v stale %v held %v; want %q %v %v %v %v %v",
					next, e.Exhausted, e.Deadline, e.TimeOut, e.Stale, e.Held, tt.next, tt.exhausted, tt.deadline, tt.timeOut, tt.stale, tt.held)
			}
			for i := range tt.timeOut {
				if e.TimeOut[i] != tt.timeOut[i] {
					t.Fatalf("timeOut %v, want %v", e.TimeOut, tt.timeOut)
				}
			}
		})
	}
}

// A single template has no timeout: its remediation times out only once it is overdue, more than
// three lease durations (3 x 11 minutes) after its CR was created, and nothing follows it.
func TestEscalateSingleTemplateTimesOutOnlyWhenOverdue(t *testing.T) {
	key := StepKey{"ATemplate", "a"}
	steps := []Step{{StepKey: key}}
	running := Escalate(EscalationInput{Steps: steps, CRs: []StepCR{{StepKey: key, Created: now.Add(-33 * time.Minute)}}, Now: now, Unhealthy: true})
	if running.Due() || running.Exhausted || running.Overdue || !running.Deadline.Equal(now.Add(time.Nanosecond)) {
		t.Fatalf("a single template escalated at exactly three lease durations: %+v", running)
	}
	overdue := Escalate(EscalationInput{Steps: steps, CRs: []StepCR{{StepKey: key, Created: now.Add(-33*time.Minute - time.Second)}}, Now: now, Unhealthy: true})
	if overdue.Next != nil || !overdue.Exhausted || !overdue.Overdue || !slices.Equal(overdue.TimeOut, []int{0}) {
		t.Fatalf("an overdue single template: %+v, want it timed out and nothing next", overdue)
	}
	// A CR of a single template the spec no longer references is overdue the same way, and then
	// the new template's step starts.
	stale := Escalate(EscalationInput{Steps: steps, CRs: []StepCR{{StepKey: StepKey{"XTemplate", "x"}, Created: now.Add(-34 * time.Minute)}}, Now: now, Unhealthy: true})
	if stale.Next == nil || stale.Next.StepKey != key || !slices.Equal(stale.TimeOut, []int{0}) {
		t.Fatalf("an overdue stale CR: %+v, want it timed out and the template's step next", stale)
	}
}

// Overdue runs from the step's start, whatever a lease says: a step that started when the previous
// one was marked timed out is not overdue earlier because the remediation began long ago (the
// public operator's lease keeps its first acquireTime across steps).
func TestEscalateOverdueRunsFromTheStepsStart(t *testing.T) {
	steps := []Step{{StepKey: StepKey{"ATemplate", "a"}, Order: 0, Timeout: 2 * time.Hour}, {StepKey: StepKey{"BTemplate", "b"}, Order: 1, Timeout: 45 * time.Minute}}
	crs := []StepCR{
		{StepKey: steps[0].StepKey, Created: now.Add(-151 * time.Minute), TimedOut: true, TimedOutAt: now.Add(-31 * time.Minute)},
		{StepKey: steps[1].StepKey, Created: now.Add(-31 * time.Minute)},
	}
	e := Escalate(EscalationInput{Steps: steps, CRs: crs, Now: now, Unhealthy: true})
	if e.Due() || e.Overdue || !e.Deadline.Equal(now.Add(14*time.Minute)) {
		t.Fatalf("step 2, 31 minutes in: %+v, want it running until its 45-minute timeout", e)
	}
}

// TestEscalateOrdersExtremeOrders: orders at the ends of the int range sort correctly (a subtracting
// comparator overflows there).
func TestEscalateOrdersExtremeOrders(t *testing.T) {
	steps := []Step{
		{StepKey: StepKey{"ATemplate", "max"}, Order: math.MaxInt, Timeout: time.Minute},
		{StepKey: StepKey{"ATemplate", "min"}, Order: math.MinInt, Timeout: time.Minute},
	}
	e := Escalate(EscalationInput{Steps: steps, Now: now, Unhealthy: true})
	if e.Next == nil || e.Next.TemplateName != "min" {
		t.Fatalf("first step %+v, want min", e.Next)
	}
}

func TestEarliest(t *testing.T) {
	if !Earliest().IsZero() || !Earliest(time.Time{}, time.Time{}).IsZero() {
		t.Error("zero times")
	}
	if got := Earliest(time.Time{}, now.Add(time.Minute), now, time.Time{}); !got.Equal(now) {
		t.Errorf("got %v", got)
	}
}

// TestEscalationLease checks the lease the escalation carries: the next step's from now, the
// running step's from its start (also once the next step is held back), the longest step's from
// the first stale CR while only stale CRs run, and none before anything runs.
func TestEscalationLease(t *testing.T) {
	steps := []Step{{StepKey: StepKey{"ATemplate", "a"}, Order: 0, Timeout: 10 * time.Minute}, {StepKey: StepKey{"BTemplate", "b"}, Order: 1, Timeout: time.Hour}}
	escalating := Escalate(EscalationInput{Steps: steps, CRs: []StepCR{{StepKey: steps[0].StepKey, Created: now.Add(-11 * time.Minute)}}, Now: now, Unhealthy: true})
	if got, want := escalating.Lease(now), (LeaseTerm{lease.Duration(time.Hour), now}); got != want {
		t.Errorf("escalating: %+v, want the next step's %+v", got, want)
	}
	escalating.Next = nil // held back (dry-run)
	if got, want := escalating.Lease(now), (LeaseTerm{lease.Duration(10 * time.Minute), now.Add(-11 * time.Minute)}); got != want {
		t.Errorf("escalation held back: %+v, want the running step's %+v", got, want)
	}
	running := Escalate(EscalationInput{Steps: steps, CRs: []StepCR{{StepKey: steps[0].StepKey, Created: now.Add(-time.Minute)}}, Now: now, Unhealthy: true})
	if got, want := running.Lease(now), (LeaseTerm{lease.Duration(10 * time.Minute), now.Add(-time.Minute)}); got != want {
		t.Errorf("running: %+v, want %+v", got, want)
	}
	stale := Escalate(EscalationInput{Steps: steps, CRs: []StepCR{{StepKey: StepKey{"XTemplate", "x"}, Created: now.Add(-5 * time.Minute)}}, Now: now, Unhealthy: true})
	if got, want := stale.Lease(now), (LeaseTerm{lease.Duration(time.Hour), now.Add(-5 * time.Minute)}); got != want || len(stale.Stale) != 1 {
		t.Errorf("only a stale CR: %+v (stale %v), want the longest step's from its creation %+v", got, stale.Stale, want)
	}
	if got := (Escalation{}).Lease(now); got != (LeaseTerm{}) {
		t.Errorf("nothing runs: %+v, want none", got)
	}
}

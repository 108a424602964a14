package health

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEscalate(t *testing.T) {
	steps := []Step{ // given out of order on purpose
		{TemplateKind: "CTemplate", TemplateName: "c2", Order: 4, Timeout: 4 * time.Minute},
		{TemplateKind: "ATemplate", TemplateName: "a", Order: 1, Timeout: time.Minute},
		{TemplateKind: "BTemplate", TemplateName: "b", Order: 2, Timeout: 2 * time.Minute},
		{TemplateKind: "CTemplate", TemplateName: "c1", Order: 3, Timeout: 3 * time.Minute},
	}
	cr := func(kind, name string, age time.Duration, mods ...func(*StepCR)) StepCR {
		c := StepCR{TemplateKind: kind, TemplateName: name, Created: now.Add(-age)}
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
		{name: "a CR of a step no longer in the spec is ignored", crs: []StepCR{cr("XTemplate", "x", time.Hour)}, next: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Escalate(steps, tt.crs, now)
			next := ""
			if e.Next != nil {
				next = e.Next.TemplateName
			}
			if next != tt.next || e.Exhausted != tt.exhausted || !e.Deadline.Equal(tt.deadline) || len(e.TimeOut) != len(tt.timeOut) {
				t.Fatalf("got next %q exhausted %v deadline %v timeOut %v; want %q %v %v %v", next, e.Exhausted, e.Deadline, e.TimeOut, tt.next, tt.exhausted, tt.deadline, tt.timeOut)
			}
			for i := range tt.timeOut {
				if e.TimeOut[i] != tt.timeOut[i] {
					t.Fatalf("timeOut %v, want %v", e.TimeOut, tt.timeOut)
				}
			}
		})
	}
}

func TestEscalateSingleTemplateNeverTimesOut(t *testing.T) {
	e := Escalate([]Step{{TemplateKind: "ATemplate", TemplateName: "a"}}, []StepCR{{TemplateKind: "ATemplate", TemplateName: "a", Created: now.Add(-240 * time.Hour)}}, now)
	if e.Next != nil || e.Exhausted || len(e.TimeOut) != 0 || !e.Deadline.IsZero() {
		t.Fatalf("a single template escalated: %+v", e)
	}
}

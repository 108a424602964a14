package health

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Step is one escalation step, identified by its template's kind and name.
type Step struct {
	// TemplateKind and TemplateName identify the step's template.
	TemplateKind, TemplateName string
	// Order sorts the steps: lower runs first.
	Order int
	// Timeout is how long the step may try; zero means forever (a single remediationTemplate).
	Timeout time.Duration
}

// StepCR is a remediation CR of one node, as escalation sees it.
type StepCR struct {
	// TemplateKind and TemplateName identify the step that created it (the CR's kind plus
	// "Template", and its template-name annotation).
	TemplateKind, TemplateName string
	// Created is the CR's creation time: the step's timer starts there, so it survives restarts.
	Created time.Time
	// TimedOut is true once the CR carries the nhc-timed-out annotation; TimedOutAt is the time
	// written there.
	TimedOut   bool
	TimedOutAt time.Time
	// Succeeded is the status of the CR's Succeeded condition ("" when it has none).
	Succeeded metav1.ConditionStatus
}

// Escalation is what to do next for one node's remediation.
type Escalation struct {
	// TimeOut lists the indexes (into the given CRs) to annotate as timed out.
	TimeOut []int
	// Next is the step to start now, if any.
	Next *Step
	// Exhausted is true when the last step has timed out or failed: nothing is left to try.
	Exhausted bool
	// Deadline is when the running step times out; zero when nothing is pending.
	Deadline time.Time
	// Current is the running step (nil before the first) and Started when it started.
	Current *Step
	Started time.Time
}

// Escalate decides, for a node whose remediation runs, whether its current step has timed out
// (its timeout passed since its CR was created, or the CR reports Succeeded=False) and which step
// runs next. A CR that reports Succeeded=True is never marked timed out, but the next step still
// starts when its timeout passes and the node is still unhealthy. CRs of unknown steps (the spec
// changed) are ignored. With no CRs yet the first step starts.
func Escalate(steps []Step, crs []StepCR, now time.Time) Escalation {
	sorted := slices.Clone(steps)
	slices.SortStableFunc(sorted, func(a, b Step) int { return a.Order - b.Order })
	if len(sorted) == 0 {
		return Escalation{}
	}
	// The current step is the latest step that has a CR; its CR is the newest one for that step.
	current, cr := -1, -1
	for i, c := range crs {
		idx := stepIndex(sorted, c)
		if idx < 0 {
			continue
		}
		if idx > current || (idx == current && c.Created.After(crs[cr].Created)) {
			current, cr = idx, i
		}
	}
	if current < 0 {
		return Escalation{Next: &sorted[0]}
	}
	c, step := crs[cr], sorted[current]
	// The step's timer starts when its CR was created, or when the previous step was marked timed
	// out if that is later: both are persisted, and the mark is written with the operator's own
	// clock, so the timer neither resets on a restart nor depends on the API server's clock alone.
	start := c.Created
	for _, other := range crs {
		if other.TimedOut && other.TimedOutAt.After(start) && stepIndex(sorted, other) < current {
			start = other.TimedOutAt
		}
	}
	deadline := time.Time{}
	if step.Timeout > 0 {
		deadline = start.Add(step.Timeout)
	}
	over := c.TimedOut || c.Succeeded == metav1.ConditionFalse || (!deadline.IsZero() && !now.Before(deadline))
	if !over {
		return Escalation{Deadline: deadline, Current: &sorted[current], Started: start}
	}
	e := Escalation{Current: &sorted[current], Started: start}
	if !c.TimedOut && c.Succeeded != metav1.ConditionTrue {
		e.TimeOut = []int{cr}
	}
	if current+1 < len(sorted) {
		e.Next = &sorted[current+1]
	} else {
		e.Exhausted = true
	}
	return e
}

func stepIndex(sorted []Step, c StepCR) int {
	return slices.IndexFunc(sorted, func(s Step) bool { return s.TemplateKind == c.TemplateKind && s.TemplateName == c.TemplateName })
}

package health

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/medik8s/node-healthcheck/internal/lease"
)

// StepKey identifies an escalation step: its template's kind and name (one kind may serve two steps
// when its remediator supports several CRs per node).
type StepKey struct {
	// TemplateKind and TemplateName identify the step's template.
	TemplateKind, TemplateName string
}

func (k StepKey) String() string { return k.TemplateKind + "/" + k.TemplateName }

// Step is one escalation step. A decision that starts one (NodeDecision.Step, Escalation.Next)
// carries it whole, template included, so the actor creates the CR from it without asking again.
type Step struct {
	StepKey
	// Template is the step's template reference, as the spec has it.
	Template corev1.ObjectReference
	// Order sorts the steps: lower runs first.
	Order int
	// Timeout is how long the step may try; zero means forever (a single remediationTemplate).
	Timeout time.Duration
}

// StepCR is a remediation CR of one node, as escalation sees it.
type StepCR struct {
	// StepKey identifies the step that created it (the CR's kind plus "Template", and its
	// template-name annotation).
	StepKey
	// Created is the CR's creation time: the step's timer starts there, so it survives restarts.
	Created time.Time
	// TimedOut is true once the CR carries the nhc-timed-out annotation; TimedOutAt is the time
	// written there.
	TimedOut   bool
	TimedOutAt time.Time
	// Succeeded is the status of the CR's Succeeded condition ("" when it has none).
	Succeeded metav1.ConditionStatus
}

// live reports whether the CR's remediator may still be at work: not timed out and not failed.
func (c StepCR) live() bool { return !c.TimedOut && c.Succeeded != metav1.ConditionFalse }

// EscalationInput is what one node's escalation depends on.
type EscalationInput struct {
	// Steps are the spec's steps, in any order.
	Steps []Step
	// CRs are the node's remediation CRs of this NodeHealthCheck, of current steps or not.
	CRs []StepCR
	// Now is the current time.
	Now time.Time
	// Unhealthy is true while the node is unhealthy for an unhealthy condition's full duration. While
	// it is only soon unhealthy (a condition changed during the remediation, such as Ready going from
	// Unknown to False while the remediator reboots the node), nothing times out and nothing
	// escalates: escalating mid-reboot would double the disruption.
	Unhealthy bool
}

// Escalation is what to do next for one node's remediation.
type Escalation struct {
	// TimeOut lists the indexes (into the given CRs) to annotate as timed out.
	TimeOut []int
	// Next is the step to start now, if any.
	Next *Step
	// Exhausted is true when the last step has timed out or failed: nothing is left to try.
	Exhausted bool
	// Deadline is when something changes on its own (the running step or a stale CR times out); zero
	// when nothing is pending.
	Deadline time.Time
	// Current is the running step (nil before the first, or when only stale CRs run) and Started
	// when it started.
	Current *Step
	Started time.Time
	// Stale lists the indexes of live CRs whose step the spec no longer has (the templates changed
	// during the remediation). While one is live, no other step starts: never two remediators on a
	// node. A stale CR times out after the longest step timeout (or when its lease is overdue, or
	// when it reports Succeeded=False).
	Stale []int
	// Held is true when the running step is over but the node is only soon unhealthy: the decision
	// waits until the node is unhealthy again.
	Held bool
	// Overdue is true when the running step (or a stale CR) is over because it ran for
	// lease.Overdue of its step: the remediator is stuck.
	Overdue bool
	// Withheld is, for an escalation a hold keeps back (NodeDecision.EscalationHeld), what it would
	// have done: the CRs it would time out, the step it would start. Nil otherwise.
	Withheld *Escalation
	// staleLease is the lease of a node that only stale CRs hold (Lease).
	staleLease LeaseTerm
}

// LeaseTerm is how long a node's lease is held for its remediation, and from when the step it is
// held for counts (lease.Overdue is measured from there).
type LeaseTerm struct {
	For  time.Duration
	From time.Time
}

// Lease is the node's lease for the remediation as it runs from now on: the next step's, from now,
// when one starts; else the running step's, from its start; else, while only CRs of steps the spec
// no longer has run, the longest step's from the first of them. Zero when nothing runs. (A held
// escalation has no Next: its lease is the running step's.)
func (e Escalation) Lease(now time.Time) LeaseTerm {
	switch {
	case e.Next != nil:
		return LeaseTerm{lease.Duration(e.Next.Timeout), now}
	case e.Current != nil:
		return LeaseTerm{lease.Duration(e.Current.Timeout), e.Started}
	}
	return e.staleLease
}

// Due reports whether the escalation acts now: it times a CR out or starts the next step.
func (e Escalation) Due() bool { return e.Next != nil || len(e.TimeOut) > 0 }

// Escalate decides, for a node whose remediation runs, whether its current step has timed out
// (its timeout passed since the step started, the CR reports Succeeded=False, or the step has run
// for lease.Overdue of its step: the remediator is stuck) and which step runs next. A CR that reports Succeeded=True is never marked timed out,
// but the next step still starts when its timeout passes and the node is still unhealthy. CRs of
// steps the spec no longer has hold the node until they end (see Escalation.Stale). With no CRs the
// first step starts.
func Escalate(in EscalationInput) Escalation {
	sorted := slices.Clone(in.Steps)
	slices.SortStableFunc(sorted, func(a, b Step) int { return cmp.Compare(a.Order, b.Order) })
	if len(sorted) == 0 {
		return Escalation{}
	}
	index := func(c StepCR) int {
		return slices.IndexFunc(sorted, func(s Step) bool { return s.StepKey == c.StepKey })
	}

	// The current step is the latest step that has a CR; its CR is the newest one for that step.
	current, cr := -1, -1
	var stale []int
	for i, c := range in.CRs {
		idx := index(c)
		if idx < 0 {
			if c.live() || (!c.TimedOut && c.Succeeded == metav1.ConditionFalse) {
				stale = append(stale, i)
			}
			continue
		}
		if idx > current || (idx == current && c.Created.After(in.CRs[cr].Created)) {
			current, cr = idx, i
		}
	}
	if len(stale) > 0 {
		return escalateStale(in, sorted, stale, current, cr)
	}
	if current < 0 {
		return Escalation{Next: &sorted[0]}
	}
	c, step := in.CRs[cr], sorted[current]
	// The step's timer starts when its CR was created, or when the previous step was marked timed
	// out if that is later: both are persisted, and the mark is written with the operator's own
	// clock, so the timer neither resets on a restart nor depends on the API server's clock alone.
	start := c.Created
	for _, other := range in.CRs {
		if other.TimedOut && other.TimedOutAt.After(start) && index(other) >= 0 && index(other) < current {
			start = other.TimedOutAt
		}
	}
	// Overdue is measured from the step's start too, never from a lease's acquisition (see
	// lease.Overdue): a remediation taken over from the public operator keeps its timers.
	overdue, deadline := overdue(start, step.Timeout, in.Now)
	if step.Timeout > 0 {
		deadline = Earliest(start.Add(step.Timeout), deadline)
	}
	over := c.TimedOut || c.Succeeded == metav1.ConditionFalse || !in.Now.Before(deadline)
	if !over {
		return Escalation{Deadline: deadline, Current: &sorted[current], Started: start}
	}
	e := Escalation{Current: &sorted[current], Started: start, Overdue: overdue && !c.TimedOut}
	if !in.Unhealthy && !c.TimedOut {
		e.Held = true
		return e
	}
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

// escalateStale handles live CRs of steps the spec no longer has: each one times out after the
// longest step timeout, when it reports Succeeded=False, or when it is overdue (lease.Overdue of the
// longest step, from its creation); until then no step starts. Once none is live, escalation goes on from the current step.
func escalateStale(in EscalationInput, sorted []Step, stale []int, current, cr int) Escalation {
	var longest time.Duration
	for _, s := range sorted {
		longest = max(longest, s.Timeout)
	}
	e := Escalation{}
	if current >= 0 {
		e.Current, e.Started = &sorted[current], in.CRs[cr].Created
	}
	for _, i := range stale {
		c := in.CRs[i]
		isOverdue, deadline := overdue(c.Created, longest, in.Now)
		if longest > 0 {
			deadline = Earliest(c.Created.Add(longest), deadline)
		}
		over := c.Succeeded == metav1.ConditionFalse || !in.Now.Before(deadline)
		e.Overdue = e.Overdue || isOverdue
		switch {
		case over && !in.Unhealthy:
			e.Held = true
			e.Stale = append(e.Stale, i)
		case over:
			e.TimeOut = append(e.TimeOut, i)
		default:
			e.Stale = append(e.Stale, i)
			e.Deadline = Earliest(e.Deadline, deadline)
		}
	}
	if len(e.Stale) > 0 {
		if e.Held {
			e.Deadline = time.Time{} // the caller looks again when the node is unhealthy
		}
		e.staleLease = LeaseTerm{lease.Duration(longest), in.CRs[e.Stale[0]].Created}
		return e
	}
	// Every stale CR is over now: mark them, and escalation goes on as if they had been marked.
	marked := slices.Clone(in.CRs)
	for _, i := range e.TimeOut {
		marked[i].TimedOut, marked[i].TimedOutAt = true, in.Now
	}
	next := Escalate(EscalationInput{Steps: in.Steps, CRs: marked, Now: in.Now, Unhealthy: in.Unhealthy})
	next.TimeOut = append(e.TimeOut, next.TimeOut...)
	return next
}

// overdue reports whether a step that started at start has run for more than lease.Overdue of its
// timeout at now (more than: the public operator's rule), and the first instant it is.
func overdue(start time.Time, timeout time.Duration, now time.Time) (bool, time.Time) {
	at := start.Add(lease.Overdue(timeout)).Add(time.Nanosecond)
	return !now.Before(at), at
}

// Earliest returns the earliest non-zero time, or zero when all are zero.
func Earliest(times ...time.Time) time.Time {
	var out time.Time
	for _, t := range times {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

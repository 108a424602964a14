package watch

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestConditionChanges(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	c := NewConditionChanges(clock, 10*time.Second)
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	ready := func(s corev1.ConditionStatus) corev1.NodeCondition {
		// kwok's stock stages: the transition time stays the creation time.
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s, LastTransitionTime: metav1.NewTime(time.Unix(0, 0))}
	}
	memory := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}

	c.Update(node(), node(ready(corev1.ConditionTrue)))
	if got := c.Seen("n"); got != nil {
		t.Fatalf("a node registering its conditions: seen %v, want nothing", got)
	}
	c.Update(node(ready(corev1.ConditionTrue)), node(ready(corev1.ConditionTrue), memory))
	if got := c.Seen("n"); got != nil {
		t.Fatalf("a heartbeat and a new condition: seen %v, want nothing", got)
	}

	c.Update(node(ready(corev1.ConditionTrue), memory), node(ready(corev1.ConditionUnknown), memory))
	failed := clock.Now()
	first := c.Seen("n")
	if len(first) != 1 || !first[corev1.NodeReady].Equal(failed) {
		t.Fatalf("Ready turned Unknown: seen %v, want Ready at %v", first, failed)
	}
	clock.SetTime(failed.Add(time.Minute))
	c.Update(node(ready(corev1.ConditionUnknown), memory), node(ready(corev1.ConditionTrue), memory))
	if got := c.Seen("n")[corev1.NodeReady]; !got.Equal(clock.Now()) {
		t.Fatalf("Ready turned True again: seen at %v, want %v", got, clock.Now())
	}
	if !first[corev1.NodeReady].Equal(failed) {
		t.Fatal("a map Seen returned changed afterwards")
	}

	// A writer that keeps the transition time true says when the change happened.
	renewed := ready(corev1.ConditionUnknown)
	renewed.LastTransitionTime = metav1.NewTime(clock.Now().Add(-time.Second))
	clock.SetTime(clock.Now().Add(time.Minute))
	c.Update(node(ready(corev1.ConditionTrue), memory), node(renewed, memory))
	if got := c.Seen("n")[corev1.NodeReady]; !got.Equal(failed.Add(time.Minute)) {
		t.Fatalf("Ready turned Unknown with a new transition time: seen at %v, want the earlier record %v", got, failed.Add(time.Minute))
	}

	c.forget("n")
	if got := c.Seen("n"); got != nil {
		t.Fatalf("a deleted node: seen %v, want nothing", got)
	}
}

// TestUntrustedConditionTimes: a condition time later than the manager's clock, earlier than the
// node's creation, or, at a change the watch showed, earlier than that moment or the condition's
// heartbeat (a writer whose clock runs slow, a backdated change), is not trusted: the condition
// counts from when the watch showed it; a later change with a true time ends that.
func TestUntrustedConditionTimes(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(start)
	c := NewConditionChanges(clock, 10*time.Second)
	created := metav1.NewTime(start.Add(-24 * time.Hour))
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: created}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	ready := func(s corev1.ConditionStatus, transition, heartbeat time.Time) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s, LastTransitionTime: metav1.NewTime(transition), LastHeartbeatTime: metav1.NewTime(heartbeat)}
	}
	healthy := ready(corev1.ConditionTrue, start.Add(-time.Hour), start)

	c.Update(nil, node(healthy))
	if got := c.Untrusted("n"); got != nil {
		t.Fatalf("a node as first listed, its times plausible: %v", got)
	}
	for _, tc := range []struct {
		name    string
		cond    corev1.NodeCondition
		trusted bool
	}{
		{"a change with a true time", ready(corev1.ConditionFalse, start.Add(-2*time.Second), start.Add(-2*time.Second)), true},
		{"a slow writer's clock: an hour before the watch showed it", ready(corev1.ConditionFalse, start.Add(-time.Hour), start.Add(-time.Hour)), false},
		{"backdated: earlier than its own heartbeat", ready(corev1.ConditionFalse, start.Add(-20*time.Second), start), false},
		{"a fast writer's clock: ahead of the manager's", ready(corev1.ConditionFalse, start.Add(time.Hour), start.Add(time.Hour)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConditionChanges(clock, 10*time.Second)
			c.Update(nil, node(healthy))
			c.Update(node(healthy), node(tc.cond))
			from, untrusted := c.Untrusted("n")[corev1.NodeReady]
			if untrusted == tc.trusted || (untrusted && !from.Equal(start)) {
				t.Fatalf("untrusted %v from %v, want trusted %v", untrusted, from, tc.trusted)
			}
			if untrusted {
				// A heartbeat with the same status keeps the distrust, and its start.
				clock.SetTime(start.Add(time.Minute))
				defer clock.SetTime(start)
				again := tc.cond
				again.LastHeartbeatTime = metav1.NewTime(again.LastHeartbeatTime.Add(time.Minute))
				c.Update(node(tc.cond), node(again))
				if got := c.Untrusted("n")[corev1.NodeReady]; !got.Equal(start) {
					t.Fatalf("after a heartbeat: from %v, want %v", got, start)
				}
				// A change with a true time ends it.
				back := ready(corev1.ConditionTrue, clock.Now(), clock.Now())
				c.Update(node(again), node(back))
				if got := c.Untrusted("n"); got != nil {
					t.Fatalf("after a change with a true time: %v", got)
				}
			}
		})
	}
	// Never trusted, whenever seen: a time ahead of the manager's clock, or before the node existed.
	for _, cond := range []corev1.NodeCondition{ready(corev1.ConditionFalse, start.Add(time.Hour), start), ready(corev1.ConditionFalse, created.Add(-time.Hour), start)} {
		c := NewConditionChanges(clock, 10*time.Second)
		c.Update(nil, node(cond))
		if got, ok := c.Untrusted("n")[corev1.NodeReady]; !ok || !got.Equal(start) {
			t.Fatalf("first listed with %v: %v", cond.LastTransitionTime, c.Untrusted("n"))
		}
		c.forget("n")
		if c.Untrusted("n") != nil {
			t.Fatal("a deleted node's record stays")
		}
	}
}

// A node writes its condition types itself: the record keeps only those it carries now, so one that
// flips types of its own and drops them again costs nothing once they are gone.
func TestConditionChangesKeepOnlyTheTypesTheNodeCarries(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	c := NewConditionChanges(clock, 10*time.Second)
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	cond := func(t string, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeConditionType(t), Status: s}
	}
	ready := cond(string(corev1.NodeReady), corev1.ConditionTrue)
	c.Update(node(cond(string(corev1.NodeReady), corev1.ConditionFalse)), node(ready))
	for i := range 100 {
		custom := fmt.Sprintf("Custom%d", i)
		c.Update(node(ready, cond(custom, corev1.ConditionFalse)), node(ready, cond(custom, corev1.ConditionTrue)))
		c.Update(node(ready, cond(custom, corev1.ConditionTrue)), node(ready))
	}
	if got := c.Seen("n"); len(got) != 1 || got[corev1.NodeReady].IsZero() {
		t.Fatalf("seen %d types (%v), want Ready alone", len(got), got[corev1.NodeReady])
	}
	c.Update(node(ready), node())
	if got := c.Seen("n"); got != nil || c.Len() != 0 {
		t.Fatalf("a node without conditions: seen %v, %d nodes recorded, want nothing", got, c.Len())
	}
}

// A decision reads the record for the node object it decides from (For): the record catches up with
// a version whose event its handler has not delivered yet, and the older event, delivered after,
// changes nothing; a later version is compared with the one caught up to.
func TestConditionChangesCatchUpWithTheDecisionsNode(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	c := NewConditionChanges(clock, TrustEveryConditionTime)
	created := metav1.NewTime(time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC))
	node := func(rv string, s corev1.ConditionStatus) *corev1.Node {
		// kwok's stock stages: the transition time stays the creation time.
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, LastTransitionTime: created}}}}
	}
	c.Update(nil, node("10", corev1.ConditionTrue))
	c.Update(node("10", corev1.ConditionTrue), node("11", corev1.ConditionUnknown))
	down := clock.Now()

	// The node came back (version 12); a reconcile reads it from the cache before the event's
	// handler ran: the record is brought up to it.
	clock.SetTime(down.Add(time.Minute))
	back := clock.Now()
	if seen, _ := c.For(node("12", corev1.ConditionTrue)); !seen[corev1.NodeReady].Equal(back) {
		t.Fatalf("the decision's node came back: seen %v, want Ready at %v", seen, back)
	}
	// The event of version 12, then a stale one of 11, change nothing.
	clock.SetTime(back.Add(time.Second))
	c.Update(node("11", corev1.ConditionUnknown), node("12", corev1.ConditionTrue))
	c.Update(node("10", corev1.ConditionTrue), node("11", corev1.ConditionUnknown))
	if got := c.Seen("n")[corev1.NodeReady]; !got.Equal(back) {
		t.Fatalf("events no newer than the decision's node: seen at %v, want %v", got, back)
	}
	// A heartbeat (13) changes nothing; the node failing again (14) is compared with 13.
	c.Update(node("12", corev1.ConditionTrue), node("13", corev1.ConditionTrue))
	clock.SetTime(back.Add(time.Minute))
	c.Update(node("13", corev1.ConditionTrue), node("14", corev1.ConditionUnknown))
	if got := c.Seen("n")[corev1.NodeReady]; !got.Equal(clock.Now()) {
		t.Fatalf("failed again: seen at %v, want %v", got, clock.Now())
	}
	c.forget("n")
	if seen, untrusted := c.For(node("20", corev1.ConditionTrue)); seen != nil || untrusted != nil {
		t.Fatalf("a node seen anew: %v %v, want nothing", seen, untrusted)
	}
}

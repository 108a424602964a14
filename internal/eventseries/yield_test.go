package eventseries

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingSink counts the writes that reached it.
type countingSink struct{ writes atomic.Int32 }

func (c *countingSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	c.writes.Add(1)
	return e, nil
}

func (c *countingSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	c.writes.Add(1)
	return e, nil
}

func (c *countingSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	c.writes.Add(1)
	return e, nil
}

// write calls do in a goroutine and returns a channel closed when it returned.
func write(do func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		do()
	}()
	return done
}

func returned(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// An event is written at once while nothing acts; while a write that acts is in flight it waits
// until none is (a second write begun meanwhile holds it too), and at most Lateness after its time.
func TestYieldingSinkWaitsForTheWritesThatAct(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	inner := &countingSink{}
	acting := &Acting{}
	s := &YieldingSink{Inner: inner, Acting: acting, Lateness: 2 * time.Second, Clock: clk}
	event := func() *eventsv1.Event { return &eventsv1.Event{EventTime: metav1.NewMicroTime(clk.Now())} }

	if _, err := s.Create(ctx, event()); err != nil || inner.writes.Load() != 1 {
		t.Fatalf("nothing acting: %d writes, %v; want the event written at once", inner.writes.Load(), err)
	}

	end := acting.Begin()
	done := write(func() { _, _ = s.Create(ctx, event()) })
	waitForTimer(t, clk) // the write waits: its timer is set
	if returned(done) || inner.writes.Load() != 1 {
		t.Fatalf("a write that acts in flight: the event was written")
	}
	second := acting.Begin()
	end()
	end() // once only
	if returned(done) {
		t.Fatalf("the second write that acts is still in flight: the event was written")
	}
	second()
	<-done
	if inner.writes.Load() != 2 {
		t.Fatalf("%d writes, want the event written once nothing acts", inner.writes.Load())
	}

	// Acting for longer than Lateness: the event (a series' patch too) goes Lateness after its time.
	end = acting.Begin()
	defer end()
	recorded := event()
	clk.Step(500 * time.Millisecond)
	done = write(func() { _, _ = s.Patch(ctx, recorded, nil) })
	waitForTimer(t, clk)
	clk.Step(1499 * time.Millisecond)
	if returned(done) {
		t.Fatalf("1.999 s after the event's time: written")
	}
	clk.Step(time.Millisecond)
	<-done
	if inner.writes.Load() != 3 {
		t.Fatalf("%d writes, want the event written Lateness after its time", inner.writes.Load())
	}
	// An event older than Lateness is written at once.
	old := &eventsv1.Event{EventTime: metav1.NewMicroTime(clk.Now().Add(-3 * time.Second))}
	if _, err := s.Update(ctx, old); err != nil || inner.writes.Load() != 4 {
		t.Fatalf("an event 3 s old: %d writes, %v; want it written at once", inner.writes.Load(), err)
	}
}

// waitForTimer waits until a write waits on the fake clock.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("no write waits")
		}
		time.Sleep(time.Millisecond)
	}
}

// A nil Acting is never busy.
func TestNilActingIsIdle(t *testing.T) {
	var a *Acting
	a.Begin()()
	inner := &countingSink{}
	s := &YieldingSink{Inner: inner}
	if _, err := s.Create(context.Background(), &eventsv1.Event{}); err != nil || inner.writes.Load() != 1 {
		t.Fatalf("%d writes, %v", inner.writes.Load(), err)
	}
}

package eventseries

import (
	"context"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
)

// DefaultLateness is YieldingSink.Lateness in the manager: how long after it was recorded an event
// waits at most for the writes that act. Issue 36's 25,000-node benchmark: the 1% failure's 250
// starts (a lease and a CR each, 500 writes) shared the API server with their 750 events (two
// regarding the NodeHealthCheck, one the Node), and their CRs came at a p99 of 2.05 to 2.65 s after
// the deadline, against 1.59 s with the events sent 3 s later (docs/performance.md).
const DefaultLateness = 2 * time.Second

// Acting counts the writes that act on nodes in flight (a remediation's lease and CR): the events
// that tell of them wait until none is (YieldingSink). The zero value is ready; a nil *Acting is
// never busy.
type Acting struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

// Begin counts one more write in flight; the func it returns ends it (once).
func (a *Acting) Begin() (end func()) {
	if a == nil {
		return func() {}
	}
	a.mu.Lock()
	if a.n == 0 {
		a.idle = make(chan struct{})
	}
	a.n++
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.n--; a.n == 0 {
				close(a.idle)
				a.idle = nil
			}
		})
	}
}

// busy returns, while writes are in flight, a channel closed when none is; nil when none is.
func (a *Acting) busy() <-chan struct{} {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.idle
}

// YieldingSink is an events sink whose writes yield to the writes that act: while Acting counts
// one in flight, an event is written once none is, or Lateness after it was recorded, whichever
// comes first. The event keeps the time it was recorded at (client-go's recorder set it); nothing is
// dropped: client-go writes each event from a goroutine of its own, which waits here. In an isolated
// failure the events come after the lease and CR they tell of anyway; in a burst of starts they no
// longer compete with them for the API server.
type YieldingSink struct {
	Inner  events.EventSink
	Acting *Acting
	// Lateness bounds the wait, from the event's time (DefaultLateness when 0).
	Lateness time.Duration
	// Clock tells the time and waits; nil: clock.RealClock.
	Clock clock.Clock
}

var _ events.EventSink = &YieldingSink{}

func (s *YieldingSink) Create(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	s.yield(ctx, event)
	return s.Inner.Create(ctx, event)
}

func (s *YieldingSink) Update(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	s.yield(ctx, event)
	return s.Inner.Update(ctx, event)
}

func (s *YieldingSink) Patch(ctx context.Context, oldEvent *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.yield(ctx, oldEvent)
	return s.Inner.Patch(ctx, oldEvent, data)
}

// yield waits while writes that act are in flight, up to Lateness after the event's time (its
// series' last observation for a series).
func (s *YieldingSink) yield(ctx context.Context, event *eventsv1.Event) {
	idle := s.Acting.busy()
	if idle == nil {
		return
	}
	c := s.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	at := event.EventTime.Time
	if event.Series != nil && event.Series.LastObservedTime.After(at) {
		at = event.Series.LastObservedTime.Time
	}
	lateness := s.Lateness
	if lateness <= 0 {
		lateness = DefaultLateness
	}
	wait := at.Add(lateness).Sub(c.Now())
	if at.IsZero() || wait > lateness {
		wait = lateness // no time, or one ahead of this clock: wait at most Lateness from now
	}
	if wait <= 0 {
		return
	}
	timer := c.NewTimer(wait)
	defer timer.Stop()
	for idle != nil {
		select {
		case <-idle:
			idle = s.Acting.busy() // another write may have begun meanwhile
		case <-timer.C():
			return
		case <-ctx.Done():
			return
		}
	}
}

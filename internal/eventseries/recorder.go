package eventseries

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
)

// CombinedPrefix begins the note of an event merged into its burst's series, as client-go's
// aggregator begins the message of a combined core event.
const CombinedPrefix = "(combined from similar events): "

// DefaultBurst is Recorder.Burst in the manager: how many similar events of a burst are recorded one
// by one. The scale benchmark's mass failure (300 of 1,000 nodes, 10 NodeHealthChecks) cost 490 event
// writes with every node's events on their own; with 5, each NodeHealthCheck costs at most 7 per
// reason (5 events, the series' create and its patch), and the failure's events fall below the
// public operator's 195 (client-go's aggregator records 9 of each reason and object one by one).
const DefaultBurst = 5

// DefaultMirror is Recorder.Mirror in the manager: of a burst, how many events Mirrorf also records
// regarding their related object (a remediation's start and end regarding its Node, for `kubectl
// describe node`). Each such event is a write of its own (the nodes differ, so no series merges
// them), so a mass failure mirrors only its first: issue 27's mass failure (300 of 1,000 nodes, 180
// remediated in 6 NodeHealthChecks) costs 2 more writes per NodeHealthCheck, 0.04 per failed node
// (its bound is 3.5, it costs 3.30 without), where 2 mirrored measured about 0.11 more.
const DefaultMirror = 1

// DefaultWindow is Recorder.Window in the manager: similar events less than this apart belong to one
// burst. Isolated failures minutes apart each keep their own event.
const DefaultWindow = time.Minute

// Recorder records events through Inner, merging bursts of similar events into one series.
type Recorder struct {
	// Inner records the events (the manager's events.k8s.io recorder).
	Inner events.EventRecorder
	// Burst is how many similar events of a burst are recorded one by one.
	Burst int
	// Window: similar events less than Window apart belong to one burst.
	Window time.Duration
	// Mirror is how many events of a burst Mirrorf also records regarding their related object.
	Mirror int
	// Clock tells the time; nil: clock.RealClock.
	Clock clock.PassiveClock

	mu     sync.Mutex
	bursts map[key]*burst
	pruned time.Time
}

// New returns a Recorder with the defaults.
func New(inner events.EventRecorder) *Recorder {
	return &Recorder{Inner: inner, Burst: DefaultBurst, Window: DefaultWindow, Mirror: DefaultMirror}
}

var _ events.EventRecorder = &Recorder{}

// key tells similar events apart: the object they regard, their type and reason.
type key struct {
	kind            string
	namespace, name string
	uid             types.UID
	eventType       string
	reason          string
}

// burst is the similar events of one key that came each within Window of the previous one.
type burst struct {
	count int
	last  time.Time
	// action is the action of the burst's combined events: the first combined event's.
	action string
}

// Eventf records the event, or its part of its burst's series (see the package doc). A combined
// event regards the object without its resourceVersion: client-go's recorder tells series apart by
// the whole reference, and a NodeHealthCheck's version changes with every status write, so the
// burst would start a series of its own after each write. (The events recorded one by one keep it:
// client-go merges one of them only with an event of the same version, so that, say, a second
// Disabled event with a new message after a status write is an event of its own.)
func (r *Recorder) Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	r.eventf(regarding, related, eventtype, reason, action, note, args...)
}

// Mirrorf records the event as Eventf does and, for the first Mirror events of its burst (an
// isolated event, the first few of a mass failure), also an event regarding the related object,
// related to the regarding one: the remediation of a node shows in the node's own events (`kubectl
// describe node`, `kubectl events --for node/<name>`, exporters that route on the regarding object),
// at a cost in a mass failure bounded per burst, not per node.
func (r *Recorder) Mirrorf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if n := r.eventf(regarding, related, eventtype, reason, action, note, args...); n <= r.Mirror && related != nil {
		r.Inner.Eventf(related, regarding, eventtype, reason, action, note, args...)
	}
}

// eventf records the event, or its part of its burst's series, and returns its place in its burst.
func (r *Recorder) eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) int {
	n, combinedAction := r.observe(regarding, eventtype, reason, action)
	if n <= r.Burst {
		r.Inner.Eventf(regarding, related, eventtype, reason, action, note, args...)
		return n
	}
	r.Inner.Eventf(withoutVersion(regarding), nil, eventtype, reason, combinedAction, "%s", CombinedPrefix+fmt.Sprintf(note, args...))
	return n
}

// withoutVersion returns obj without its resourceVersion (a copy when it has one).
func withoutVersion(obj runtime.Object) runtime.Object {
	if m, err := meta.Accessor(obj); err != nil || m.GetResourceVersion() == "" {
		return obj
	}
	c := obj.DeepCopyObject()
	if m, err := meta.Accessor(c); err == nil {
		m.SetResourceVersion("")
	}
	return c
}

// observe counts the event in its burst and returns its place in it (beyond Burst: combined) and the
// action of the burst's combined events.
func (r *Recorder) observe(regarding runtime.Object, eventtype, reason, action string) (int, string) {
	k := key{kind: fmt.Sprintf("%T", regarding), eventType: eventtype, reason: reason}
	if m, err := meta.Accessor(regarding); err == nil {
		k.namespace, k.name, k.uid = m.GetNamespace(), m.GetName(), m.GetUID()
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prune(now)
	if r.bursts == nil {
		r.bursts = map[key]*burst{}
	}
	b := r.bursts[k]
	if b == nil || now.Sub(b.last) >= r.Window {
		b = &burst{}
		r.bursts[k] = b
	}
	b.count++
	b.last = now
	if b.count <= r.Burst {
		return b.count, ""
	}
	if b.action == "" {
		b.action = action
	}
	return b.count, b.action
}

// prune forgets bursts that ended, at most once per Window.
func (r *Recorder) prune(now time.Time) {
	if now.Sub(r.pruned) < r.Window {
		return
	}
	r.pruned = now
	for k, b := range r.bursts {
		if now.Sub(b.last) >= r.Window {
			delete(r.bursts, k)
		}
	}
}

func (r *Recorder) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

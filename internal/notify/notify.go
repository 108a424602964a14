// Package notify fans changes of a piece of shared in-memory state (the upgrade gate, the clock skew
// verdict, refused creates) out to the controllers that read it, as controller-runtime channel
// sources: each subscriber gets an event after a change, and events coalesce, so a subscriber that
// falls behind gets one event for several changes and reads the state anew.
package notify

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/event"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Subscribers is a set of subscriptions; the zero value has none. It is safe for concurrent use.
type Subscribers struct {
	mu   sync.Mutex
	subs []chan event.GenericEvent
}

// Subscribe returns a new subscription: a channel with room for one pending event.
func (s *Subscribers) Subscribe() <-chan event.GenericEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan event.GenericEvent, 1)
	s.subs = append(s.subs, ch)
	return ch
}

// Notify sends every subscription an event, unless one is pending already; it never blocks. The
// event carries an empty NodeHealthCheck: receivers map it to the NodeHealthChecks to reconcile.
func (s *Subscribers) Notify() {
	s.mu.Lock()
	subs := s.subs
	s.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- event.GenericEvent{Object: &remediationv1alpha1.NodeHealthCheck{}}:
		default: // one is pending already
		}
	}
}

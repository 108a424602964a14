// Package notify fans changes of a piece of shared in-memory state (the upgrade gate, the clock skew
// verdict, refused creates) out to the controllers that read it, as controller-runtime channel
// sources: each subscriber gets an event after a change, and events coalesce, so a subscriber that
// falls behind gets one event for several changes and reads the state anew. State kept in a pure
// package (the upgrade gate, internal/upgrade) notifies through plain channels instead, which
// Source adapts.
package notify

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

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

// Source adapts a plain subscription (a channel that receives a value after each change and
// coalesces, as upgrade.Gate.Changes returns) to a controller source: from the controller's start
// until it stops, each value hands h a generic event carrying an empty NodeHealthCheck, as Notify
// does. Subscribe before the manager starts, as for Subscribe: a change in between is pending on
// the channel and arrives once the source starts.
func Source(ch <-chan struct{}, h handler.EventHandler) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ch:
					h.Generic(ctx, event.GenericEvent{Object: &remediationv1alpha1.NodeHealthCheck{}}, q)
				}
			}
		}()
		return nil
	})
}

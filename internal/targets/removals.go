package targets

import (
	"sync"
	"time"

	"github.com/medik8s/node-healthcheck/internal/health"
)

// removalsSeen remembers when a gatherer first saw each node's removal whose signal carries no time
// (Karpenter's taint), so that health.Input.RemovalHold runs from then: in memory only, so after a
// restart such a removal may hold the node for up to the hold again, never less.
type removalsSeen struct {
	mu sync.Mutex
	// seen maps a node to its removal's signal and when it was first seen, and when last.
	seen map[string]removalSeen
}

type removalSeen struct {
	by          string
	first, last time.Time
}

// removalForget is how long a node's record stays once no decision has read it (the node is gone,
// or its NodeHealthCheck no longer skips nodes being removed): longer than any reconcile interval.
const removalForget = 10 * time.Minute

// removalSince gives each node of the input that is being removed without a time the time this
// gatherer first saw its removal, and forgets the nodes no longer removed and records no decision
// read for removalForget.
func (g *Gatherer) removalSince(in *health.Input, now time.Time) {
	r := &g.removals
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if n.BeingRemovedBy == "" {
			delete(r.seen, n.Name)
			continue
		}
		if !n.BeingRemovedSince.IsZero() {
			continue
		}
		if r.seen == nil {
			r.seen = map[string]removalSeen{}
		}
		s, ok := r.seen[n.Name]
		if !ok || s.by != n.BeingRemovedBy {
			s = removalSeen{by: n.BeingRemovedBy, first: now}
		}
		s.last = now
		r.seen[n.Name] = s
		n.BeingRemovedSince = s.first
	}
	for node, s := range r.seen {
		if now.Sub(s.last) > removalForget || s.last.After(now.Add(removalForget)) {
			delete(r.seen, node)
		}
	}
}

package targets

import (
	"hash/fnv"
	"maps"
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	"github.com/medik8s/node-healthcheck/internal/health"
)

// LabelEpochSource is a NodeSource that tells when which nodes a selector selects may have changed
// (watch.Affected): LabelEpoch changes with every node created, deleted or relabelled, before the
// event is routed to any NodeHealthCheck.
type LabelEpochSource interface {
	LabelEpoch() uint64
}

// overlapsMemo is a NodeHealthCheck's overlaps and the hash of what they were computed from.
type overlapsMemo struct {
	from     uint64
	overlaps []health.Overlap
}

// selectorsMemo is every NodeHealthCheck's selector, indexed, and the hash of the NodeHealthChecks
// they were parsed from.
type selectorsMemo struct {
	from      uint64
	selectors *health.Selectors
}

// knownOverlaps sets the reading's overlaps with the other NodeHealthChecks from the last ones
// computed when nothing they depend on changed since: the NodeHealthCheck's selector (its
// generation), the node labels (the node source's LabelEpoch, read before the nodes), and each
// other NodeHealthCheck's name, UID, selector (generation) and deletion. Computing them looks up,
// for each selected node, the selectors that may select it (health.Selectors, parsed and indexed
// once per change of any NodeHealthCheck and shared): O(pool), where matching every selector was
// O(NodeHealthChecks × pool), a sixth of the manager's CPU at 25,000 nodes in 250 pools when the
// NodeHealthChecks had been created one after another. It is computed outside the Gatherer's lock,
// which every decision's CR reading takes. Without a LabelEpochSource, assemble computes them.
func (g *Gatherer) knownOverlaps(r *reading) {
	if !r.epochKnown {
		return
	}
	h := fnv.New64a()
	var buf []byte
	hash := func(s string, n int64, deleting bool) uint64 {
		buf = strconv.AppendInt(append(append(buf[:0], s...), 0), n, 10)
		if deleting {
			buf = append(buf, 'd')
		}
		h.Reset()
		_, _ = h.Write(buf)
		return h.Sum64()
	}
	// The NodeHealthChecks' hashes are summed: the cache lists them in no fixed order.
	var nhcs uint64
	for _, o := range r.nhcs {
		nhcs += hash(o.Name+"\x00"+string(o.UID), o.Generation, !o.DeletionTimestamp.IsZero())
	}
	from := nhcs*31 + hash(string(r.stored.UID), r.stored.Generation, false)
	from = from*31 + hash("", int64(r.labelEpoch), false) //nolint:gosec // a counter, compared for equality only

	g.mu.Lock()
	m, known := g.overlaps[r.stored.UID]
	selectors := g.selectors
	g.mu.Unlock()
	if known && m.from == from {
		r.overlaps, r.overlapsKnown = m.overlaps, true
		return
	}
	if selectors.selectors == nil || selectors.from != nhcs {
		selectors = selectorsMemo{from: nhcs, selectors: health.NewSelectors(r.nhcs)}
	}
	r.overlaps, r.overlapsKnown = selectors.selectors.Overlaps(r.stored.Name, r.nodes), true

	g.mu.Lock()
	defer g.mu.Unlock()
	g.selectors = selectors
	if g.overlaps == nil {
		g.overlaps = map[types.UID]overlapsMemo{}
	}
	g.overlaps[r.stored.UID] = overlapsMemo{from: from, overlaps: r.overlaps}
	if len(g.overlaps) > len(r.nhcs)+1 { // some NodeHealthCheck is gone: forget its overlaps
		known := make(map[types.UID]bool, len(r.nhcs)+1)
		known[r.stored.UID] = true
		for _, o := range r.nhcs {
			known[o.UID] = true
		}
		maps.DeleteFunc(g.overlaps, func(uid types.UID, _ overlapsMemo) bool { return !known[uid] })
	}
}

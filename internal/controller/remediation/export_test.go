package remediation

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// CreateInLeaseNamespace is how a start creates a node's lease (takeLease), for the suite.
func (r *Reconciler) CreateInLeaseNamespace(ctx context.Context, lease *coordinationv1.Lease) error {
	return r.createInLeaseNamespace(ctx, lease)
}

// MemorySizes returns how many entries the controller keeps in memory, by record, for the suite:
// the nodes with reports or writes remembered and those entries, the leases left to release, the
// NodeHealthChecks swept, the refused creates and the created CRs counted from records.
func (r *Reconciler) MemorySizes() map[string]int {
	nhcs, nodes, entries := r.memory.size()
	r.memory.mu.Lock()
	names := len(r.memory.names)
	r.memory.mu.Unlock()
	count := func(m interface{ Range(func(any, any) bool) }) int {
		n := 0
		m.Range(func(any, any) bool { n++; return true })
		return n
	}
	sizes := map[string]int{"memory nodes": nodes, "memory entries": entries, "memory NodeHealthChecks": nhcs, "names": names,
		"leftLeases": count(&r.leftLeases), "sweptLeases": count(&r.sweptLeases), "refusals": r.Refusals.Len()}
	if r.targets != nil {
		sizes["created"] = r.targets.Recorded()
	}
	return sizes
}

// Remembers reports whether the controller keeps something in memory about the node, for any
// NodeHealthCheck: a report made once, a write, a refused create.
func (r *Reconciler) Remembers(node string) bool {
	r.memory.mu.Lock()
	defer r.memory.mu.Unlock()
	for _, nodes := range r.memory.nhcs {
		if nodes[node] != nil {
			return true
		}
	}
	return false
}

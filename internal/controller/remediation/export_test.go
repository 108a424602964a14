package remediation

import (
	"cmp"
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/eventseries"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// Standalone returns a reconciler as after a restart of the manager, called directly: it knows
// nothing but what it reads through c (its leases too, unless leases is set), watches nothing and
// records no event.
func Standalone(c client.Client, clk clock.PassiveClock, leaseNamespace string, leases client.Reader) *Reconciler {
	if leases == nil {
		leases = c
	}
	refusals := &targets.Refusals{}
	return &Reconciler{Client: c, Clock: clk, Wall: clock.RealClock{}, APIReader: c, Leases: leases, LeaseNamespace: leaseNamespace,
		Recorder: eventseries.New(&events.FakeRecorder{}), Refusals: refusals,
		Wiring: &watch.Wiring{Gatherer: &targets.Gatherer{Reader: c, APIReader: c, Machines: targets.NewMachines(c), Wall: clock.RealClock{},
			Leases: leases, LeaseNamespace: cmp.Or(leaseNamespace, nodelease.DefaultNamespace), Etcd: &targets.EtcdReader{Reader: c, Mapper: c.RESTMapper()},
			Refusals: refusals}}}
}

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
	sizes["created"] = r.Wiring.Gatherer.Recorded()
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

package remediation

import (
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/medik8s/node-healthcheck/internal/targets"
)

// onceKind is what a report made once is about. Each kind keeps its own values per NodeHealthCheck
// and node (memory).
type onceKind uint8

const (
	// onceEtcd: the etcd guard holds a control-plane node back (value: the guard's message).
	onceEtcd onceKind = iota
	// onceStale: a CR of a step the spec no longer has holds the node (value: the CR's uid).
	onceStale
	// onceHeld: the gate of new remediations holds an escalation (value: the reason and the
	// running step's start).
	onceHeld
	// onceDryRun: a dry-run NodeHealthCheck would escalate (value: what it would do).
	onceDryRun
	// onceOld: a CR flagged as running too long and counted in MetricOldRemediationCR (value: the
	// CR's uid).
	onceOld
	// onceLease: another party holds the node's lease (value: the holder).
	onceLease
	// onceRefused: the API server refused a CR's create (value: the event's note).
	onceRefused
	// onceExists: our CR of another template takes the name of the CR to create (value: its uid).
	onceExists
	// onceFirstWins: another NodeHealthCheck's CR remediates the node (value: its uid).
	onceFirstWins
	// onceForeign: an object no NodeHealthCheck controls takes the CR's name (value: its uid).
	onceForeign
	// onceMachineLink: the Machine the node claims does not confirm it (value: the claim and why).
	onceMachineLink
)

// writeVerb is a write of this controller that the cache may not show yet (ownWrites).
type writeVerb uint8

const (
	// writeDelete: a CR deleted.
	writeDelete writeVerb = iota
	// writeTimedOut: a CR marked nhc-timed-out.
	writeTimedOut
)

// ownWrite is one write of a CR, by its uid.
type ownWrite struct {
	verb writeVerb
	uid  types.UID
}

// onceValues is how many values of one kind the memory keeps per NodeHealthCheck and node, the
// newest: more than a node has at once of any kind (stale CRs, a refused create's attempts), so a
// report is made once as long as its value lasts, while whoever writes a new value each time (a
// node its Machine claim, another party the lease holder) costs at most this many; a value that
// comes back after eight others is reported again.
const onceValues = 8

// ownWritesTTL is how long a write of this controller is not made again while the cache still shows
// the object as it was: the cache sees its own writes within milliseconds; a minute covers an
// overloaded API server. A CR a remediator's finalizer keeps shows its deletionTimestamp by then.
const ownWritesTTL = time.Minute

// memory is what the remediation controller keeps in memory about each NodeHealthCheck's nodes: the
// reports made once (events, and each old CR counted once in MetricOldRemediationCR), as a short
// hash of their value per kind, and its recent writes that the cache may not show yet. Every entry
// belongs to a NodeHealthCheck (by uid) and a node, and goes with them: forget drops a node's entries
// when the NodeHealthCheck neither selects the node nor has a CR of it any more (deleted, or
// relabelled), forgetNHC all of a NodeHealthCheck's when it is gone. So it is bounded by the nodes
// the NodeHealthChecks hold, times the kinds, times onceValues. Lost at a restart: a report may be
// made once more then. Safe for concurrent use.
type memory struct {
	mu   sync.Mutex
	nhcs map[types.UID]map[string]*nodeMemory
	// names maps each NodeHealthCheck's name to its uid, to forget it by the name a reconcile of a
	// deleted one is given (track).
	names map[string]types.UID
}

// nodeMemory is what memory holds for one NodeHealthCheck and node.
type nodeMemory struct {
	// once holds, per kind, the hashes of the values reported, oldest first.
	once map[onceKind][]uint64
	// writes holds when (wall) each recent write was made.
	writes map[ownWrite]time.Time
}

// node returns the entries of the NodeHealthCheck and node, created when create is set (nil
// otherwise when there are none). Called with m.mu held.
func (m *memory) node(nhc types.UID, node string, create bool) *nodeMemory {
	nodes := m.nhcs[nhc]
	if nodes == nil {
		if !create {
			return nil
		}
		if m.nhcs == nil {
			m.nhcs = map[types.UID]map[string]*nodeMemory{}
		}
		nodes = map[string]*nodeMemory{}
		m.nhcs[nhc] = nodes
	}
	n := nodes[node]
	if n == nil && create {
		n = &nodeMemory{}
		nodes[node] = n
	}
	return n
}

// first reports whether the report of the kind and value about the node is the first since the
// value was last seen, and remembers it.
func (m *memory) first(nhc types.UID, node string, kind onceKind, value string) bool {
	h := fnv.New64a()
	h.Write([]byte(value))
	sum := h.Sum64()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.node(nhc, node, true)
	if slices.Contains(n.once[kind], sum) {
		return false
	}
	if n.once == nil {
		n.once = map[onceKind][]uint64{}
	}
	seen := append(n.once[kind], sum)
	if len(seen) > onceValues {
		seen = slices.Delete(seen, 0, len(seen)-onceValues)
	}
	n.once[kind] = seen
	return true
}

// made reports whether the write was made within ownWritesTTL of now, and forgets the node's older
// ones.
func (m *memory) made(nhc types.UID, node string, w ownWrite, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.node(nhc, node, false)
	if n == nil {
		return false
	}
	for k, at := range n.writes {
		if now.Sub(at) > ownWritesTTL {
			delete(n.writes, k)
		}
	}
	_, ok := n.writes[w]
	return ok
}

// record remembers a write made at now.
func (m *memory) record(nhc types.UID, node string, w ownWrite, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.node(nhc, node, true)
	if n.writes == nil {
		n.writes = map[ownWrite]time.Time{}
	}
	n.writes[w] = now
}

// track remembers the NodeHealthCheck's uid by name, and returns the uid a NodeHealthCheck of that
// name had before when it was another (deleted and created again while no reconcile saw it gone).
func (m *memory) track(name string, uid types.UID) (replaced types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names == nil {
		m.names = map[string]types.UID{}
	}
	if before, ok := m.names[name]; ok && before != uid {
		replaced = before
	}
	m.names[name] = uid
	return replaced
}

// uidOf returns the uid last tracked for the name, and forgets the name.
func (m *memory) uidOf(name string) (types.UID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid, ok := m.names[name]
	delete(m.names, name)
	return uid, ok
}

// forget drops the NodeHealthCheck's entries of the nodes it no longer has (has tells those it
// selects or has CRs of). It returns the nodes whose old CRs no NodeHealthCheck remembers counting
// any more (MetricOldRemediationCR's series go).
func (m *memory) forget(nhc types.UID, has func(node string) bool) (uncounted []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for node, n := range m.nhcs[nhc] {
		if has(node) {
			continue
		}
		delete(m.nhcs[nhc], node)
		if len(n.once[onceOld]) > 0 && !m.counted(node) {
			uncounted = append(uncounted, node)
		}
	}
	if len(m.nhcs[nhc]) == 0 {
		delete(m.nhcs, nhc)
	}
	return uncounted
}

// forgetNHC drops every entry of a NodeHealthCheck that is gone, and returns the nodes whose old CRs
// no NodeHealthCheck remembers counting any more.
func (m *memory) forgetNHC(nhc types.UID) (uncounted []string) {
	return m.forget(nhc, func(string) bool { return false })
}

// counted reports whether some NodeHealthCheck remembers counting an old CR of the node. Called with
// m.mu held; NodeHealthChecks are few.
func (m *memory) counted(node string) bool {
	for _, nodes := range m.nhcs {
		if n := nodes[node]; n != nil && len(n.once[onceOld]) > 0 {
			return true
		}
	}
	return false
}

// size returns how many nodes of how many NodeHealthChecks have entries, and how many values and
// writes they hold in all.
func (m *memory) size() (nhcs, nodes, entries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ns := range m.nhcs {
		nhcs++
		for _, n := range ns {
			nodes++
			entries += len(n.writes)
			for _, v := range n.once {
				entries += len(v)
			}
		}
	}
	return nhcs, nodes, entries
}

// forgetGone drops what this controller keeps in memory about the nodes the snapshot's
// NodeHealthCheck no longer has: neither selected nor with a CR of it (deleted, or relabelled). Its
// leases left to release (leftLeases) are not among them: releaseLeftLeases drops each once it is
// released or gone (the garbage collector deletes a deleted node's lease with it).
func (r *Reconciler) forgetGone(snap *targets.Snapshot) {
	has := func(node string) bool {
		_, selected := snap.SelectedNode(node)
		return selected || len(snap.CRs[node]) > 0
	}
	deleteOldCRSeries(r.memory.forget(snap.Stored.UID, has))
	r.Refusals.Forget(snap.Stored.UID, has)
}

// forgetNHC drops everything this controller keeps in memory about a NodeHealthCheck that is gone
// (its name, as a reconcile of the deleted object is given it) and its metric series.
func (r *Reconciler) forgetNHC(name string) {
	decisions.DeleteLabelValues(name)
	remediationErrors.DeleteLabelValues(name)
	if uid, ok := r.memory.uidOf(name); ok {
		r.forgetUID(uid)
	}
}

// forgetUID drops everything this controller keeps in memory about the NodeHealthCheck of that uid.
func (r *Reconciler) forgetUID(uid types.UID) {
	deleteOldCRSeries(r.memory.forgetNHC(uid))
	r.Refusals.ForgetNHC(uid)
	r.Wiring.Gatherer.ForgetNHC(uid)
	r.sweptLeases.Delete(uid)
	prefix := string(uid) + "/"
	r.leftLeases.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			r.leftLeases.Delete(k)
		}
		return true
	})
}

// deleteOldCRSeries deletes the MetricOldRemediationCR series of nodes no NodeHealthCheck holds any
// more.
func deleteOldCRSeries(nodes []string) {
	for _, node := range nodes {
		oldRemediationCR.DeleteLabelValues(node, "")
	}
}

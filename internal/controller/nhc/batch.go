package nhc

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// How status writes are spaced: many nodes of one NodeHealthCheck changing within seconds cost a
// write every StatusBatch (holdWrite), and a node whose remediation starts now is listed with its
// first CR in one write (awaitStarts).

// DefaultStartWait is StartWait in the manager: the remediation controller creates a CR within
// milliseconds of the decision; a node it holds back (a lease another operator holds, etcd quorum)
// is listed this much later.
const DefaultStartWait = 2 * time.Second

// DefaultStatusBatch is StatusBatch in the manager. A node listed in status waits at most this much
// beyond its deadline for the write that lists it (issue 27's target: every failed node listed within
// 5 s of its deadline at 1,000 nodes; the scale benchmark measured 0.1 to 2.3 s before batching, at
// 1,000 and 5,000 nodes). A pool whose nodes fail over 10 s (the node lifecycle controller marks them
// one by one) is listed in about 6 writes instead of one per node.
const DefaultStatusBatch = 2 * time.Second

// lastWrite is the last status this controller wrote for a NodeHealthCheck.
type lastWrite struct {
	uid types.UID
	// base is the status the write replaced, written the status it wrote (both without
	// lastUpdateTime), resourceVersion the object's after the write.
	base, written   remediationv1alpha1.NodeHealthCheckStatus
	resourceVersion string
	// at is when it was written (Wall).
	at time.Time
	// burst: the write had been held for the batch (changes came faster than StatusBatch), so an
	// incident is under way; held: a change since the write is being held.
	burst, held bool
}

// holdWrite decides whether the changed status is written now. It is not, and no hold is returned,
// when it equals the last status this controller wrote while the cache still shows the status that
// write replaced: the cache is behind, and the write would only repeat the last one (and be refused
// as a conflict). A status someone else wrote meanwhile is rewritten. It is held, for the returned
// time, while less than StatusBatch has passed since the last write of this NodeHealthCheck (the
// first change after a quiet StatusBatch, as an isolated failure's, is written at once). During a
// burst (the last write had been held), a change of the counts alone (nodes turning soon unhealthy
// or healthy without CRs, which lists no node) waits up to countsOnlyBatches StatusBatches; any
// other change brings it along. An isolated change of the counts (a node labelled into the
// selector, one node turning soon unhealthy) waits at most StatusBatch.
func (r *Reconciler) holdWrite(stored *remediationv1alpha1.NodeHealthCheck, status *remediationv1alpha1.NodeHealthCheckStatus) (time.Duration, bool) {
	r.writtenMu.Lock()
	defer r.writtenMu.Unlock()
	last, ok := r.written[stored.Name]
	if !ok || last.uid != stored.UID {
		return 0, true
	}
	if stored.ResourceVersion != last.resourceVersion && equalReports(&stored.Status, &last.base) && equalReports(status, &last.written) {
		return 0, false
	}
	if newStarts(&stored.Status, status) {
		// The repair budget counts a node's remediation starts from this history and the running
		// CRs: a start recorded late could be forgotten when its CR goes (the node back within the
		// batch) and a further remediation start beyond the budget.
		return 0, true
	}
	window := r.StatusBatch
	if last.burst && countsOnly(&stored.Status, status) {
		window *= countsOnlyBatches
	}
	if hold := last.at.Add(window).Sub(r.Wall.Now()); hold > 0 {
		last.held = true
		r.written[stored.Name] = last
		return hold, false
	}
	return 0, true
}

// newStarts tells whether the status records remediation starts (remediationHistory,
// dryRunRemediationHistory) the stored one does not.
func newStarts(stored, status *remediationv1alpha1.NodeHealthCheckStatus) bool {
	return !equality.Semantic.DeepEqual(stored.RemediationHistory, status.RemediationHistory) ||
		!equality.Semantic.DeepEqual(stored.DryRunRemediationHistory, status.DryRunRemediationHistory)
}

// countsOnlyBatches is how many StatusBatches a change of the counts alone may wait during a burst
// (holdWrite). In the scale benchmark's mass failure the node lifecycle controller marks a pool's nodes Unknown over
// up to 13 s, 30 s before they are listed: their counts cost a write every 2 s before, about one in
// six of the incident's status writes.
const countsOnlyBatches = 3

// countsOnly tells whether two statuses differ in their counts alone.
func countsOnly(a, b *remediationv1alpha1.NodeHealthCheckStatus) bool {
	a2, b2 := *a, *b
	a2.ObservedNodes, a2.HealthyNodes, a2.LastUpdateTime = nil, nil, nil
	b2.ObservedNodes, b2.HealthyNodes, b2.LastUpdateTime = nil, nil, nil
	return equality.Semantic.DeepEqual(a2, b2)
}

// wrote remembers a status write (holdWrite).
func (r *Reconciler) wrote(stored, updated *remediationv1alpha1.NodeHealthCheck) {
	r.writtenMu.Lock()
	defer r.writtenMu.Unlock()
	if r.written == nil {
		r.written = map[string]lastWrite{}
	}
	prev, ok := r.written[stored.Name]
	w := lastWrite{uid: updated.UID, resourceVersion: updated.ResourceVersion, at: r.Wall.Now(),
		base: *stored.Status.DeepCopy(), written: *updated.Status.DeepCopy(), burst: ok && prev.uid == updated.UID && prev.held}
	w.base.LastUpdateTime, w.written.LastUpdateTime = nil, nil
	r.written[stored.Name] = w
}

// equalReports tells whether two statuses say the same, whenever they were last updated.
func equalReports(a, b *remediationv1alpha1.NodeHealthCheckStatus) bool {
	a2, b2 := *a, *b
	a2.LastUpdateTime, b2.LastUpdateTime = nil, nil
	return equality.Semantic.DeepEqual(a2, b2)
}

// awaitMaxStarts is how many nodes starting at once the status write still waits for (awaitStarts).
const awaitMaxStarts = 3

// awaitStarts returns how long the status write waits for the first CRs of the nodes whose
// remediation starts now (zero: write now). Each such node waits at most StartWait from when this
// controller first saw it starting: the remediation controller, deciding from the same cache at the
// same deadline, creates the CR at once, and the status then lists the node with it in one write
// instead of listing it first without. Issue 15 counts the requests a failure costs; the status of
// a node the remediation controller holds back comes StartWait late. The wait saves one status
// write per NodeHealthCheck, whatever the number of nodes: with more than awaitMaxStarts starting
// at once (a mass failure, where the API server may take seconds for their CRs) that write costs
// each node little, and the status lists them at once.
func (r *Reconciler) awaitStarts(snap *targets.Snapshot) time.Duration {
	if r.StartWait <= 0 || snap.DryRun() { // dry-run: no CR comes
		return 0
	}
	r.startingMu.Lock()
	defer r.startingMu.Unlock()
	if r.starting == nil {
		r.starting = map[string]map[string]time.Time{}
	}
	name, wallNow := snap.Stored.Name, r.Wall.Now()
	seen := r.starting[name]
	pending := map[string]time.Time{}
	wait := r.StartWait
	for _, n := range snap.Decision.Nodes {
		if n.Action != health.StartRemediation || len(snap.CRs[n.Name]) > 0 {
			continue
		}
		since, ok := seen[n.Name]
		if !ok {
			since = wallNow
		}
		pending[n.Name] = since
		// The node waiting longest bounds the wait of all: new starts do not hold it back longer.
		wait = min(wait, since.Add(r.StartWait).Sub(wallNow))
	}
	if len(pending) == 0 || len(pending) > awaitMaxStarts {
		delete(r.starting, name)
		return 0
	}
	r.starting[name] = pending
	return max(wait, 0)
}

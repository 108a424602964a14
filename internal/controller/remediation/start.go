package remediation

import (
	"context"
	"slices"
	"time"

	"github.com/medik8s/node-healthcheck/internal/health"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// creates reports whether the decision creates a CR: it starts a remediation on some node, or
// escalates one to a next step.
func creates(d health.Decision) bool {
	return slices.ContainsFunc(d.Nodes, func(n health.NodeDecision) bool {
		return n.Action == health.StartRemediation || (n.Action == health.ContinueRemediation && n.Escalation.Next != nil)
	})
}

// start starts a node's remediation: a control-plane node's one at a time across NodeHealthChecks
// (controlPlaneStart), any other at once (startNow). It returns when to look again.
func (r *Reconciler) start(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (time.Time, error) {
	if n, ok := nodeInput(snap, d.Name); ok && n.ControlPlane {
		return r.controlPlaneStart(ctx, snap, d)
	}
	return r.startNow(ctx, snap, d)
}

// controlPlaneStart starts a control-plane node's remediation one at a time across NodeHealthChecks
// reconciled at once: under a lock, decided again with the remediation CRs read again after the
// last such start ended (which waited until the cache showed its CR, or recorded it:
// targets.Gatherer.Recheck), so a control-plane remediation another NodeHealthCheck started
// meanwhile holds this one back, as in a serial reconcile. The nodes, templates and Machine links
// are the reconcile's one reading.
func (r *Reconciler) controlPlaneStart(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (time.Time, error) {
	r.controlPlane.Lock()
	defer r.controlPlane.Unlock()
	fresh, err := r.Wiring.Gatherer.Recheck(ctx, snap, targets.Acting)
	if err != nil {
		return time.Time{}, err
	}
	again, ok := fresh.Node(d.Name)
	if !ok || again.Action != health.StartRemediation {
		return fresh.Next(), nil // decided otherwise now; the CR's event brings the next decision
	}
	return r.startNow(ctx, fresh, again)
}

// startNow takes the node's lease and creates the CR of the decision's first step (the decision
// weighed the lease as the cache shows it, and the etcd guard). It returns when to look again.
func (r *Reconciler) startNow(ctx context.Context, snap *targets.Snapshot, d health.NodeDecision) (time.Time, error) {
	nhc, node, now := snap.Stored, d.Name, snap.Now
	if d.Step == nil {
		return time.Time{}, nil
	}
	// The lease cache first: where it shows no lease, the lease is created with one request (one
	// another operator took a moment ago, which the cache does not show yet, makes the create fail,
	// and holdLease reads it then). A lease the cache shows is read around the cache: a release the
	// cache does not show yet would hold the node back until the released lease's recorded expiry,
	// up to its full duration.
	lease, err := r.getLease(ctx, node, false)
	if err == nil && lease != nil {
		lease, err = r.getLease(ctx, node, true)
	}
	if err != nil {
		return time.Time{}, err
	}
	held, err := r.holdLease(ctx, nhc, node, lease, nodelease.Duration(d.Step.Timeout), now, now)
	if err != nil {
		return time.Time{}, err
	}
	if !held.held {
		r.leaseBusy(nhc, node, held)
		return held.retryAt, nil
	}
	return held.renewAt, r.create(ctx, snap, node, *d.Step, d.Health.Requested)
}

package chaos

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Settling: after a step the driver waits until
//  1. a manager leads, and after a change of leader its controllers have reconciled every
//     NodeHealthCheck once;
//  2. the leader's cache holds every object the driver wrote in the step, at least at the version
//     written (or has dropped it, for a deletion);
//  3. the controllers are idle: their workqueues are empty and no reconcile runs (controller-runtime's
//     workqueue_depth and controller_runtime_active_workers), no manager request is in flight or
//     was made in the last quietAPI, no request was failed in the last quietAfterFault (a failed
//     reconcile is retried after a backoff that makes no request), every watch the driver cut is
//     open again (the informer listed again), and all of this held for quietWindow.
//
// A step that does not settle within settleTimeout is checked anyway, for the safety invariants
// only (see snapshot.Settled).
const (
	quietAPI        = 300 * time.Millisecond
	quietAfterFault = time.Second
	quietWindow     = 200 * time.Millisecond
	// staleQueue: a queue that stays non-empty this long while nothing runs and nothing is
	// requested belongs to a manager that stopped with items in it (the gauge is shared by the
	// managers of this process); its depth becomes the baseline.
	staleQueue    = 2 * time.Second
	settleTimeout = 30 * time.Second
)

// written is an object the driver wrote in this step, for the leader's cache to catch up with.
type written struct {
	obj     client.Object // an empty object of the right type, with its key
	rv      uint64
	deleted bool
}

// gauges sums a gauge family over all its series.
func gauges(name string) float64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

func reconciles() float64 { return gauges("controller_runtime_reconcile_total") }

// settle waits as described above; it returns whether the world settled and, if not, why.
func (w *world) settle(ctx context.Context) (bool, string) {
	deadline := time.Now().Add(settleTimeout)
	for {
		for _, msg := range w.managers.reap() {
			w.logf("    %s", msg)
			w.leaderChanged()
		}
		if len(w.managers.list) == 0 {
			m, err := w.managers.start()
			if err != nil {
				return false, err.Error()
			}
			w.logf("    no manager left: started %s", m.name)
		}
		if w.managers.leader() != nil {
			break
		}
		if time.Now().After(deadline) {
			return false, "no manager leads"
		}
		time.Sleep(20 * time.Millisecond)
	}
	leader := w.managers.leader()
	if w.leaderName != leader.name {
		w.leaderName = leader.name
		w.leaderChanged()
	}

	for _, wr := range w.writes {
		for {
			ok, err := cached(ctx, leader, wr)
			if err != nil {
				return false, err.Error()
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				return false, fmt.Sprintf("the cache of %s did not catch up with %T %s", leader.name, wr.obj, client.ObjectKeyFromObject(wr.obj))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	w.writes = nil

	var quietSince, staleSince time.Time
	for {
		now := time.Now()
		depth := gauges("workqueue_depth") - w.depthBaseline
		active := gauges("controller_runtime_active_workers")
		idle, sinceFault := w.faults.quietFor()
		started := reconciles() >= w.awaitReconciles
		quiet := started && depth <= 0 && active <= 0 && idle >= quietAPI && sinceFault >= quietAfterFault && w.faults.watchesBack()
		switch {
		case quiet && quietSince.IsZero():
			quietSince = now
		case !quiet:
			quietSince = time.Time{}
		}
		if quiet && now.Sub(quietSince) >= quietWindow && leader.elected() {
			return true, ""
		}
		if depth > 0 && active <= 0 && idle >= staleQueue {
			if staleSince.IsZero() {
				staleSince = now
			} else if now.Sub(staleSince) >= staleQueue {
				w.depthBaseline += depth
				w.logf("    a stopped manager left %v item(s) in its workqueues", depth)
				staleSince = time.Time{}
			}
		} else {
			staleSince = time.Time{}
		}
		if !leader.elected() {
			return w.settleAgain(ctx, deadline)
		}
		if now.After(deadline) {
			return false, fmt.Sprintf("not idle after %s: workqueue depth %v, active reconciles %v, API idle for %s, last fault %s ago",
				settleTimeout, depth, active, idle.Round(time.Millisecond), sinceFault.Round(time.Millisecond))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// settleAgain settles once more when the leader changed while settling.
func (w *world) settleAgain(ctx context.Context, deadline time.Time) (bool, string) {
	if time.Now().After(deadline) {
		return false, "the leader changed while settling"
	}
	return w.settle(ctx)
}

// leaderChanged makes settling wait until a new leader's controllers reconciled every
// NodeHealthCheck (the nhc and remediation controllers, once each).
func (w *world) leaderChanged() {
	w.awaitReconciles = reconciles() + float64(2*len(w.cur.NHCs))
	w.cur.LeaderSince = w.cur.Now
	w.cur.ConvBlind = w.cur.ConvDown
}

// cached reports whether the manager's cache holds the written object at least at the written
// version, or no longer holds a deleted one.
func cached(ctx context.Context, m *instance, wr written) (bool, error) {
	var obj client.Object
	switch o := wr.obj.(type) {
	case *corev1.Node:
		obj = &corev1.Node{}
	case *remediationv1alpha1.NodeHealthCheck:
		obj = &remediationv1alpha1.NodeHealthCheck{}
	case *unstructured.Unstructured:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.GroupVersionKind())
		obj = u
	default:
		return false, fmt.Errorf("cannot check the cache for %T", wr.obj)
	}
	err := m.mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(wr.obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		return wr.deleted, nil
	case err != nil:
		return false, err
	}
	return !wr.deleted && resourceVersion(obj) >= wr.rv, nil
}

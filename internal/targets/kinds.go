package targets

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A remediation kind whose CRs cannot be listed (its conversion webhook is down, its CRD is being
// deleted, its API server aggregation fails) must hurt only the NodeHealthChecks that use it. A
// cache read of a kind whose informer never syncs blocks until the reconcile's deadline, and every
// decision lists the CRs of every kind any NodeHealthCheck uses: one broken remediator stopped every
// NodeHealthCheck. So each kind is read from the cache only once its informer has synced: the first
// time for at most KindSyncWait, later not at all until it syncs. Until then the kind is
// unavailable: the NodeHealthChecks whose templates use it are Disabled (RemediationKindUnavailable,
// naming the kind and the API's error: the reflector's last one within KindFailureWindow, or the
// answer to a list of one CR), every other one decides without it, holding only control-plane
// starts back (another NodeHealthCheck's control-plane remediation of that kind could not be seen).
// A kind that synced once stays readable: its cache holds the CRs as they were while its watch
// fails, as for any stale cache.

// KindSyncWait bounds how long a decision waits, once per kind, for a remediation kind's informer to
// sync: a healthy kind's first list takes milliseconds to a second or two at scale.
const KindSyncWait = 10 * time.Second

// These bounds are on real time (Gatherer.Wall, not the decisions' clock): they measure how long an
// informer takes to sync and how recent an API error is, which a fake clock in tests does not move.
// WatchErrors, the cache's watch error handler installed process-wide, has its own real clock.

// KindFailureWindow is how long after a failed list or watch a remediation kind counts as failing:
// a broken kind's reflector retries with a backoff of at most 30 seconds, so a failure that lasts
// is seen again within it.
const KindFailureWindow = time.Minute

// WatchErrors records the last list or watch error of each informer of the caches it is installed
// in (cache.Options.DefaultWatchErrorHandler, see watch.ConfigureManager), by the kind it informs
// on. It is process-wide: the errors are facts about the API server, whichever cache saw them.
var WatchErrors = &watchErrors{last: map[string]watchError{}, wall: clock.RealClock{}}

type watchErrors struct {
	mu   sync.Mutex
	last map[string]watchError
	// wall tells when an error happened and how long ago: real time.
	wall clock.PassiveClock
}

type watchError struct {
	err string
	at  time.Time
}

// Handler records each error and then does what client-go does by default.
func (w *watchErrors) Handler(ctx context.Context, r *toolscache.Reflector, err error) {
	w.mu.Lock()
	w.last[r.TypeDescription()] = watchError{err: err.Error(), at: w.wall.Now()}
	w.mu.Unlock()
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}

// recent returns the kind's last list or watch error if it happened within KindFailureWindow.
func (w *watchErrors) recent(gvk schema.GroupVersionKind) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.last[gvk.String()]
	if !ok || w.wall.Since(e.at) > KindFailureWindow {
		return "", false
	}
	return e.err, true
}

// probeKind lists one CR of the kind around the cache, at most once per KindFailureWindow per kind,
// and returns the API server's error, if any.
func (g *Gatherer) probeKind(ctx context.Context, gvk schema.GroupVersionKind) (string, bool) {
	if g.APIReader == nil {
		return "", false
	}
	g.mu.Lock()
	if g.probed == nil {
		g.probed = map[schema.GroupVersionKind]probe{}
	}
	p, ok := g.probed[gvk]
	g.mu.Unlock()
	if !ok || g.wall().Since(p.at) > KindFailureWindow {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		p = probe{at: g.wall().Now()}
		if err := g.APIReader.List(ctx, list, client.Limit(1)); err != nil {
			p.err = err.Error()
		}
		g.mu.Lock()
		g.probed[gvk] = p
		g.mu.Unlock()
	}
	return p.err, p.err != ""
}

// probe is the API server's answer to a list of a kind whose informer has not synced.
type probe struct {
	err string
	at  time.Time
}

// kindState says whether a remediation kind's CRs can be read now: ok, or why not.
type kindState struct {
	ok  bool
	why string
}

// kindReadable tells whether the kind's CRs can be listed from the cache now, waiting at most
// KindSyncWait the first time for its informer to sync. inUse: a NodeHealthCheck uses the kind now,
// so the API server is asked why it does not sync (a kind only read before, whose CRD may be gone,
// is not).
func (g *Gatherer) kindReadable(ctx context.Context, gvk schema.GroupVersionKind, inUse bool) kindState {
	if g.Informers == nil {
		return kindState{ok: true}
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind))
	informer, err := g.Informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return kindState{why: fmt.Sprintf("its informer cannot start: %v", err)}
	}
	synced := informer.HasSynced()
	if !synced {
		// Every decision that meets the kind before its first sync waits until KindSyncWait after
		// the first one did, and none after that.
		g.mu.Lock()
		if g.syncBy == nil {
			g.syncBy = map[schema.GroupVersionKind]time.Time{}
		}
		by, seen := g.syncBy[gvk]
		if !seen {
			by = g.wall().Now().Add(KindSyncWait)
			g.syncBy[gvk] = by
		}
		g.mu.Unlock()
		if wait := by.Sub(g.wall().Now()); wait > 0 {
			wctx, cancel := context.WithTimeout(ctx, wait)
			synced = toolscache.WaitForCacheSync(wctx.Done(), informer.HasSynced)
			cancel()
		}
	}
	if synced {
		// A kind that synced once is read from the cache even while its watch fails: the
		// reflector lists again, and every decision is level-based (an API server restart makes
		// every watch fail for a moment; that must not disable anything).
		return kindState{ok: true}
	}
	lastErr, failing := WatchErrors.recent(gvk)
	if !failing && inUse {
		// An informer that lists through a watch (client-go's watch-list) may wait instead of
		// failing: ask the API server once in a while what it answers.
		lastErr, failing = g.probeKind(ctx, gvk)
	}
	if failing {
		return kindState{why: fmt.Sprintf("listing it fails: %s", lastErr)}
	}
	return kindState{why: fmt.Sprintf("its CRs were not listed within %s", KindSyncWait)}
}

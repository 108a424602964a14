package targets

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// unavailable: the NodeHealthChecks whose templates use it, or whose status lists CRs of it, are
// Disabled (RemediationKindUnavailable, naming the kind and the API's error: the reflector's last
// one within KindFailureWindow, or the answer to a list of one CR), every other one decides without
// it, holding only control-plane starts back (another NodeHealthCheck's control-plane remediation
// of that kind could not be seen). Unknown is not free: what such a kind may hide counts as running
// (crs.go, unknownState): no lease of it is released or swept, no other NodeHealthCheck starts on a
// node a status lists with it, and its status entries stay. A kind that synced once stays readable:
// its cache holds the CRs as they were while its watch fails, as for any stale cache. Templates and
// Machines are read through the same rule (KindSync).

// KindSyncWait bounds how long a decision waits, once per kind, for a remediation kind's informer to
// sync: a healthy kind's first list takes milliseconds to a second or two at scale.
const KindSyncWait = 10 * time.Second

// These bounds are on real time (Gatherer.Wall, not the decisions' clock): they measure how long an
// informer takes to sync and how recent an API error is, which a fake clock in tests does not move.
// WatchErrors, the cache's watch error handler, has its own real clock.

// KindFailureWindow is how long after a failed list or watch a remediation kind counts as failing:
// a broken kind's reflector retries with a backoff of at most 30 seconds, so a failure that lasts
// is seen again within it.
const KindFailureWindow = time.Minute

// WatchErrors records the last list or watch error of each informer of the caches it is installed
// in (its Handler as cache.Options.DefaultWatchErrorHandler, see watch.ConfigureManager), by the kind
// it informs on: the errors are facts about the API server, whichever cache saw them. Injected
// where kinds are judged readable (KindSync.Errors, Gatherer.WatchErrors). Safe for concurrent use.
type WatchErrors struct {
	mu   sync.Mutex
	last map[string]watchError
	// wall tells when an error happened and how long ago: real time.
	wall clock.PassiveClock
}

// NewWatchErrors returns an empty record, on the real clock.
func NewWatchErrors() *WatchErrors {
	return &WatchErrors{last: map[string]watchError{}, wall: clock.RealClock{}}
}

type watchError struct {
	err string
	at  time.Time
}

// Handler records each error and then does what client-go does by default.
func (w *WatchErrors) Handler(ctx context.Context, r *toolscache.Reflector, err error) {
	w.mu.Lock()
	w.last[r.TypeDescription()] = watchError{err: err.Error(), at: w.wall.Now()}
	w.mu.Unlock()
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}

// recent returns the kind's last list or watch error if it happened within KindFailureWindow.
func (w *WatchErrors) recent(gvk schema.GroupVersionKind) (string, bool) {
	if w == nil {
		return "", false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.last[gvk.String()]
	if !ok || w.wall.Since(e.at) > KindFailureWindow {
		return "", false
	}
	return e.err, true
}

// KindSync is the readable-or-skip rule for the kinds one cache holds as unstructured objects or
// metadata (remediation CRs, templates, Machines): a kind is read from the cache only once its
// informer has synced, waiting at most KindSyncWait after the first read that met it unsynced, and
// not at all after that until it syncs. A cache read of a kind whose informer never syncs (its
// conversion webhook down, its CRD half-deleted) blocks until the reconcile's deadline: no read waits
// for ever on a kind the operator cannot read, it is "unknown" instead. Safe for concurrent use.
type KindSync struct {
	// Informers are the cache's informers; nil: every kind is readable (a reader that is not a cache,
	// whose reads do not wait for a sync).
	Informers cache.Informers
	// APIReader reads around the cache: a list of one object of a kind whose informer does not sync,
	// to report the API server's error. nil: not asked.
	APIReader client.Reader
	// Wall is the real clock the waits and the probes are measured on; nil: clock.RealClock.
	Wall clock.PassiveClock
	// Errors are the cache's list and watch errors, which tell a kind that fails from one that is
	// slow; nil: none recorded (only the probe tells).
	Errors *WatchErrors

	mu sync.Mutex
	// syncBy is, per kind, until when reads wait for its informer's first sync; probed the API
	// server's answers to lists of kinds that did not sync (probe).
	syncBy map[syncKey]time.Time
	probed map[schema.GroupVersionKind]probe
}

// syncKey is one informer: of a kind's unstructured objects, or of its metadata.
type syncKey struct {
	gvk  schema.GroupVersionKind
	meta bool
}

// NotReadableError says that a kind cannot be read from the cache now (KindSync): its informer has
// not synced.
type NotReadableError struct {
	// GVK is the kind.
	GVK schema.GroupVersionKind
	// Why says why, with the API server's error where it is known.
	Why string
}

func (e *NotReadableError) Error() string {
	return fmt.Sprintf("%s.%s cannot be read: %s", e.GVK.Kind, e.GVK.Group, e.Why)
}

// IsNotReadable reports whether err says that a kind cannot be read now (NotReadableError).
func IsNotReadable(err error) bool {
	var nr *NotReadableError
	return errors.As(err, &nr)
}

func (k *KindSync) wall() clock.PassiveClock {
	if k.Wall == nil {
		return clock.RealClock{}
	}
	return k.Wall
}

// Readable tells whether obj's kind (an Unstructured or a PartialObjectMetadata with its kind set:
// the informer the read would use) can be read from the cache now; when it cannot, the error is a
// NotReadableError that says why. ask: the API server is asked why the kind does not sync (a kind
// in use; one only read before, whose CRD may be gone, is not).
func (k *KindSync) Readable(ctx context.Context, obj client.Object, ask bool) error {
	if k == nil || k.Informers == nil {
		return nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	_, isMeta := obj.(*metav1.PartialObjectMetadata)
	key := syncKey{gvk: gvk, meta: isMeta}
	informer, err := k.Informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return &NotReadableError{GVK: gvk, Why: fmt.Sprintf("its informer cannot start: %v", err)}
	}
	synced := informer.HasSynced()
	if !synced {
		// Every read that meets the kind before its first sync waits until KindSyncWait after the
		// first one did, and none after that.
		k.mu.Lock()
		if k.syncBy == nil {
			k.syncBy = map[syncKey]time.Time{}
		}
		by, seen := k.syncBy[key]
		if !seen {
			by = k.wall().Now().Add(KindSyncWait)
			k.syncBy[key] = by
		}
		k.mu.Unlock()
		if wait := by.Sub(k.wall().Now()); wait > 0 {
			wctx, cancel := context.WithTimeout(ctx, wait)
			synced = toolscache.WaitForCacheSync(wctx.Done(), informer.HasSynced)
			cancel()
		}
	}
	if synced {
		// A kind that synced once is read from the cache even while its watch fails: the
		// reflector lists again, and every decision is level-based (an API server restart makes
		// every watch fail for a moment; that must not disable anything).
		return nil
	}
	lastErr, failing := k.Errors.recent(gvk)
	if !failing && ask {
		// An informer that lists through a watch (client-go's watch-list) may wait instead of
		// failing: ask the API server once in a while what it answers.
		lastErr, failing = k.probe(ctx, gvk)
	}
	if failing {
		return &NotReadableError{GVK: gvk, Why: fmt.Sprintf("listing it fails: %s", lastErr)}
	}
	return &NotReadableError{GVK: gvk, Why: fmt.Sprintf("it was not listed within %s", KindSyncWait)}
}

// probe lists one object of the kind around the cache, at most once per KindFailureWindow per kind,
// and returns the API server's error, if any.
func (k *KindSync) probe(ctx context.Context, gvk schema.GroupVersionKind) (string, bool) {
	if k.APIReader == nil {
		return "", false
	}
	k.mu.Lock()
	if k.probed == nil {
		k.probed = map[schema.GroupVersionKind]probe{}
	}
	p, ok := k.probed[gvk]
	k.mu.Unlock()
	if !ok || k.wall().Since(p.at) > KindFailureWindow {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		p = probe{at: k.wall().Now()}
		if err := k.APIReader.List(ctx, list, client.Limit(1)); err != nil {
			p.err = err.Error()
		}
		k.mu.Lock()
		k.probed[gvk] = p
		k.mu.Unlock()
	}
	return p.err, p.err != ""
}

// probe is the API server's answer to a list of a kind whose informer has not synced.
type probe struct {
	err string
	at  time.Time
}

// kindReadable tells whether the kind's CRs can be listed from the cache now (KindSync.Readable,
// through the gatherer's Informers); nil when they can. inUse: a NodeHealthCheck uses the kind now,
// so the API server is asked why it does not sync.
func (g *Gatherer) kindReadable(ctx context.Context, gvk schema.GroupVersionKind, inUse bool) *NotReadableError {
	g.mu.Lock()
	if g.kinds == nil {
		g.kinds = &KindSync{Informers: g.Informers, APIReader: g.APIReader, Wall: g.wall(), Errors: g.WatchErrors}
	}
	kinds := g.kinds
	g.mu.Unlock()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	var nr *NotReadableError
	if err := kinds.Readable(ctx, obj, inUse); errors.As(err, &nr) {
		return nr
	}
	return nil
}

package targets

import (
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/notify"
)

// A remediation CR the API server refuses for good (403: the remediator's role does not grant it;
// 422 or 400: the remediator's schema refuses the spec the template gives) is not retried for ever
// while the node's lease is held: after RefusalAttempts refusals in a row, the start is held back
// for RefusalHold, the lease is released meanwhile, and the decision of both controllers says why
// (skip reason health.SkipCreateRefused, with the API's message). The record lives in memory: a
// restarted operator tries again, as often.

// RefusalAttempts is how many refusals in a row a node's CR create gets before it is held back:
// with the remediation controller's backoff (500ms doubling) they take about 8 seconds, enough to
// ride out an admission webhook that refuses while it starts.
const RefusalAttempts = 5

// RefusalHold is how long a refused start is held back before it is tried again: long enough that
// a maintenance operator can take the released lease, short enough that a fixed role or schema is
// used soon.
const RefusalHold = 10 * time.Minute

// RefusedForGood reports whether the API server refused a create in a way that retrying the same
// request cannot fix.
func RefusedForGood(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err)
}

// Refusal is the record of a node's refused CR creates.
type Refusal struct {
	// Kind is the CR's kind; Message the API server's last answer.
	Kind, Message string
	// Attempts is how many creates were refused in a row.
	Attempts int
	// Until is when a start held back after RefusalAttempts refusals may be tried again (zero:
	// still trying).
	Until time.Time
}

// Refusals records refused CR creates per NodeHealthCheck and node; it is safe for concurrent use.
// The remediation controller writes it, both controllers' decisions read it.
type Refusals struct {
	mu   sync.Mutex
	by   map[refusalKey]Refusal
	subs notify.Subscribers
}

type refusalKey struct {
	nhc  types.UID
	node string
}

// Record notes a refused create of the node's CR and returns the record; once it holds the start
// back (Until set), subscribers are notified.
func (r *Refusals) Record(nhc types.UID, node, kind string, err error, now time.Time) Refusal {
	r.mu.Lock()
	if r.by == nil {
		r.by = map[refusalKey]Refusal{}
	}
	k := refusalKey{nhc, node}
	rec := r.by[k]
	if !rec.Until.IsZero() && !now.Before(rec.Until) {
		rec = Refusal{} // a new round after a hold
	}
	rec.Kind, rec.Message = kind, err.Error()
	rec.Attempts++
	held := rec.Attempts >= RefusalAttempts && rec.Until.IsZero()
	if held {
		rec.Until = now.Add(RefusalHold)
	}
	r.by[k] = rec
	r.mu.Unlock()
	if held {
		r.subs.Notify()
	}
	return rec
}

// Clear forgets the node's refusals (its CR was created, or it needs none any more).
func (r *Refusals) Clear(nhc types.UID, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.by, refusalKey{nhc, node})
}

// Forget drops the records of the NodeHealthCheck's nodes that keep tells it no longer has (neither
// selected nor with a CR of it), so that records of nodes that went do not stay.
func (r *Refusals) Forget(nhc types.UID, keep func(node string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.by {
		if k.nhc == nhc && !keep(k.node) {
			delete(r.by, k)
		}
	}
}

// ForgetNHC drops every record of a NodeHealthCheck that is gone.
func (r *Refusals) ForgetNHC(nhc types.UID) { r.Forget(nhc, func(string) bool { return false }) }

// Len returns how many records it holds.
func (r *Refusals) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.by)
}

// Held returns why the node's start is held back at now, and until when.
func (r *Refusals) Held(nhc types.UID, node string, now time.Time) (string, time.Time, bool) {
	if r == nil {
		return "", time.Time{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.by[refusalKey{nhc, node}]
	if !ok || rec.Until.IsZero() || !now.Before(rec.Until) {
		return "", time.Time{}, false
	}
	return fmt.Sprintf("the API server refused to create the node's %s %d times in a row (%s); "+
		"the node's lease is released and the next attempt is at %s (the remediator's ClusterRole labelled %s=true, or its CRD's schema, must allow it)",
		rec.Kind, rec.Attempts, rec.Message, rec.Until.UTC().Format(time.RFC3339), remediationv1alpha1.AggregateToExtRemediationLabel), rec.Until, true
}

// Changes returns a channel that receives an event whenever a start is newly held back; events
// coalesce. Each call returns a new subscription.
func (r *Refusals) Changes() <-chan event.GenericEvent { return r.subs.Subscribe() }

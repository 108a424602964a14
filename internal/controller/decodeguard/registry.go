package decodeguard

import (
	"cmp"
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// MetricUndecodable is 1 for each NodeHealthCheck the operator cannot decode and so ignores; the
// series is removed when the object is fixed or deleted. Label: nhc (the NodeHealthCheck's name),
// bounded by the number of NodeHealthChecks. Every replica reports what its own cache leaves out.
const MetricUndecodable = "nodehealthcheck_undecodable"

var undecodableGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: MetricUndecodable, Help: "1 for each NodeHealthCheck the operator cannot decode and ignores until it is fixed",
}, []string{"nhc"})

func init() {
	crmetrics.Registry.MustRegister(undecodableGauge)
}

// Entry is a NodeHealthCheck that cannot be decoded.
type Entry struct {
	// Name is the NodeHealthCheck's name.
	Name string
	// UID is the NodeHealthCheck's uid.
	UID types.UID
	// ResourceVersion is the version that failed to decode.
	ResourceVersion string
	// Error is the decode error, which names the offending field.
	Error string
}

func entryFor(u *unstructured.Unstructured, err error) Entry {
	return Entry{Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(), Error: err.Error()}
}

// Registry is the thread-safe set of NodeHealthChecks the cache leaves out because they cannot be
// decoded. The list-watch of one cache writes it; the Reporter and tests read it. It keeps
// MetricUndecodable in step with its entries (one Registry per process: the metric is global).
type Registry struct {
	mu      sync.Mutex
	entries map[string]Entry
	subs    []chan event.GenericEvent
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{entries: map[string]Entry{}}
}

// Get returns the entry of the named NodeHealthCheck, if it cannot be decoded.
func (r *Registry) Get(name string) (Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	return e, ok
}

// List returns the entries sorted by name.
func (r *Registry) List() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Collect(maps.Values(r.entries))
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Changes returns a channel that receives an event after every change of the set. Events coalesce:
// a receiver that falls behind (or has not started, on a replica that is not the leader) gets one
// event for several changes and reads the set anew; a sender never blocks. Each call returns a new
// subscription.
func (r *Registry) Changes() <-chan event.GenericEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan event.GenericEvent, 1)
	r.subs = append(r.subs, ch)
	return ch
}

// report records that a NodeHealthCheck cannot be decoded; it returns whether this is news (a new
// entry, or another uid or error; a new resourceVersion alone is not).
func (r *Registry) report(e Entry) bool {
	return r.update(func() bool {
		old, ok := r.entries[e.Name]
		r.entries[e.Name] = e
		undecodableGauge.WithLabelValues(e.Name).Set(1)
		return !ok || old.UID != e.UID || old.Error != e.Error
	})
}

// forget records that the named NodeHealthCheck decodes again or was deleted; it returns whether it
// was in the set.
func (r *Registry) forget(name string) bool {
	return r.update(func() bool {
		if _, ok := r.entries[name]; !ok {
			return false
		}
		delete(r.entries, name)
		undecodableGauge.DeleteLabelValues(name)
		return true
	})
}

// replace makes the set what a complete list found, and returns the entries that are news.
func (r *Registry) replace(entries map[string]Entry) []Entry {
	var news []Entry
	r.update(func() bool {
		changed := false
		for name := range r.entries {
			if _, ok := entries[name]; !ok {
				delete(r.entries, name)
				undecodableGauge.DeleteLabelValues(name)
				changed = true
			}
		}
		for name, e := range entries {
			old, ok := r.entries[name]
			if !ok || old.UID != e.UID || old.Error != e.Error {
				news = append(news, e)
				changed = true
			}
			r.entries[name] = e
			undecodableGauge.WithLabelValues(name).Set(1)
		}
		return changed
	})
	return news
}

// update runs f under the lock and, when it reports a change, notifies every subscriber without
// blocking.
func (r *Registry) update(f func() bool) bool {
	r.mu.Lock()
	changed := f()
	subs := r.subs
	r.mu.Unlock()
	if !changed {
		return false
	}
	for _, ch := range subs {
		select {
		case ch <- event.GenericEvent{Object: &remediationv1alpha1.NodeHealthCheck{}}:
		default: // one is pending already
		}
	}
	return true
}

package targets

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// createdTTL is how long a CR this process created counts as existing while the cache does not show
// it yet. The cache sees its own writes within milliseconds; a minute covers an overloaded API
// server. Counting a CR that was deleted meanwhile only holds remediations back, never starts one.
const createdTTL = time.Minute

type created struct {
	cr unstructured.Unstructured
	at time.Time
}

// Created records a CR this process just created and the cache does not show yet, so that snapshots
// count it until the cache does. Without this a decision right after a create (another
// NodeHealthCheck's, a requeue) would not see it: a second control-plane node, or a second
// NodeHealthCheck on the node, could start. (The ReplicaSet controller's "expectations" solve the
// same lag.) A recorded CR deleted by someone else before the cache showed it counts until the
// record expires: that holds remediations back, never starts one.
func (g *Gatherer) Created(cr *unstructured.Unstructured) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.created = append(g.created, created{cr: *cr.DeepCopy(), at: g.wall().Now()})
}

// Forget drops the record of a CR this process deleted.
func (g *Gatherer) Forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.created = slices.DeleteFunc(g.created, func(c created) bool { return c.cr.GetUID() == uid })
}

// ForgetNHC drops the records of the CRs of a NodeHealthCheck that is gone (the garbage collector
// deletes them with it). Records expire after createdTTL anyway; this only frees them sooner.
func (g *Gatherer) ForgetNHC(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.created = slices.DeleteFunc(g.created, func(c created) bool {
		return slices.ContainsFunc(c.cr.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.UID == uid })
	})
}

// Recorded returns how many CRs it counts from records (Created) that the cache did not show yet.
func (g *Gatherer) Recorded() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.created)
}

// withCreated adds to the CRs of a kind read from the cache those this process created that the
// cache does not show yet and that the read would include (wants; nil: every one), and forgets the
// ones it shows (or that are too old). Only those are copied: in a mass failure hundreds of records
// are in flight, and a decision copying each of them (under the gatherer's lock) held them all.
func (g *Gatherer) withCreated(gvk schema.GroupVersionKind, read []unstructured.Unstructured, shown, wants func(*unstructured.Unstructured) bool) []unstructured.Unstructured {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.created = slices.DeleteFunc(g.created, func(c created) bool {
		return g.wall().Since(c.at) > createdTTL || c.cr.GroupVersionKind() == gvk && shown(&c.cr)
	})
	for i := range g.created {
		if c := &g.created[i]; c.cr.GroupVersionKind() == gvk && (wants == nil || wants(&c.cr)) {
			read = append(read, *c.cr.DeepCopy())
		}
	}
	return read
}

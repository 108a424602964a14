// Package templateaccess reads remediation templates with the rights remediators grant. The
// documented contract (rbac.ext-remediation aggregation) grants only get on templates; many
// remediators grant list and watch too. Templates of a kind the operator may list and watch are read
// from the shared cache and watched; the others are read with a direct GET, reused for DirectReuse
// (a burst of failures reads each template once), and callers look again after a while instead of
// being notified.
package templateaccess

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create

// Reader reads templates through the cache when their kind may be listed and watched cluster-wide,
// and directly otherwise. Safe for concurrent use.
type Reader struct {
	// Cached reads through the shared cache (starting an informer for the kind).
	Cached client.Reader
	// Direct reads from the API server.
	Direct client.Reader
	// Reviewer creates SelfSubjectAccessReviews.
	Reviewer client.Client
	// Mapper maps kinds to resources.
	Mapper meta.RESTMapper
	// Synced, when set, is the readable-or-skip rule of Cached's cache (targets.KindSync): a template
	// of a watchable kind is read from the cache only once the kind's informer has synced; until
	// then Get returns Synced's error (a targets.NotReadableError) instead of waiting for the cache,
	// which would wait for ever on a kind whose conversion webhook is down. nil: cached reads wait.
	Synced SyncChecker

	// Now tells the time for DirectReuse and for how long a kind's watchability is trusted (real
	// time: the API server's changes come in real seconds); nil: time.Now.
	Now func() time.Time

	mu       sync.Mutex
	watching map[schema.GroupKind]decision
	// direct holds the templates read directly, for DirectReuse; reads of one template at the same
	// time (concurrent reconciles) make one GET.
	direct   map[directKey]directRead
	inflight singleflight.Group
}

// DirectReuse is how long a template read directly (its kind may not be watched) is reused,
// NotFound included: a burst of failures, each reconcile of every NodeHealthCheck reading the
// template, costs one GET per template and period instead of one per read. A template created,
// changed or deleted is seen this much later at most.
const DirectReuse = 5 * time.Second

type directKey struct {
	gvk  schema.GroupVersionKind
	key  client.ObjectKey
	meta bool // read as PartialObjectMetadata
}

type directRead struct {
	obj client.Object
	err error
	at  time.Time
}

type decision struct {
	watchable bool
	at        time.Time
}

// recheckAfter is how long a "may not list and watch" answer holds: a remediator's role may be
// aggregated after the operator first asked.
const recheckAfter = 10 * time.Minute

// Watchable reports whether the operator may list and watch the kind cluster-wide, which caching
// and watching need. The answer is asked once per kind; a kind that is not served yet is not
// watchable (and asked again later).
func (r *Reader) Watchable(ctx context.Context, gvk schema.GroupVersionKind) (bool, error) {
	_, watchable, err := r.Check(ctx, gvk)
	return watchable, err
}

// Check reports whether the API server serves the kind and whether the operator may list and watch
// it cluster-wide. The access answer is asked once per kind (a "no" again after recheckAfter).
func (r *Reader) Check(ctx context.Context, gvk schema.GroupVersionKind) (served, watchable bool, err error) {
	gk := gvk.GroupKind()
	mapping, err := r.Mapper.RESTMapping(gk, gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("mapping %s: %w", gk, err)
	}
	r.mu.Lock()
	d, known := r.watching[gk]
	r.mu.Unlock()
	if known && (d.watchable || r.now().Sub(d.at) < recheckAfter) {
		return true, d.watchable, nil
	}
	w := true
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: gk.Group, Resource: mapping.Resource.Resource, Verb: verb},
		}}
		if err := r.Reviewer.Create(ctx, review); err != nil {
			return true, false, fmt.Errorf("reviewing access to %s: %w", mapping.Resource.GroupResource(), err)
		}
		w = w && review.Status.Allowed
	}
	if !w {
		ctrl.LoggerFrom(ctx).Info("This kind may not be listed and watched: templates of it are read directly, remediation CRs of it not at all", "kind", gk)
	}
	r.mu.Lock()
	if r.watching == nil {
		r.watching = map[schema.GroupKind]decision{}
	}
	r.watching[gk] = decision{watchable: w, at: r.now()}
	r.mu.Unlock()
	return true, w, nil
}

// SyncChecker tells whether a kind can be read from a cache now (targets.KindSync): nil when it can,
// otherwise why not.
type SyncChecker interface {
	Readable(ctx context.Context, obj client.Object, ask bool) error
}

// Get reads the template into obj (Unstructured or PartialObjectMetadata, with its kind set). A
// template of a kind whose cache cannot be read now is not read: the error says why (Synced).
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	watchable, err := r.Watchable(ctx, obj.GetObjectKind().GroupVersionKind())
	if err != nil {
		return err
	}
	if watchable {
		if r.Synced != nil {
			if err := r.Synced.Readable(ctx, obj, true); err != nil {
				return err
			}
		}
		err := r.Cached.Get(ctx, key, obj)
		if !apierrors.IsNotFound(err) {
			return err
		}
		// A template created a moment ago may not be in the cache yet: the API server confirms a
		// NotFound (reused for DirectReuse), so a NodeHealthCheck applied together with its template
		// is not reported disabled at its first look.
	}
	return r.getDirect(ctx, key, obj)
}

// getDirect reads a template from the API server, or the copy read less than DirectReuse ago.
func (r *Reader) getDirect(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	_, isMeta := obj.(*metav1.PartialObjectMetadata)
	_, isUnstructured := obj.(*unstructured.Unstructured)
	if !isMeta && !isUnstructured {
		return r.Direct.Get(ctx, key, obj)
	}
	now := r.now()
	k := directKey{gvk: obj.GetObjectKind().GroupVersionKind(), key: key, meta: isMeta}
	r.mu.Lock()
	read, ok := r.direct[k]
	r.mu.Unlock()
	if !ok || now.Sub(read.at) >= DirectReuse || now.Before(read.at) {
		v, err, _ := r.inflight.Do(fmt.Sprintf("%s %v %v", k.gvk, k.key, k.meta), func() (any, error) {
			fresh := obj.DeepCopyObject().(client.Object)
			err := r.Direct.Get(ctx, key, fresh)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err // not reused: the next read asks again
			}
			read := directRead{err: err, at: now}
			if err == nil {
				read.obj = fresh
			}
			r.mu.Lock()
			if r.direct == nil {
				r.direct = map[directKey]directRead{}
			}
			for dk, dr := range r.direct { // templates are few; drop what expired
				if now.Sub(dr.at) >= DirectReuse {
					delete(r.direct, dk)
				}
			}
			r.direct[k] = read
			r.mu.Unlock()
			return read, nil
		})
		if err != nil {
			return err
		}
		read = v.(directRead)
	}
	if read.err != nil {
		return read.err
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		o.Object = read.obj.(*unstructured.Unstructured).DeepCopy().Object
	case *metav1.PartialObjectMetadata:
		*o = *read.obj.(*metav1.PartialObjectMetadata).DeepCopy()
	}
	return nil
}

// now returns the time by Now.
func (r *Reader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

package templateaccess

import (
	"context"
	"errors"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// reader counts reads.
type reader struct{ gets int }

func (r *reader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	r.gets++
	return nil
}

func (r *reader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

var (
	watchable = schema.GroupVersionKind{Group: "open.example.com", Version: "v1", Kind: "OpenRemediationTemplate"}
	getOnly   = schema.GroupVersionKind{Group: "strict.example.com", Version: "v1", Kind: "StrictRemediationTemplate"}
)

func newReader(t *testing.T, reviews *int) (*Reader, *reader, *reader) {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(watchable, meta.RESTScopeNamespace)
	mapper.Add(getOnly, meta.RESTScopeNamespace)
	reviewer := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			*reviews++
			review := obj.(*authorizationv1.SelfSubjectAccessReview)
			review.Status.Allowed = review.Spec.ResourceAttributes.Group == watchable.Group
			return nil
		},
	}).Build()
	cached, direct := &reader{}, &reader{}
	return &Reader{Cached: cached, Direct: direct, Reviewer: reviewer, Mapper: mapper}, cached, direct
}

func TestReadsWatchableKindsFromTheCacheAndOthersDirectly(t *testing.T) {
	reviews := 0
	r, cached, direct := newReader(t, &reviews)
	ctx := context.Background()
	for range 3 {
		for _, gvk := range []schema.GroupVersionKind{watchable, getOnly} {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			if err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "t"}, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cached.gets != 3 || direct.gets != 1 {
		t.Errorf("cached %d, direct %d reads; want 3 and 1 (direct reads are reused for DirectReuse)", cached.gets, direct.gets)
	}
	if reviews != 4 { // list and watch, once per kind
		t.Errorf("%d access reviews for two kinds, want 4: answers must be remembered", reviews)
	}
}

func TestAKindThatIsNotServedIsNotWatchable(t *testing.T) {
	reviews := 0
	r, _, _ := newReader(t, &reviews)
	w, err := r.Watchable(context.Background(), schema.GroupVersionKind{Group: "later.example.com", Version: "v1", Kind: "LaterTemplate"})
	if err != nil || w || reviews != 0 {
		t.Errorf("watchable %v, err %v, reviews %d", w, err, reviews)
	}
}

// A template read directly is reused for DirectReuse, NotFound included, as an independent copy;
// then it is read again. Other errors are not reused.
func TestDirectReadsAreReusedBriefly(t *testing.T) {
	reviews, now := 0, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	r, _, _ := newReader(t, &reviews)
	r.Now = func() time.Time { return now }
	gets, answer := 0, error(nil)
	r.Direct = readerFunc(func(_ context.Context, _ client.ObjectKey, obj client.Object) error {
		gets++
		if answer != nil {
			return answer
		}
		u := obj.(*unstructured.Unstructured)
		u.Object["spec"] = map[string]any{"read": int64(gets)}
		return nil
	})
	read := func() (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(getOnly)
		return u, r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "t"}, u)
	}
	first, err := read()
	if err != nil {
		t.Fatal(err)
	}
	first.Object["spec"] = "changed by a caller"
	now = now.Add(DirectReuse - time.Millisecond)
	second, err := read()
	if err != nil || gets != 1 || second.Object["spec"].(map[string]any)["read"] != int64(1) {
		t.Fatalf("within DirectReuse: %d GETs, got %v (%v); want the first read, unchanged by its caller", gets, second.Object["spec"], err)
	}
	now = now.Add(time.Millisecond)
	if third, err := read(); err != nil || gets != 2 || third.Object["spec"].(map[string]any)["read"] != int64(2) {
		t.Fatalf("after DirectReuse: %d GETs, got %v (%v); want a new read", gets, third.Object["spec"], err)
	}

	answer = apierrors.NewNotFound(schema.GroupResource{Group: getOnly.Group, Resource: "strictremediationtemplates"}, "t")
	now = now.Add(DirectReuse)
	for range 2 {
		if _, err := read(); !apierrors.IsNotFound(err) {
			t.Fatalf("got %v, want NotFound", err)
		}
	}
	if gets != 3 {
		t.Fatalf("%d GETs; a NotFound is reused too", gets)
	}
	answer = errors.New("connection refused")
	now = now.Add(DirectReuse)
	for range 2 {
		if _, err := read(); err == nil {
			t.Fatal("an error was swallowed")
		}
	}
	if gets != 5 {
		t.Fatalf("%d GETs; other errors are not reused", gets)
	}
}

type readerFunc func(ctx context.Context, key client.ObjectKey, obj client.Object) error

func (f readerFunc) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return f(ctx, key, obj)
}

func (f readerFunc) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// A template the cache does not show (yet) is read from the API server before it counts as
// missing, and that answer is reused like any direct read.
func TestACacheMissIsConfirmed(t *testing.T) {
	reviews := 0
	r, _, _ := newReader(t, &reviews)
	gr := schema.GroupResource{Group: watchable.Group, Resource: "openremediationtemplates"}
	r.Cached = readerFunc(func(context.Context, client.ObjectKey, client.Object) error { return apierrors.NewNotFound(gr, "t") })
	gets, exists := 0, true
	r.Direct = readerFunc(func(_ context.Context, _ client.ObjectKey, obj client.Object) error {
		gets++
		if !exists {
			return apierrors.NewNotFound(gr, "t")
		}
		obj.(*unstructured.Unstructured).Object["spec"] = "from the API server"
		return nil
	})
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(watchable)
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "t"}, u); err != nil || u.Object["spec"] != "from the API server" {
		t.Fatalf("got %v (%v), want the API server's template", u.Object["spec"], err)
	}
	now := time.Now()
	r.Now = func() time.Time { return now.Add(DirectReuse) }
	exists = false
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "t"}, u); !apierrors.IsNotFound(err) {
		t.Fatalf("got %v, want NotFound once the API server says so", err)
	}
	if gets != 2 {
		t.Fatalf("%d GETs, want 2", gets)
	}
}

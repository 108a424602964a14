package templateaccess

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
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
	if cached.gets != 3 || direct.gets != 3 {
		t.Errorf("cached %d, direct %d reads; want 3 and 3", cached.gets, direct.gets)
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

package metricsauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// cluster answers TokenReviews for the tokens it knows and SubjectAccessReviews for the users
// allowed, counting both. This is a pure unit test of the cache and the HTTP answers; the e2e
// suite ("serves metrics only to ...") runs the filter against a real API server.
type cluster struct {
	users   map[string]string // token -> user
	allowed map[string]bool   // user -> may get /metrics
	fail    error

	tokenReviews, accessReviews atomic.Int32
	lastAccess                  *authorizationv1.SubjectAccessReview
}

func (c *cluster) reviewer(clk *clocktesting.FakeClock) *Reviewer {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.tokenReviews.Add(1)
		if c.fail != nil {
			return true, nil, c.fail
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if u, ok := c.users[tr.Spec.Token]; ok {
			tr.Status.Authenticated = true
			tr.Status.User = authenticationv1.UserInfo{Username: u, Groups: []string{"system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"scopes": {"metrics"}}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.accessReviews.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		c.lastAccess = sar
		sar.Status.Allowed = c.allowed[sar.Spec.User]
		return true, sar, nil
	})
	return &Reviewer{Authentication: cs.AuthenticationV1(), Authorization: cs.AuthorizationV1(), Clock: clk}
}

func serve(t *testing.T, r *Reviewer, authorization string) (int, bool) {
	t.Helper()
	served := false
	h, err := r.Filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served = true }))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, served
}

func TestFilterAnswers(t *testing.T) {
	c := &cluster{users: map[string]string{"reader-token": "reader", "other-token": "other"}, allowed: map[string]bool{"reader": true}}
	r := c.reviewer(clocktesting.NewFakeClock(time.Now()))
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"not a bearer token", "Basic cmVhZGVyOnB3", http.StatusUnauthorized},
		{"empty bearer token", "Bearer  ", http.StatusUnauthorized},
		{"unknown token", "Bearer forged", http.StatusUnauthorized},
		{"user without access", "Bearer other-token", http.StatusForbidden},
		{"user with access", "Bearer reader-token", http.StatusOK},
		{"scheme in lower case", "bearer reader-token", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, served := serve(t, r, tc.authorization)
			if code != tc.want || served != (tc.want == http.StatusOK) {
				t.Fatalf("got %d (served %v), want %d", code, served, tc.want)
			}
		})
	}
	sar := c.lastAccess.Spec
	if sar.User != "reader" || sar.NonResourceAttributes == nil || *sar.NonResourceAttributes != (authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}) ||
		len(sar.Groups) != 1 || len(sar.Extra["scopes"]) != 1 {
		t.Fatalf("SubjectAccessReview asked %+v, want user reader, its groups and extra, get /metrics", sar)
	}
}

func TestDecisionsAreCachedForTheirTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := &cluster{users: map[string]string{"reader-token": "reader"}, allowed: map[string]bool{"reader": true}}
	r := c.reviewer(clk)

	for range 3 {
		if code, _ := serve(t, r, "Bearer reader-token"); code != http.StatusOK {
			t.Fatalf("got %d, want 200", code)
		}
	}
	if n := c.tokenReviews.Load(); n != 1 {
		t.Fatalf("%d TokenReviews for three scrapes within %s, want 1", n, AllowTTL)
	}
	clk.Step(AllowTTL)
	// Access revoked: the next review after the TTL sees it.
	c.allowed["reader"] = false
	if code, _ := serve(t, r, "Bearer reader-token"); code != http.StatusForbidden {
		t.Fatalf("got %d after the allow TTL with access revoked, want 403", code)
	}
	if n := c.tokenReviews.Load(); n != 2 {
		t.Fatalf("%d TokenReviews, want 2 (one after the TTL)", n)
	}
	// Access granted again: a refusal is kept only DenyTTL.
	c.allowed["reader"] = true
	clk.Step(DenyTTL - time.Second)
	if code, _ := serve(t, r, "Bearer reader-token"); code != http.StatusForbidden {
		t.Fatalf("got %d within the deny TTL, want the cached 403", code)
	}
	clk.Step(time.Second)
	if code, _ := serve(t, r, "Bearer reader-token"); code != http.StatusOK {
		t.Fatalf("got %d after the deny TTL with access granted, want 200", code)
	}
	if n := c.accessReviews.Load(); n != 3 {
		t.Fatalf("%d SubjectAccessReviews, want 3", n)
	}
}

func TestReviewErrorsAreNotCached(t *testing.T) {
	c := &cluster{users: map[string]string{"reader-token": "reader"}, allowed: map[string]bool{"reader": true}, fail: errors.New("API server unavailable")}
	r := c.reviewer(clocktesting.NewFakeClock(time.Now()))
	if code, served := serve(t, r, "Bearer reader-token"); code != http.StatusInternalServerError || served {
		t.Fatalf("got %d (served %v) while the API server fails, want 500", code, served)
	}
	c.fail = nil
	if code, _ := serve(t, r, "Bearer reader-token"); code != http.StatusOK {
		t.Fatalf("got %d once the API server answers, want 200 (the error must not be cached)", code)
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := &cluster{}
	r := c.reviewer(clocktesting.NewFakeClock(time.Now()))
	for i := range MaxEntries + 10 {
		if code, _ := serve(t, r, fmt.Sprintf("Bearer forged-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("got %d for a forged token, want 401", code)
		}
	}
	if n := len(r.cache); n > MaxEntries {
		t.Fatalf("cache holds %d entries, want at most %d", n, MaxEntries)
	}
}

// Package metricsauth guards the metrics endpoint the way a kube-rbac-proxy would: a request is
// served when its bearer token passes a TokenReview and its user may perform the request's verb on
// its path according to a SubjectAccessReview (for example `get` on the non-resource URL /metrics).
//
// It does what controller-runtime's filters.WithAuthenticationAndAuthorization does with two typed
// client-go calls and a small cache instead of k8s.io/apiserver's delegating authenticator and
// authorizer, which bring most of k8s.io/apiserver into the binary: about a fifth of the manager's
// resident memory at 5,000 nodes was the binary's own pages (docs/performance.md).
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	// AllowTTL is how long an admitted token may scrape again without a review: controller-runtime's
	// filter caches authentication for a minute (and authorization for five).
	AllowTTL = time.Minute
	// DenyTTL is how long a refused token stays refused without a review: a scraper given access
	// by a new RoleBinding is admitted within it.
	DenyTTL = 10 * time.Second
	// ReviewTimeout bounds the two reviews of one request.
	ReviewTimeout = 10 * time.Second
	// MaxEntries bounds the cache: past it, the cache is emptied (a scraper's next request is
	// reviewed again), so a flood of invalid tokens costs reviews, never memory.
	MaxEntries = 1024
)

// Reviewer authenticates a bearer token and authorizes the user it belongs to; both calls go to
// the API server.
type Reviewer struct {
	Authentication authenticationclient.TokenReviewsGetter
	Authorization  authorizationclient.SubjectAccessReviewsGetter
	// Clock is the cache's clock; nil means the real one.
	Clock clock.PassiveClock

	mu    sync.Mutex
	cache map[[sha256.Size]byte]entry
}

type entry struct {
	status  int    // http.StatusOK, StatusUnauthorized or StatusForbidden
	message string // what a refused request is told
	expires time.Time
}

// NewReviewer builds a Reviewer from the manager's REST configuration and HTTP client.
func NewReviewer(cfg *rest.Config, httpClient *http.Client) (*Reviewer, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the SubjectAccessReview client: %w", err)
	}
	return &Reviewer{Authentication: authn, Authorization: authz}, nil
}

// Filter is a metricsserver.FilterProvider: pass it as metricsserver.Options.FilterProvider.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	r, err := NewReviewer(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return r.Filter, nil
}

// Filter wraps handler: requests without a valid token get 401, tokens whose user may not access
// the path get 403, review errors 500 (and are not cached).
func (r *Reviewer) Filter(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		status, message, err := r.Review(req.Context(), token, verb, req.URL.Path)
		if err != nil {
			log.Error(err, "Reviewing a metrics request failed", "path", req.URL.Path)
			http.Error(w, "Authentication or authorization failed", http.StatusInternalServerError)
			return
		}
		if status != http.StatusOK {
			log.V(4).Info("Metrics request refused", "path", req.URL.Path, "status", status, "reason", message)
			http.Error(w, message, status)
			return
		}
		handler.ServeHTTP(w, req)
	}), nil
}

func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Review decides whether token may perform verb on path: http.StatusOK, StatusUnauthorized (the
// token is not valid) or StatusForbidden (its user may not), with the message for a refusal.
// Decisions are cached by a hash of token, verb and path, never the token itself.
func (r *Reviewer) Review(ctx context.Context, token, verb, path string) (int, string, error) {
	key := sha256.Sum256([]byte(verb + "\x00" + path + "\x00" + token))
	now := r.now()
	r.mu.Lock()
	e, found := r.cache[key]
	r.mu.Unlock()
	if found && now.Before(e.expires) {
		return e.status, e.message, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ReviewTimeout)
	defer cancel()
	e, err := r.review(ctx, token, verb, path)
	if err != nil {
		return 0, "", err
	}
	ttl := DenyTTL
	if e.status == http.StatusOK {
		ttl = AllowTTL
	}
	e.expires = now.Add(ttl)
	r.mu.Lock()
	if r.cache == nil || len(r.cache) >= MaxEntries {
		r.cache = make(map[[sha256.Size]byte]entry)
	}
	r.cache[key] = e
	r.mu.Unlock()
	return e.status, e.message, nil
}

func (r *Reviewer) review(ctx context.Context, token, verb, path string) (entry, error) {
	tr, err := r.Authentication.TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return entry{}, fmt.Errorf("creating a TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return entry{status: http.StatusUnauthorized, message: "Unauthorized"}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := r.Authorization.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  u.Username,
			UID:                   u.UID,
			Groups:                u.Groups,
			Extra:                 extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return entry{}, fmt.Errorf("creating a SubjectAccessReview for user %s: %w", u.Username, err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return entry{status: http.StatusForbidden, message: fmt.Sprintf("Authorization denied for user %s", u.Username)}, nil
	}
	return entry{status: http.StatusOK}, nil
}

func (r *Reviewer) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

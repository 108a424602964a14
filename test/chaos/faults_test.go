package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// leaderElectionID names the managers' leader-election Lease; its requests are neither failed nor
// counted as work.
const leaderElectionID = "chaos-leader"

// faults sits in every manager's transport (rest.Config.Wrap): it fails a fraction of the managers'
// requests while turned on, fails every write concerning the poisoned node, and tracks the
// managers' API activity for settling.
type faults struct {
	mu       sync.Mutex
	rng      *rand.Rand
	rate     float64
	poisoned string
	// lastInjected is when a request was last failed; a failed reconcile is retried after a
	// backoff, without any API activity meanwhile.
	lastInjected time.Time
	injected     map[string]int

	inflight     atomic.Int64
	lastActivity atomic.Int64 // unix nanoseconds
}

func newFaults(seed uint64) *faults {
	return &faults{rng: rand.New(rand.NewPCG(seed, 0x5eed)), injected: map[string]int{}}
}

// set turns random failures on (rate > 0) or off, and sets the poisoned node ("" for none).
func (f *faults) set(rate float64, poisoned string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rate, f.poisoned = rate, poisoned
}

// takeCounts returns and resets how many requests were failed, by kind.
func (f *faults) takeCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.injected
	f.injected = map[string]int{}
	return out
}

// quietFor returns how long the managers have made no request (0 while one is in flight) and how
// long ago a request was last failed.
func (f *faults) quietFor() (idle, sinceInjected time.Duration) {
	if f.inflight.Load() > 0 {
		return 0, 0
	}
	idle = time.Since(time.Unix(0, f.lastActivity.Load()))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lastInjected.IsZero() {
		return idle, time.Hour
	}
	return idle, time.Since(f.lastInjected)
}

func (f *faults) wrap(next http.RoundTripper) http.RoundTripper {
	return &faultyTransport{f: f, next: next}
}

type faultyTransport struct {
	f    *faults
	next http.RoundTripper
}

// How a request is failed.
const (
	failBefore   = "500"           // 500 Internal Server Error, the request not sent
	failConflict = "409"           // 409 Conflict on an update or patch, not sent
	failLost     = "lost-response" // sent and applied, but the client gets a 500
	failPoisoned = "poisoned"      // a write concerning the poisoned node
	failRead     = "read-500"      // a direct read (not an informer's list or watch) fails
)

func (t *faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" || strings.HasSuffix(req.URL.Path, "/leases/"+leaderElectionID) {
		return t.next.RoundTrip(req)
	}
	t.f.inflight.Add(1)
	t.f.lastActivity.Store(time.Now().UnixNano())
	defer func() {
		t.f.lastActivity.Store(time.Now().UnixNano())
		t.f.inflight.Add(-1)
	}()

	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	var body []byte
	if write && req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	how := t.decide(req, write, body)
	switch how {
	case "":
		return t.next.RoundTrip(req)
	case failLost:
		resp, err := t.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return statusResponse(req, http.StatusInternalServerError, metav1.StatusReasonInternalError, "chaos: the response was lost"), nil
	case failConflict:
		return statusResponse(req, http.StatusConflict, metav1.StatusReasonConflict, "chaos: injected conflict, the object has been modified"), nil
	default:
		return statusResponse(req, http.StatusInternalServerError, metav1.StatusReasonInternalError, "chaos: injected "+how), nil
	}
}

// decide returns how to fail the request, or "".
func (t *faultyTransport) decide(req *http.Request, write bool, body []byte) string {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	how := ""
	switch {
	case write && f.poisoned != "" && concerns(req.URL.Path, body, f.poisoned):
		how = failPoisoned
	case f.rate <= 0:
	case write:
		if f.rng.Float64() < f.rate {
			how = []string{failBefore, failConflict, failLost}[f.rng.IntN(3)]
			if how == failConflict && req.Method != http.MethodPut && req.Method != http.MethodPatch {
				how = failBefore // a create or delete cannot conflict
			}
		}
	case isDirectRead(req):
		if f.rng.Float64() < f.rate/2 {
			how = failRead
		}
	}
	if how != "" {
		f.lastInjected = time.Now()
		f.injected[how]++
	}
	return how
}

// concerns reports whether a write is about the node: its Node, its lease, or one of its
// remediation CRs (named after it, generated from its name, or annotated with it).
func concerns(path string, body []byte, node string) bool {
	name := path[strings.LastIndex(path, "/")+1:]
	if name == node || name == "node-"+node || strings.HasPrefix(name, node+"-") {
		return true
	}
	return bytes.Contains(body, fmt.Appendf(nil, `"%s":"%s"`, remediationv1alpha1.NodeNameAnnotation, node))
}

// isDirectRead reports whether a GET reads API objects directly (the controllers' API reader, a
// lease read), as opposed to discovery or an informer's list (which asks for a resourceVersion).
func isDirectRead(req *http.Request) bool {
	if req.URL.Query().Has("resourceVersion") {
		return false
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		return true // /api/v1/<resource>...
	case len(parts) >= 4 && parts[0] == "apis":
		return true // /apis/<group>/<version>/<resource>...
	}
	return false
}

func statusResponse(req *http.Request, code int, reason metav1.StatusReason, message string) *http.Response {
	body, _ := json.Marshal(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: reason, Code: int32(code),
	})
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

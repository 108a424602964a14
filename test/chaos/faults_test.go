package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
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

	// The managers' watch streams: open ones (watches), the keys of those cut whose next resumed
	// watch is answered 410 Gone so that the informer lists again (expire), and, while the driver
	// holds them (held is open), new watches wait.
	watchMu sync.Mutex
	watches map[*watchBody]bool
	expire  map[string]int
	held    chan struct{}
	// relists counts the informers' lists (watches that send the initial events, or plain lists).
	relists atomic.Int64
	// cut are the streams dropWatches cut, until each is open again (watchesBack).
	cut []*watchBody
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

// wrap returns the transport of one manager's process: faults, its watches, its death.
func (f *faults) wrap(p *process, next http.RoundTripper) http.RoundTripper {
	return &faultyTransport{f: f, p: p, next: next}
}

type faultyTransport struct {
	f    *faults
	p    *process
	next http.RoundTripper
}

// WrappedRoundTripper lets client-go reach the transport underneath.
func (t *faultyTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// watchBody is the body of a watch response: the driver can cut it, as a dropped connection would.
type watchBody struct {
	io.ReadCloser
	f   *faults
	p   *process
	key string
}

func (b *watchBody) Close() error {
	b.f.watchMu.Lock()
	delete(b.f.watches, b)
	b.f.watchMu.Unlock()
	return b.ReadCloser.Close()
}

// watchKey identifies an informer's watch: its resource and selectors.
func watchKey(req *http.Request) string {
	q := req.URL.Query()
	return req.URL.Path + "?" + q.Get("labelSelector") + "&" + q.Get("fieldSelector")
}

// watch serves a watch request of the process: it waits while watches are held, answers a watch
// that resumes a cut one with 410 Gone (the informer lists again, as after an API server's watch
// cache lost its place), and keeps the stream so that it can be cut.
func (f *faults) watch(p *process, req *http.Request, next http.RoundTripper) (*http.Response, error) {
	f.watchMu.Lock()
	held := f.held
	f.watchMu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if p.dead.Load() {
		return nil, errKilled
	}
	key := watchKey(req)
	q := req.URL.Query()
	if q.Get("sendInitialEvents") == "true" {
		f.relists.Add(1)
	}
	f.watchMu.Lock()
	expired := q.Get("resourceVersion") != "" && q.Get("sendInitialEvents") != "true" && f.expire[key] > 0
	if expired {
		f.expire[key]--
	}
	f.watchMu.Unlock()
	if expired {
		return statusResponse(req, http.StatusGone, metav1.StatusReasonExpired, "chaos: too old resource version: the watch was dropped"), nil
	}
	resp, err := next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	b := &watchBody{ReadCloser: resp.Body, f: f, p: p, key: key}
	f.watchMu.Lock()
	if f.watches == nil {
		f.watches = map[*watchBody]bool{}
	}
	f.watches[b] = true
	f.watchMu.Unlock()
	if p.dead.Load() {
		_ = b.Close()
		return nil, errKilled
	}
	resp.Body = b
	return resp, nil
}

// dropWatches cuts every open watch stream of the managers; each informer's next watch is answered
// 410 Gone, so it lists again. With hold, new watches wait until releaseWatches: the managers see
// no change meanwhile. It returns how many streams it cut.
func (f *faults) dropWatches(hold bool) int {
	f.watchMu.Lock()
	if hold && f.held == nil {
		f.held = make(chan struct{})
	}
	var cut []*watchBody
	for b := range f.watches {
		cut = append(cut, b)
		if f.expire == nil {
			f.expire = map[string]int{}
		}
		f.expire[b.key]++
	}
	f.cut = append(f.cut, cut...)
	f.watchMu.Unlock()
	for _, b := range cut {
		_ = b.Close()
	}
	return len(cut)
}

// awaitWatches makes settling wait until every open watch stream is open again (an API server
// restart ends them).
func (f *faults) awaitWatches() {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	f.cut = append(f.cut, slices.Collect(maps.Keys(f.watches))...)
}

// watchesBack reports whether every stream dropWatches cut is open again, but those of processes
// that ended; then it forgets them.
func (f *faults) watchesBack() bool {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	for _, c := range f.cut {
		// A kind whose conversion webhook is down cannot be watched again until it is back
		// (conversionOn waits for the leader to read it then).
		if c.p.ended.Load() || strings.Contains(c.key, "/"+convGroup+"/") {
			continue
		}
		if !slices.ContainsFunc(slices.Collect(maps.Keys(f.watches)), func(b *watchBody) bool { return b.p == c.p && b.key == c.key }) {
			return false
		}
	}
	f.cut = nil
	return true
}

// forgetExpired forgets the cut watches not resumed since: an informer that listed again at once
// (a cut stream ends its watch with an error, and client-go lists again then) never resumes them.
func (f *faults) forgetExpired() {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	clear(f.expire)
}

// releaseWatches lets held watches go on.
func (f *faults) releaseWatches() {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	if f.held != nil {
		close(f.held)
		f.held = nil
	}
}

// cutWatches ends the watch streams of a killed process.
func (f *faults) cutWatches(p *process) {
	f.watchMu.Lock()
	var cut []*watchBody
	for b := range f.watches {
		if b.p == p {
			cut = append(cut, b)
		}
	}
	f.watchMu.Unlock()
	for _, b := range cut {
		_ = b.Close()
	}
}

// isCRCreate reports whether the request creates a remediation CR (not a template).
func isCRCreate(req *http.Request) bool {
	if req.Method != http.MethodPost {
		return false
	}
	for _, k := range crKinds {
		if strings.HasSuffix(req.URL.Path, "/"+strings.ToLower(k[1])+"s") {
			return true
		}
	}
	return false
}

// send sends the request; an armed process dies right after the API server created a CR for it.
func (t *faultyTransport) send(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusCreated && isCRCreate(req) && t.p.created(req.URL.Path) {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil, errKilled
	}
	return resp, err
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
	if t.p.dead.Load() {
		return nil, errKilled
	}
	q := req.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		return t.f.watch(t.p, req, t.next)
	}
	if strings.HasSuffix(req.URL.Path, "/leases/"+leaderElectionID) {
		return t.next.RoundTrip(req)
	}
	if req.Method == http.MethodGet && q.Has("resourceVersion") {
		t.f.relists.Add(1) // an informer's list
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
		return t.send(req)
	case failLost:
		resp, err := t.send(req)
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

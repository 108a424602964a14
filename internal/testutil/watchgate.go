package testutil

import (
	"io"
	"net/http"
	"strings"
	"sync"
)

// WatchGate holds back what the watches of a resource deliver, so a spec can make a manager's cache
// lag behind the API server as an overloaded one does: the manager's own writes then reach the API
// server while its cache still shows the objects as they were. Install its Wrap on the manager's
// transport (EnvOptions.ManagerTransport).
type WatchGate struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

// Wrap holds back the bodies of watch responses while their resource is held.
func (g *WatchGate) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && req.URL.Query().Get("watch") == "true" {
			resp.Body = &heldBody{ReadCloser: resp.Body, gate: g, path: req.URL.Path}
		}
		return resp, err
	})
}

// Hold holds back the events of every watch of the resource (its plural name, for example
// "testremediations") until release is called; events already handed to the cache are not.
// release may be called more than once.
func (g *WatchGate) Hold(resource string) (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	g.held[resource] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			delete(g.held, resource)
			g.mu.Unlock()
			close(ch)
		})
	}
}

func (g *WatchGate) wait(path string) {
	g.mu.Lock()
	var ch chan struct{}
	for resource, c := range g.held {
		if strings.HasSuffix(path, "/"+resource) {
			ch = c
		}
	}
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

type heldBody struct {
	io.ReadCloser
	gate *WatchGate
	path string
}

// Read hands over what arrived only once the resource is not held: data that arrives while a read
// waits is held back too.
func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.gate.wait(b.path)
	return n, err
}

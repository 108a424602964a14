package testutil

import (
	"net/http"
	"sync"
)

// Request is one request a RequestCounter saw: its method, URL path and whether it is a watch.
type Request struct {
	Method, Path string
	Watch        bool
}

// RequestCounter records the requests made through the transports it wraps, so a spec can tell how
// many reads of a kind of object a manager made while something ran.
type RequestCounter struct {
	mu   sync.Mutex
	seen []Request
	// taken is how many of seen Take has handed out.
	taken int
}

// Wrap returns rt recording each request; it fits rest.Config.Wrap and EnvOptions.ManagerTransport.
func (c *RequestCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.seen = append(c.seen, Request{Method: req.Method, Path: req.URL.Path, Watch: req.URL.Query().Get("watch") == "true"})
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// Mark returns a position in the record, for Since.
func (c *RequestCounter) Mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// Since returns the requests recorded after mark that match.
func (c *RequestCounter) Since(mark int, match func(Request) bool) []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Request
	for _, r := range c.seen[mark:] {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

// Take returns the requests recorded since the last Take (or since the start) that match, and
// moves past them.
func (c *RequestCounter) Take(match func(Request) bool) []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Request
	for _, r := range c.seen[c.taken:] {
		if match(r) {
			out = append(out, r)
		}
	}
	c.taken = len(c.seen)
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

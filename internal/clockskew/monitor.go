package clockskew

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/medik8s/node-healthcheck/internal/notify"
)

// FlagName is the manager's flag that sets the bound; messages name it.
const FlagName = "--max-clock-skew"

// releaseDivisor sets the hysteresis: a skew counted beyond the bound is counted within it again
// only once it is certainly within the bound less a tenth of it (9s for a bound of 10s). A tenth is
// wider than the estimate moves when it narrows or starts over (at most a second, the Date header's
// resolution, for bounds of 10s and more) and small against the bound, so a skew that settles just
// under the bound does not hold remediations back for long.
const releaseDivisor = 10

// Verdict is the Monitor's measurement and what it says about the bound.
type Verdict struct {
	// Known is false until a response with a Date header has been measured; then the other fields
	// hold. It never turns false again.
	Known bool
	// Offset is the estimated skew: the API server's clock minus the manager's. Positive: the API
	// server's clock is ahead (the manager's behind); negative: the manager's clock is ahead.
	Offset time.Duration
	// Uncertainty is half the width of the interval the skew certainly lies in: Offset ± Uncertainty.
	// At least half a second after one response (the Date header's resolution); narrower as
	// responses at other moments of the second arrive.
	Uncertainty time.Duration
	// Bound is the largest skew accepted; 0: the check is off (Exceeded is never set).
	Bound time.Duration
	// Exceeded is set once the skew is certainly beyond the bound, the whole interval outside
	// ±Bound, and cleared once it is certainly within ±(Bound - Bound/10) (hysteresis); in between it
	// keeps its value. It starts cleared.
	Exceeded bool
	// Sampled is the local time, on the Monitor's clock, of the newest response measured.
	Sampled time.Time
	// Message says, for an administrator, the skew and its direction in plain words, its
	// uncertainty, the bound and the flag that sets it, and whether the measurement straddles the
	// bound.
	Message string
}

// Monitor measures the skew between the manager's clock and the API server's from the Date header
// of every API response that passes through its transport (Wrap), and checks it against a bound.
// It is safe for concurrent use.
type Monitor struct {
	clk   clock.PassiveClock
	bound time.Duration

	mu       sync.Mutex
	est      Estimator
	known    bool
	exceeded bool
	// behind is whether the manager's clock is behind the API server's (the estimate's sign) as of
	// the last notification while exceeded: a skew that flips direction beyond the bound changes
	// what the NodeHealthChecks' conditions say.
	behind  bool
	samples uint64 // samples used, for the Probe
	subs    notify.Subscribers
}

// New returns a Monitor that reads the local time from clk and checks the skew against bound
// (0: the check is off, the skew is still measured and exported).
func New(clk clock.PassiveClock, bound time.Duration) *Monitor {
	return &Monitor{clk: clk, bound: max(bound, 0)}
}

// Bound returns the largest skew accepted (0: the check is off).
func (m *Monitor) Bound() time.Duration { return m.bound }

// Wrap returns rt measuring every response: install it with rest.Config.Wrap on the manager's
// config before the manager is created, so that the cache, leader election and every write feed
// it. A watch's response header arrives when the watch starts, which is a sample like any other.
func (m *Monitor) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &transport{m: m, next: rt}
}

type transport struct {
	m    *Monitor
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := t.m.clk.Now()
	resp, err := t.next.RoundTrip(req)
	if resp == nil {
		return resp, err
	}
	received := t.m.clk.Now()
	if h := resp.Header.Get("Date"); h != "" {
		if date, perr := http.ParseTime(h); perr == nil {
			t.m.observe(Sample{Sent: sent, Received: received, Date: date})
		}
	}
	return resp, err
}

// WrappedRoundTripper lets client-go reach the transport underneath (k8s.io/apimachinery's
// net.RoundTripperWrapper).
func (t *transport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (m *Monitor) observe(s Sample) {
	m.mu.Lock()
	used, reset := m.est.Add(s)
	if !used {
		m.mu.Unlock()
		return
	}
	m.samples++
	iv, _ := m.est.Estimate()
	wasKnown, wasExceeded, wasBehind := m.known, m.exceeded, m.behind
	m.known = true
	m.exceeded = exceeds(m.exceeded, iv, m.bound)
	m.behind = iv.Mid() > 0
	observeMetrics(iv, m.exceeded)
	changed := !wasKnown || wasExceeded != m.exceeded || (m.exceeded && wasBehind != m.behind)
	if !changed && !reset {
		m.mu.Unlock()
		return
	}
	v := m.verdictLocked()
	m.mu.Unlock()

	// Not the request's logger: the request belongs to whichever controller sent it.
	log := logf.Log.WithName("clockskew")
	switch {
	case v.Exceeded != wasExceeded && v.Exceeded:
		log.Info("Clock skew beyond the bound", "offset", v.Offset, "uncertainty", v.Uncertainty, "message", v.Message)
	case v.Exceeded != wasExceeded:
		log.Info("Clock skew within the bound again", "offset", v.Offset, "uncertainty", v.Uncertainty, "message", v.Message)
	case reset:
		log.Info("A clock jumped: the clock skew is measured anew", "offset", v.Offset, "uncertainty", v.Uncertainty)
	default:
		log.V(1).Info("Clock skew measured", "message", v.Message)
	}
	if changed {
		m.subs.Notify()
	}
}

// Verdict returns the current measurement and its verdict.
func (m *Monitor) Verdict() Verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.verdictLocked()
}

func (m *Monitor) verdictLocked() Verdict {
	v := Verdict{Known: m.known, Bound: m.bound, Exceeded: m.exceeded}
	iv, ok := m.est.Estimate()
	if m.known && ok {
		v.Offset, v.Uncertainty, v.Sampled = iv.Mid(), iv.HalfWidth(), m.est.Newest()
	}
	v.Message = message(v, iv)
	return v
}

// Changes returns a channel that receives an event after every change of the verdict's Known or
// Exceeded, and of the skew's direction while it is exceeded. Events coalesce: a receiver that
// falls behind gets one event for several changes, and reads the verdict anew. Each call returns a
// new subscription.
func (m *Monitor) Changes() <-chan event.GenericEvent { return m.subs.Subscribe() }

// sampleCount returns how many samples the Monitor has used.
func (m *Monitor) sampleCount() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples
}

// exceeds decides whether the skew counts as beyond the bound, given the interval it lies in and
// the previous decision (hysteresis): beyond once the whole interval is outside ±bound, within
// once the whole interval is inside ±release (the bound less a tenth); in between, as before.
// A bound of 0 or less turns the check off.
func exceeds(prev bool, iv Interval, bound time.Duration) bool {
	if bound <= 0 {
		return false
	}
	if beyond(iv, bound) {
		return true
	}
	release := releaseLevel(bound)
	if iv.Lo >= -release && iv.Hi <= release {
		return false
	}
	return prev
}

func releaseLevel(bound time.Duration) time.Duration { return bound - bound/releaseDivisor }

// beyond reports whether the whole interval lies outside ±bound.
func beyond(iv Interval, bound time.Duration) bool { return iv.Lo > bound || iv.Hi < -bound }

// straddles reports whether +bound or -bound lies inside the interval.
func straddles(iv Interval, bound time.Duration) bool {
	return (iv.Lo < bound && bound < iv.Hi) || (iv.Lo < -bound && -bound < iv.Hi)
}

// messageRound is the precision of durations in messages.
const messageRound = 10 * time.Millisecond

func message(v Verdict, iv Interval) string {
	if !v.Known {
		return "The clock skew to the API server is not measured yet: no API response with a Date header has arrived"
	}
	var skew string
	switch d := v.Offset.Round(messageRound); {
	case v.Offset.Abs() <= v.Uncertainty || d == 0: // no direction is certain
		skew = "The manager's clock is in step with the API server's"
	case d > 0:
		skew = fmt.Sprintf("The manager's clock is %s behind the API server's", d)
	default:
		skew = fmt.Sprintf("The manager's clock is %s ahead of the API server's", -d)
	}
	skew += fmt.Sprintf(" (±%s)", v.Uncertainty.Round(messageRound))
	bound := fmt.Sprintf("the bound of %s (%s)", v.Bound, FlagName)
	release := releaseLevel(v.Bound)
	switch {
	case v.Bound <= 0:
		return skew + fmt.Sprintf("; the bound is off (%s=0)", FlagName)
	case straddles(iv, v.Bound) && v.Exceeded:
		return skew + fmt.Sprintf(", which straddles %s: counted beyond it until the skew is certainly within %s", bound, release)
	case straddles(iv, v.Bound):
		return skew + fmt.Sprintf(", which straddles %s: counted within it until the skew is certainly beyond it", bound)
	case v.Exceeded && !beyond(iv, v.Bound):
		return skew + fmt.Sprintf(", within %s, yet counted beyond it until the skew is certainly within %s", bound, release)
	case v.Exceeded:
		return skew + ", beyond " + bound
	default:
		return skew + ", within " + bound
	}
}

// Beyond says which way the manager's clock is off and by more than which bound, without the
// measured value, which moves with every response (the gauge, the events and Message carry it): a
// status or a decision's hold that quotes it would change on every reconcile.
func (v Verdict) Beyond() string {
	direction := "ahead of"
	if v.Offset > 0 {
		direction = "behind"
	}
	return fmt.Sprintf("the manager's clock is %s the API server's by more than %s (--max-clock-skew)", direction, v.Bound)
}

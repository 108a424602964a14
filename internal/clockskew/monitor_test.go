package clockskew

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestExceedsHysteresis(t *testing.T) {
	const bound = 10 * time.Second // release at 9s
	iv := func(lo, hi time.Duration) Interval { return Interval{Lo: lo, Hi: hi} }
	tests := []struct {
		name  string
		prev  bool
		iv    Interval
		bound time.Duration
		want  bool
	}{
		{"well within", false, iv(-500*time.Millisecond, 500*time.Millisecond), bound, false},
		{"manager ahead, wholly beyond", false, iv(-5*time.Minute-time.Second, -5*time.Minute), bound, true},
		{"manager behind, wholly beyond", false, iv(10*time.Second+time.Millisecond, 11*time.Second), bound, true},
		{"straddling the bound is not entered", false, iv(9500*time.Millisecond, 10500*time.Millisecond), bound, false},
		{"straddling the bound is not left", true, iv(9500*time.Millisecond, 10500*time.Millisecond), bound, true},
		{"between release and bound: not entered", false, iv(9100*time.Millisecond, 9900*time.Millisecond), bound, false},
		{"between release and bound: not left", true, iv(-9900*time.Millisecond, -9100*time.Millisecond), bound, true},
		{"straddling the release level is not left", true, iv(8500*time.Millisecond, 9500*time.Millisecond), bound, true},
		{"wholly within the release level is left", true, iv(8*time.Second, 9*time.Second), bound, false},
		{"wholly within the release level, manager ahead, is left", true, iv(-9*time.Second, -8*time.Second), bound, false},
		{"exactly at the bound is not beyond", false, iv(9*time.Second, 10*time.Second), bound, false},
		{"a wide interval around zero is left", true, iv(-time.Second, time.Second), bound, false},
		{"off: never", true, iv(time.Hour, time.Hour+time.Second), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exceeds(tt.prev, tt.iv, tt.bound); got != tt.want {
				t.Errorf("exceeds(%v, %v, %v) = %v, want %v", tt.prev, tt.iv, tt.bound, got, tt.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	const bound = 10 * time.Second
	verdict := func(iv Interval, bound time.Duration, exceeded bool) (Verdict, Interval) {
		return Verdict{Known: true, Offset: iv.Mid(), Uncertainty: iv.HalfWidth(), Bound: bound, Exceeded: exceeded}, iv
	}
	tests := []struct {
		name     string
		v        Verdict
		iv       Interval
		want     []string
		unwanted []string
	}{
		{"unknown", Verdict{Bound: bound}, Interval{}, []string{"not measured yet"}, []string{"ahead", "behind"}},
		{"manager ahead, beyond", func() Verdict {
			v, _ := verdict(Interval{Lo: -5*time.Minute - 2500*time.Millisecond, Hi: -5*time.Minute - 1500*time.Millisecond}, bound, true)
			return v
		}(),
			Interval{Lo: -5*time.Minute - 2500*time.Millisecond, Hi: -5*time.Minute - 1500*time.Millisecond},
			[]string{"The manager's clock is 5m2s ahead of the API server's (±500ms), beyond the bound of 10s (--max-clock-skew)"}, []string{"straddles", "within"}},
		{"manager behind, beyond", func() Verdict {
			v, _ := verdict(Interval{Lo: 5 * time.Minute, Hi: 5*time.Minute + time.Second}, bound, true)
			return v
		}(),
			Interval{Lo: 5 * time.Minute, Hi: 5*time.Minute + time.Second},
			[]string{"The manager's clock is 5m0.5s behind the API server's (±500ms), beyond the bound of 10s (--max-clock-skew)"}, nil},
		{"within", func() Verdict {
			v, _ := verdict(Interval{Lo: 1200 * time.Millisecond, Hi: 1300 * time.Millisecond}, bound, false)
			return v
		}(),
			Interval{Lo: 1200 * time.Millisecond, Hi: 1300 * time.Millisecond},
			[]string{"1.25s behind", "(±50ms), within the bound of 10s (--max-clock-skew)"}, []string{"beyond", "straddles"}},
		{"in step", func() Verdict {
			v, _ := verdict(Interval{Lo: -2 * time.Millisecond, Hi: 2 * time.Millisecond}, bound, false)
			return v
		}(),
			Interval{Lo: -2 * time.Millisecond, Hi: 2 * time.Millisecond},
			[]string{"in step with the API server's"}, []string{"ahead", "behind"}},
		{"no direction is certain", func() Verdict {
			v, _ := verdict(Interval{Lo: -10 * time.Millisecond, Hi: 70 * time.Millisecond}, bound, false)
			return v
		}(),
			Interval{Lo: -10 * time.Millisecond, Hi: 70 * time.Millisecond},
			[]string{"in step with the API server's (±40ms)"}, []string{"ahead", "behind"}},
		{"straddles, counted within", func() Verdict {
			v, _ := verdict(Interval{Lo: -10500 * time.Millisecond, Hi: -9500 * time.Millisecond}, bound, false)
			return v
		}(),
			Interval{Lo: -10500 * time.Millisecond, Hi: -9500 * time.Millisecond},
			[]string{"10s ahead", "straddles the bound of 10s (--max-clock-skew): counted within it until the skew is certainly beyond it"}, nil},
		{"straddles, counted beyond", func() Verdict {
			v, _ := verdict(Interval{Lo: 9500 * time.Millisecond, Hi: 10500 * time.Millisecond}, bound, true)
			return v
		}(),
			Interval{Lo: 9500 * time.Millisecond, Hi: 10500 * time.Millisecond},
			[]string{"straddles the bound of 10s (--max-clock-skew): counted beyond it until the skew is certainly within 9s"}, nil},
		{"hysteresis", func() Verdict {
			v, _ := verdict(Interval{Lo: 9100 * time.Millisecond, Hi: 9300 * time.Millisecond}, bound, true)
			return v
		}(),
			Interval{Lo: 9100 * time.Millisecond, Hi: 9300 * time.Millisecond},
			[]string{"9.2s behind", "within the bound of 10s (--max-clock-skew), yet counted beyond it until the skew is certainly within 9s"}, nil},
		{"off", func() Verdict {
			v, _ := verdict(Interval{Lo: time.Hour, Hi: time.Hour + time.Second}, 0, false)
			return v
		}(),
			Interval{Lo: time.Hour, Hi: time.Hour + time.Second},
			[]string{"1h0m0.5s behind", "the bound is off (--max-clock-skew=0)"}, []string{"beyond"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := message(tt.v, tt.iv)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("message %q lacks %q", got, w)
				}
			}
			for _, u := range tt.unwanted {
				if strings.Contains(got, u) {
					t.Errorf("message %q has %q", got, u)
				}
			}
			if strings.HasSuffix(got, ".") || got[:1] != strings.ToUpper(got[:1]) {
				t.Errorf("message %q: capitalised, no trailing period", got)
			}
		})
	}
}

// server is an API server stand-in whose clock is the local fake clock plus offset; it answers
// every request with a Date header after rtt of the local clock. The local clock is stepped by the
// test only.
type server struct {
	mu     sync.Mutex
	local  *clocktesting.FakeClock
	offset time.Duration
	rtt    time.Duration
	date   bool
	err    error
	calls  int
}

func (s *server) RoundTrip(*http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	// The header is written halfway; the local clock moves on by the round trip.
	s.local.Step(s.rtt / 2)
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}}
	if s.date {
		resp.Header.Set("Date", s.local.Now().Add(s.offset).UTC().Format(http.TimeFormat))
	}
	s.local.Step(s.rtt - s.rtt/2)
	return resp, nil
}

func (s *server) set(f func(*server)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// requests sends n requests through rt, 1.097s apart, so their headers are written at moments of
// the server's second about a tenth of a second apart: ten of them narrow the estimate to about
// that.
func requests(t *testing.T, rt http.RoundTripper, local *clocktesting.FakeClock, n int) {
	t.Helper()
	for range n {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api/version", nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		local.Step(time.Second + 97*time.Millisecond)
	}
}

func TestMonitorMeasuresThroughItsTransport(t *testing.T) {
	local := clocktesting.NewFakeClock(t0)
	srv := &server{local: local, rtt: 20 * time.Millisecond, date: true}
	m := New(local, 10*time.Second)
	a, b := m.Changes(), m.Changes()
	rt := m.Wrap(srv)

	v := m.Verdict()
	if v.Known || v.Exceeded || v.Bound != 10*time.Second || !strings.Contains(v.Message, "not measured yet") {
		t.Fatalf("before a response: %+v", v)
	}

	// Several responses narrow the estimate well below the half second of one.
	const narrowed = 100 * time.Millisecond
	check := func(step string, skew time.Duration, maxUncertainty time.Duration, exceeded bool, direction string) {
		t.Helper()
		v := m.Verdict()
		if !v.Known || v.Exceeded != exceeded {
			t.Fatalf("%s: %+v, want known, exceeded %v", step, v, exceeded)
		}
		// skew is the manager's clock minus the server's; the offset is the opposite.
		if lo, hi := v.Offset-v.Uncertainty, v.Offset+v.Uncertainty; -skew < lo || -skew > hi || v.Uncertainty > maxUncertainty {
			t.Fatalf("%s: offset %v ± %v, want -(%v) within at most %v", step, v.Offset, v.Uncertainty, skew, maxUncertainty)
		}
		if v.Sampled.After(local.Now()) || !v.Sampled.After(local.Now().Add(-3*time.Second)) {
			t.Fatalf("%s: sampled at %v, the last response arrived just before %v", step, v.Sampled, local.Now())
		}
		if !strings.Contains(v.Message, direction) {
			t.Fatalf("%s: message %q lacks %q", step, v.Message, direction)
		}
		if got := value(t, skewGauge); got != v.Offset.Seconds() {
			t.Errorf("%s: %s = %v, want %v", step, MetricSkew, got, v.Offset.Seconds())
		}
		if got := value(t, uncertaintyGauge); got != v.Uncertainty.Seconds() {
			t.Errorf("%s: %s = %v, want %v", step, MetricUncertainty, got, v.Uncertainty.Seconds())
		}
		want := 0.0
		if exceeded {
			want = 1
		}
		if got := value(t, exceededGauge); got != want {
			t.Errorf("%s: %s = %v, want %v", step, MetricExceeded, got, want)
		}
	}
	drain := func(step string, want int) {
		t.Helper()
		if len(a) != want || len(b) != want {
			t.Fatalf("%s: %d and %d pending events, want %d each", step, len(a), len(b), want)
		}
		for range want {
			<-a
			<-b
		}
	}

	requests(t, rt, local, 10)
	check("in step", 0, narrowed, false, "in step")
	drain("known", 1)

	// The manager's clock jumps 5m ahead.
	local.Step(5 * time.Minute)
	srv.set(func(s *server) { s.offset = -5 * time.Minute })
	requests(t, rt, local, 1)
	check("5m ahead, first response", 5*time.Minute, 510*time.Millisecond, true, "ahead of the API server's")
	requests(t, rt, local, 10)
	check("5m ahead", 5*time.Minute, narrowed, true, "ahead of the API server's")
	drain("beyond", 1)

	// And back: within again.
	srv.set(func(s *server) { s.offset = 0 })
	requests(t, rt, local, 10)
	check("back in step", 0, narrowed, false, "in step")
	drain("within", 1)

	// The manager's clock falls 5m behind.
	srv.set(func(s *server) { s.offset = 5 * time.Minute })
	requests(t, rt, local, 10)
	check("5m behind", -5*time.Minute, narrowed, true, "behind the API server's")
	drain("beyond again", 1)

	// Just under the bound, 9.5s: certainly within 10s, not within the release level of 9s: still
	// counted beyond.
	srv.set(func(s *server) { s.offset = 9500 * time.Millisecond })
	requests(t, rt, local, 10)
	check("9.5s behind", -9500*time.Millisecond, narrowed, true, "yet counted beyond it until the skew is certainly within 9s")
	drain("hysteresis", 0)
	srv.set(func(s *server) { s.offset = 8 * time.Second })
	requests(t, rt, local, 10)
	check("8s behind", -8*time.Second, narrowed, false, "within the bound of 10s")
	drain("released", 1)

	// 10.5s: beyond, flips at the first response that is wholly beyond the bound.
	srv.set(func(s *server) { s.offset = -10500 * time.Millisecond })
	requests(t, rt, local, 10)
	check("10.5s ahead", 10500*time.Millisecond, narrowed, true, "ahead")
	// Several flips before the receivers read: one pending event each.
	srv.set(func(s *server) { s.offset = 0 })
	requests(t, rt, local, 10)
	check("in step again", 0, narrowed, false, "in step")
	drain("coalesced", 1)
}

func value(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func TestMonitorWithoutABoundMeasuresOnly(t *testing.T) {
	local := clocktesting.NewFakeClock(t0)
	m := New(local, 0)
	ch := m.Changes()
	requests(t, m.Wrap(&server{local: local, offset: time.Hour, rtt: time.Millisecond, date: true}), local, 5)
	v := m.Verdict()
	if !v.Known || v.Exceeded || v.Offset < time.Hour-time.Second || v.Offset > time.Hour+time.Second || !strings.Contains(v.Message, "the bound is off") {
		t.Fatalf("%+v", v)
	}
	if len(ch) != 1 {
		t.Fatalf("becoming known must notify once, %d pending", len(ch))
	}
}

func TestMonitorIgnoresResponsesWithoutADate(t *testing.T) {
	local := clocktesting.NewFakeClock(t0)
	srv := &server{local: local, rtt: time.Millisecond}
	m := New(local, time.Second)
	rt := m.Wrap(srv)
	requests(t, rt, local, 3)
	if v := m.Verdict(); v.Known || m.sampleCount() != 0 {
		t.Fatalf("no Date, yet %+v", v)
	}
	boom := errors.New("connection refused")
	srv.set(func(s *server) { s.err = boom })
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api/version", nil)
	if _, err := rt.RoundTrip(req); !errors.Is(err, boom) {
		t.Fatalf("the transport's error must pass through, got %v", err)
	}
	if u, ok := rt.(interface{ WrappedRoundTripper() http.RoundTripper }); !ok || u.WrappedRoundTripper() != srv {
		t.Error("client-go cannot reach the wrapped transport")
	}
}

func TestMonitorIsSafeForConcurrentUse(t *testing.T) {
	local := clocktesting.NewFakeClock(t0)
	m := New(local, 10*time.Second)
	rt := m.Wrap(&server{local: local, offset: 20 * time.Second, rtt: time.Millisecond, date: true})
	ch := m.Changes()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api/version", nil)
				if _, err := rt.RoundTrip(req); err != nil {
					t.Error(err)
					return
				}
				_ = m.Verdict()
				select {
				case <-ch:
				default:
				}
			}
		})
	}
	wg.Wait()
	if v := m.Verdict(); !v.Known || !v.Exceeded {
		t.Fatalf("%+v", v)
	}
}

package clockskew

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// at returns the sample of a request sent at local time sent, answered after rtt, whose header the
// server wrote at fraction phase (0..1) of the round trip, with its clock offset ahead of the local
// one.
func at(sent time.Time, rtt time.Duration, phase float64, offset time.Duration) Sample {
	written := sent.Add(time.Duration(phase * float64(rtt)))
	return Sample{Sent: sent, Received: sent.Add(rtt), Date: written.Add(offset).Truncate(time.Second)}
}

func TestSampleInterval(t *testing.T) {
	tests := []struct {
		name   string
		s      Sample
		want   Interval
		wantOK bool
	}{
		{"the Date a moment after the send", Sample{Sent: t0.Add(200 * time.Millisecond), Received: t0.Add(300 * time.Millisecond), Date: t0},
			Interval{Lo: -300 * time.Millisecond, Hi: 800 * time.Millisecond}, true},
		{"a server 5m ahead", Sample{Sent: t0, Received: t0.Add(50 * time.Millisecond), Date: t0.Add(5 * time.Minute)},
			Interval{Lo: 5*time.Minute - 50*time.Millisecond, Hi: 5*time.Minute + time.Second}, true},
		{"a server 5m behind", Sample{Sent: t0, Received: t0.Add(50 * time.Millisecond), Date: t0.Add(-5 * time.Minute)},
			Interval{Lo: -5*time.Minute - 50*time.Millisecond, Hi: -5*time.Minute + time.Second}, true},
		{"no Date", Sample{Sent: t0, Received: t0}, Interval{}, false},
		{"received before sent: the local clock stepped back", Sample{Sent: t0, Received: t0.Add(-time.Millisecond), Date: t0}, Interval{}, false},
		{"centuries apart saturate", Sample{Sent: t0, Received: t0, Date: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
			Interval{Lo: math.MaxInt64, Hi: math.MaxInt64}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.s.Interval()
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("got %v %v, want %v %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestIntervalMidAndHalfWidth(t *testing.T) {
	for _, tt := range []struct {
		iv        Interval
		mid, half time.Duration
	}{
		{Interval{Lo: -time.Second, Hi: time.Second}, 0, time.Second},
		{Interval{Lo: 4 * time.Minute, Hi: 5 * time.Minute}, 4*time.Minute + 30*time.Second, 30 * time.Second},
		{Interval{Lo: -3, Hi: -1}, -2, 1},
		{Interval{Lo: math.MinInt64, Hi: math.MaxInt64}, -1, math.MaxInt64}, // the middle, -0.5ns, rounded down
		{Interval{Lo: math.MaxInt64, Hi: math.MaxInt64}, math.MaxInt64, 0},
	} {
		if m, h := tt.iv.Mid(), tt.iv.HalfWidth(); m != tt.mid || h != tt.half {
			t.Errorf("%v: mid %d half %d, want %d %d", tt.iv, m, h, tt.mid, tt.half)
		}
	}
}

func TestEstimator(t *testing.T) {
	const ms = time.Millisecond
	type step struct {
		s         Sample
		used      bool
		reset     bool
		contains  time.Duration // the estimate must contain this offset after the step
		maxHalf   time.Duration // and be at most this uncertain (0: not checked)
		minCenter time.Duration // and be centred within contains ± minCenter (0: not checked)
	}
	offset := 2*time.Minute + 345*ms
	tests := []struct {
		name  string
		steps []step
	}{
		{"one sample is a second wide", []step{
			{s: at(t0, 20*ms, 0.5, offset), used: true, contains: offset, maxHalf: 510 * ms},
		}},
		{"samples at other phases of the second narrow it", []step{
			{s: at(t0, 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(2*time.Second+300*ms), 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(4*time.Second+640*ms), 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(6*time.Second+650*ms), 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(8*time.Second+660*ms), 20*ms, 0.5, offset), used: true, contains: offset, maxHalf: 40 * ms, minCenter: 40 * ms},
		}},
		{"a jump of the local clock starts over", []step{
			{s: at(t0, 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(2*time.Second+650*ms), 20*ms, 0.5, offset), used: true, contains: offset},
			// The local clock jumps 2m ahead: the server is 2m less ahead of it.
			{s: at(t0.Add(2*time.Minute+4*time.Second), 20*ms, 0.5, offset-2*time.Minute), used: true, reset: true, contains: offset - 2*time.Minute, maxHalf: 510 * ms},
			{s: at(t0.Add(2*time.Minute+6*time.Second+650*ms), 20*ms, 0.5, offset-2*time.Minute), used: true, contains: offset - 2*time.Minute},
		}},
		{"a jump of the local clock beyond the window leaves the earlier samples behind", []step{
			{s: at(t0, 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(10*time.Minute), 20*ms, 0.5, offset-10*time.Minute), used: true, contains: offset - 10*time.Minute, maxHalf: 510 * ms},
		}},
		{"a jump back of the local clock starts over", []step{
			{s: at(t0, 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(-time.Minute), 20*ms, 0.5, offset+time.Minute), used: true, reset: true, contains: offset + time.Minute},
		}},
		{"a jump back of the local clock beyond the window starts over", []step{
			{s: at(t0, 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(-10*time.Minute), 20*ms, 0.5, offset+10*time.Minute), used: true, reset: true, contains: offset + 10*time.Minute},
			{s: at(t0.Add(-10*time.Minute+2*time.Second), 20*ms, 0.5, offset+10*time.Minute), used: true, contains: offset + 10*time.Minute},
		}},
		{"a jump of the server's clock starts over", []step{
			{s: at(t0, 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(2*time.Second), 20*ms, 0.5, offset+3*time.Second), used: true, reset: true, contains: offset + 3*time.Second},
		}},
		{"a slow response is valid, only wide", []step{
			{s: at(t0, 20*ms, 0.5, offset), used: true, contains: offset},
			// ...whose long round trip ages the first sample by 31s: widened by 15.5ms for drift.
			{s: at(t0.Add(time.Second), 30*time.Second, 0.9, offset), used: true, contains: offset, maxHalf: 526 * ms},
		}},
		{"samples older than the window age out", []step{
			{s: at(t0, 20*ms, 0.5, 0), used: true, contains: 0},                                             // written just after a second began
			{s: at(t0.Add(2*time.Second+980*ms), 20*ms, 0.5, 0), used: true, contains: 0, maxHalf: 25 * ms}, // and just before one ended
			// The server slewed its clock by 100ms during 6 minutes (280 ppm): the old narrow samples
			// aged out and do not contradict the new one.
			{s: at(t0.Add(6*time.Minute), 20*ms, 0.5, 100*ms), used: true, contains: 100 * ms, maxHalf: 510 * ms},
			// A sample from before the window: the local clock stepped back.
			{s: at(t0.Add(10*time.Second), 20*ms, 0.5, 0), used: true, reset: true, contains: 0},
		}},
		{"an older sample within the window counts", []step{
			{s: at(t0.Add(10*time.Second), 20*ms, 0.5, offset), used: true, contains: offset},
			{s: at(t0.Add(5*time.Second+650*ms), 20*ms, 0.5, offset), used: true, contains: offset, maxHalf: 400 * ms},
		}},
		{"a drift within 500 ppm never empties the estimate", func() []step {
			var steps []step
			for i := range 200 { // every 2s for 400s, drifting 400 ppm
				local := t0.Add(time.Duration(i)*2*time.Second + time.Duration(i*37%1000)*ms)
				drifted := offset + time.Duration(float64(local.Sub(t0))*400e-6)
				steps = append(steps, step{s: at(local, 2*ms, 0.5, drifted), used: true, contains: drifted})
			}
			return steps
		}()},
		{"a sample without Date is not used", []step{
			{s: Sample{Sent: t0, Received: t0.Add(ms)}, used: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Estimator
			for i, st := range tt.steps {
				used, reset := e.Add(st.s)
				if used != st.used || reset != st.reset {
					t.Fatalf("step %d: used %v reset %v, want %v %v", i, used, reset, st.used, st.reset)
				}
				iv, ok := e.Estimate()
				if !st.used && i == 0 {
					if ok {
						t.Fatalf("step %d: an estimate without a sample: %v", i, iv)
					}
					continue
				}
				// A sample's own phase within its round trip may put the drifted offset up to
				// rtt * 400 ppm outside: a nanosecond here.
				if !ok || !(Interval{Lo: iv.Lo - ms/1000, Hi: iv.Hi + ms/1000}).Contains(st.contains) {
					t.Fatalf("step %d: estimate %v (%v) does not contain %v", i, iv, ok, st.contains)
				}
				if st.maxHalf > 0 && iv.HalfWidth() > st.maxHalf {
					t.Errorf("step %d: uncertainty %v, want at most %v", i, iv.HalfWidth(), st.maxHalf)
				}
				if st.minCenter > 0 && (iv.Mid()-st.contains > st.minCenter || st.contains-iv.Mid() > st.minCenter) {
					t.Errorf("step %d: estimate %v, want within %v of %v", i, iv.Mid(), st.minCenter, st.contains)
				}
			}
		})
	}
}

// The memory is bounded: however many samples, the estimator is a fixed array.
func TestEstimatorMemoryIsBounded(t *testing.T) {
	var e Estimator
	for i := range 100000 {
		e.Add(at(t0.Add(time.Duration(i)*7*time.Millisecond), time.Millisecond, 0.5, time.Second))
	}
	if iv, ok := e.Estimate(); !ok || !iv.Contains(time.Second) || iv.HalfWidth() > 10*time.Millisecond {
		t.Errorf("estimate %v %v", iv, ok)
	}
}

// FuzzEstimator drives the estimator with requests at random gaps, round trips and moments at
// which the server wrote its header, between two clocks with a random offset and a drift within the
// allowance, and one jump. It checks that
//   - the estimate always contains the true offset (at the newest sample, within the drift of one
//     round trip);
//   - it never starts over, except at the first sample after a jump of 3s or more, and then contains
//     the new offset;
//   - it is never wider than one sample can be (a second and a round trip), widened for drift.
func FuzzEstimator(f *testing.F) {
	f.Add([]byte{10, 5, 128, 20, 5, 10, 20, 5, 250, 200, 30, 0}, int64(2*time.Minute), int16(0), uint8(2), int64(5*time.Minute))
	f.Add([]byte{0, 0, 0, 255, 255, 255, 1, 1, 1}, int64(-300*time.Millisecond), int16(400), uint8(255), int64(0))
	f.Add([]byte{3, 200, 7, 3, 200, 250, 9, 1, 100, 9, 1, 200, 255, 3, 3}, int64(0), int16(-400), uint8(3), int64(-3*time.Second))
	f.Fuzz(func(t *testing.T, steps []byte, offset int64, ppm int16, jumpAt uint8, jump int64) {
		off0 := time.Duration(offset % int64(24*time.Hour))
		rate := float64(max(min(ppm, 400), -400)) * 1e-6
		jumpBy := time.Duration(jump % int64(time.Hour))
		if jumpBy > -3*time.Second && jumpBy < 3*time.Second {
			jumpBy = 0 // a smaller jump may go unnoticed for a window: not checked here
		}
		truth := func(local time.Time, jumped bool) time.Duration {
			d := off0 + time.Duration(rate*float64(local.Sub(t0)))
			if jumped {
				d += jumpBy
			}
			return d
		}
		var e Estimator
		local := t0
		const maxRTT = 255 * time.Millisecond
		tolerance := time.Duration(math.Abs(rate)*float64(maxRTT)) + 1
		for i := 0; i+2 < len(steps); i += 3 {
			n := i / 3
			gap := time.Duration(steps[i]) * 150 * time.Millisecond // up to 38s: the window is crossed
			rtt := time.Duration(steps[i+1]) * time.Millisecond
			phase := float64(steps[i+2]) / 255
			local = local.Add(gap)
			jumped := jumpBy != 0 && n >= int(jumpAt)
			written := local.Add(time.Duration(phase * float64(rtt)))
			s := Sample{Sent: local, Received: local.Add(rtt), Date: written.Add(truth(written, jumped)).Truncate(time.Second)}
			used, reset := e.Add(s)
			if !used {
				t.Fatalf("sample %d not used: %+v", n, s)
			}
			wantReset := jumped && n == int(jumpAt) && n > 0
			if reset != wantReset {
				t.Fatalf("sample %d: reset %v, want %v (jump %v at %d)", n, reset, wantReset, jumpBy, jumpAt)
			}
			iv, ok := e.Estimate()
			want := truth(s.Received, jumped)
			if !ok || want < iv.Lo-tolerance || want > iv.Hi+tolerance {
				t.Fatalf("sample %d: estimate %v (%v) does not contain the true offset %v", n, iv, ok, want)
			}
			if w := iv.Hi - iv.Lo; w > DateResolution+maxRTT+2*(Window+bucketWidth)/driftDivisor {
				t.Fatalf("sample %d: estimate %v wider than a sample can be", n, iv)
			}
		}
	})
}

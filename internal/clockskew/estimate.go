package clockskew

import (
	"math"
	"time"
)

// DateResolution is the resolution of an HTTP Date header: the server's clock read some time in
// [Date, Date+1s) when it wrote the header.
const DateResolution = time.Second

// Window is how long the Estimator keeps a sample: long enough to collect samples at many
// sub-second phases of the Date header's seconds (the leader renews its lease every 2s, so about
// 150 of them), which is what narrows the estimate from a second to milliseconds; short enough that
// an unnoticed small jump of a clock (see Estimator) ages out within minutes.
const Window = 5 * time.Minute

// buckets is how many parts the window is kept in (so the memory is bounded whatever the request
// rate): each holds the intersection of its samples' intervals. 10 parts of 30s: the window ends at
// most 30s later than Window says, at a cost of ten intervals.
const buckets = 10

const bucketWidth = Window / buckets

// driftDivisor widens an older sample's interval by its age divided by this, 2000: 500 ppm, the
// Linux kernel's limit on the frequency correction NTP applies (MAXFREQ, as fast as ntpd slews a
// clock), and five times what a free-running quartz clock drifts. Without it, normal frequency
// error between the two clocks would empty the intersection after minutes of samples. A faster
// change (a step, chrony's faster slewing) counts as a jump: the estimator starts over, which costs
// only precision.
const driftDivisor = 2000

// Sample is what one API response tells about the offset between the local clock and the API
// server's.
type Sample struct {
	// Sent is the local time the request was sent.
	Sent time.Time
	// Received is the local time the response's header arrived.
	Received time.Time
	// Date is the response's Date header: the server's time, truncated to the second, at some moment
	// between Sent and Received.
	Date time.Time
}

// Interval is a closed range of offsets, server minus local.
type Interval struct {
	// Lo and Hi are the least and the greatest offset possible.
	Lo, Hi time.Duration
}

// Mid returns the middle of the interval: the estimate.
func (i Interval) Mid() time.Duration {
	return i.Lo/2 + i.Hi/2 + (i.Lo%2+i.Hi%2)/2
}

// HalfWidth returns half the interval's width: the estimate's uncertainty.
func (i Interval) HalfWidth() time.Duration {
	return i.Hi/2 - i.Lo/2 + (i.Hi%2-i.Lo%2)/2
}

// Contains reports whether d lies in the interval.
func (i Interval) Contains(d time.Duration) bool { return i.Lo <= d && d <= i.Hi }

// empty reports whether the interval holds no offset.
func (i Interval) empty() bool { return i.Lo > i.Hi }

func (i Interval) intersect(j Interval) Interval {
	return Interval{Lo: max(i.Lo, j.Lo), Hi: min(i.Hi, j.Hi)}
}

// Interval returns the offsets the sample allows: the server read Date+[0,1s) at a local time within
// [Sent, Received], so server minus local lies in [Date - Received, Date + 1s - Sent]. It is false
// for a sample without a Date or received before it was sent (the local clock stepped back during
// the request).
func (s Sample) Interval() (Interval, bool) {
	if s.Date.IsZero() || s.Sent.IsZero() || s.Received.Before(s.Sent) {
		return Interval{}, false
	}
	// time.Time.Sub saturates, so clocks centuries apart give the largest Duration, never a wrap.
	return Interval{Lo: s.Date.Sub(s.Received), Hi: s.Date.Add(DateResolution).Sub(s.Sent)}, true
}

// Estimator narrows the offset between the local clock and the API server's from the samples of
// the last Window: the intersection of their intervals, each widened by the drift the two clocks may
// have had since (500 ppm of its age). It is pure: it reads no clock, its time is that of its newest
// sample. Its memory is bounded. The zero value is empty and ready to use; it is not safe for
// concurrent use.
//
// A sample whose interval does not meet the others' intersection shows that a clock jumped (or
// drifted faster than allowed): the estimator starts over from that sample. A jump smaller than the
// current interval's width may go unnoticed until the samples before it have aged out of the
// window; meanwhile the estimate is off by at most the jump.
type Estimator struct {
	b      [buckets]bucket
	newest time.Time // the newest Received
	has    bool
}

// bucket holds the intersection of its samples' intervals, each widened for drift from its own
// receive time: widened to a reference time ref, sample i allows
// [Lo_i - (ref-t_i)/D, Hi_i + (ref-t_i)/D] = [Lo_i + (t_i-start)/D - (ref-start)/D, ...], so the
// bucket keeps lo = max(Lo_i + (t_i-start)/D) and hi = min(Hi_i - (t_i-start)/D) and widens both by
// (ref-start)/D when asked: exact, in constant memory.
type bucket struct {
	slot   int64 // Received / bucketWidth
	lo, hi time.Duration
	set    bool
}

func slotStart(slot int64) time.Time { return time.Unix(slot*int64(bucketWidth/time.Second), 0) }

// Add records a sample. used is false for a sample that tells nothing (see Sample.Interval); reset
// is true when the sample contradicted the earlier ones and the estimator started over from it. A
// sample received more than the Window before the newest one contradicts them too: the local clock
// stepped back (samples reach the estimator as they arrive).
func (e *Estimator) Add(s Sample) (used, reset bool) {
	iv, ok := s.Interval()
	if !ok {
		return false, false
	}
	next := *e
	if next.insert(s, iv) {
		if _, ok := next.Estimate(); ok {
			*e = next
			return true, false
		}
	}
	*e = Estimator{}
	e.insert(s, iv)
	return true, true
}

// insert adds the sample's interval; false when it is older than the window.
func (e *Estimator) insert(s Sample, iv Interval) bool {
	slot := slotOf(s.Received)
	if e.has && slot <= slotOf(e.newest)-buckets {
		return false
	}
	age := s.Received.Sub(slotStart(slot)) / driftDivisor
	lo, hi := addSat(iv.Lo, age), subSat(iv.Hi, age)
	b := &e.b[mod(slot, buckets)]
	if !b.set || b.slot != slot {
		// Empty, or a bucket that left the window (a newer slot at this place cannot be: it would
		// be ahead of the newest sample).
		*b = bucket{slot: slot, lo: lo, hi: hi, set: true}
	} else {
		b.lo, b.hi = max(b.lo, lo), min(b.hi, hi)
	}
	if !e.has || s.Received.After(e.newest) {
		e.newest = s.Received
	}
	e.has = true
	return true
}

// Estimate returns the interval the offset lies in at the time of the newest sample; false when
// there is no sample.
func (e *Estimator) Estimate() (Interval, bool) {
	if !e.has {
		return Interval{}, false
	}
	first := slotOf(e.newest) - buckets
	out := Interval{Lo: math.MinInt64, Hi: math.MaxInt64}
	for _, b := range e.b {
		if !b.set || b.slot <= first {
			continue
		}
		widen := e.newest.Sub(slotStart(b.slot)) / driftDivisor
		out = out.intersect(Interval{Lo: subSat(b.lo, widen), Hi: addSat(b.hi, widen)})
	}
	if out.empty() {
		return Interval{}, false
	}
	return out, true
}

// Newest returns the local receive time of the newest sample; zero when there is none.
func (e *Estimator) Newest() time.Time {
	if !e.has {
		return time.Time{}
	}
	return e.newest
}

func slotOf(t time.Time) int64 {
	// Seconds and nanoseconds apart, so that no time.Time overflows.
	w := int64(bucketWidth / time.Second)
	return floorDiv(t.Unix(), w)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// addSat and subSat add and subtract a non-negative duration without wrapping around.
func addSat(d, w time.Duration) time.Duration {
	if d > math.MaxInt64-w {
		return math.MaxInt64
	}
	return d + w
}

func subSat(d, w time.Duration) time.Duration {
	if d < math.MinInt64+w {
		return math.MinInt64
	}
	return d - w
}

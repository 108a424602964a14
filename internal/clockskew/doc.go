// Package clockskew measures the skew between the manager's clock and the API server's, keeps the
// measurement current, and says whether it is beyond a bound (the manager's --max-clock-skew).
//
// Why: decisions compare the manager's clock with times other clocks wrote: condition transition
// times (kube-controller-manager, the kubelet) and creation times (the API server). A manager clock
// minutes ahead turns a short Ready=Unknown into "unhealthy for 300s" at once. The operator
// assumes the control plane's clocks agree with each other and measures its own against the API
// server's; beyond the bound it starts no new remediation (the controllers read the Verdict).
//
// How: Monitor.Wrap, installed on the manager's rest.Config before the manager is created, times
// every API response (cache lists and watches, leader-election renewals, writes) on the injected
// clock and reads its Date header. The server wrote Date (truncated to the second) between the
// request's send and receive times, so each response bounds the offset, server minus local, to
// [Date - received, Date + 1s - sent]. The pure Estimator intersects the intervals of the last
// Window (5 minutes), each widened by 500 ppm of its age for drift, which narrows a second to
// milliseconds once responses arrive at different moments of the second; a response that
// contradicts the others shows a clock jumped, and the estimate starts over from it. Memory is
// bounded (ten 30-second parts). Responses from servers whose clocks disagree (kube-apiserver
// replicas behind one address, an aggregated API server's own Date) contradict each other, and the
// estimate follows the newest of them.
//
// The Probe, a Runnable on every replica, sends GET /version only when a whole
// DefaultProbeInterval (30s) passed without a measured response: never while leader election
// renews or polls its lease every 2s.
//
// The verdict (Monitor.Verdict): Offset is server minus local, positive when the manager's clock is
// behind. Exceeded is set once the whole interval lies beyond ±Bound and cleared once it lies
// within ±(Bound - Bound/10): the hysteresis keeps it from flapping at the bound, and the message
// says when the interval straddles it. Until the first response Known is false (Offset, Exceeded
// zero). A Bound of 0 turns the check off; the skew is still measured and exported.
// Monitor.Changes notifies the controllers of every change of Known or Exceeded, as
// upgrade.Gate.Changes does.
//
// Metrics (one Monitor per process; see docs/metrics.md):
//   - nodehealthcheck_clock_skew_seconds (gauge, MetricSkew): the estimate, server minus local;
//   - nodehealthcheck_clock_skew_uncertainty_seconds (gauge, MetricUncertainty): the skew lies
//     within the estimate plus or minus this;
//   - nodehealthcheck_clock_skew_exceeded (gauge, MetricExceeded): 1 while Exceeded, else 0.
//
// All three are 0 until the first response is measured.
package clockskew

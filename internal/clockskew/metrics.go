package clockskew

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric names; see the package documentation and docs/metrics.md. One Monitor per process: the
// gauges are global.
const (
	// MetricSkew is the estimated skew in seconds: the API server's clock minus the manager's
	// (positive: the manager's clock is behind).
	MetricSkew = "nodehealthcheck_clock_skew_seconds"
	// MetricUncertainty is the estimate's uncertainty in seconds: the skew lies within
	// MetricSkew ± this.
	MetricUncertainty = "nodehealthcheck_clock_skew_uncertainty_seconds"
	// MetricExceeded is 1 while the skew counts as beyond --max-clock-skew, else 0.
	MetricExceeded = "nodehealthcheck_clock_skew_exceeded"
)

var (
	skewGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricSkew, Help: "Estimated clock skew in seconds: the API server's clock minus the manager's (positive: the manager's clock is behind)",
	})
	uncertaintyGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricUncertainty, Help: "Uncertainty of the clock skew estimate in seconds: the skew lies within the estimate plus or minus this",
	})
	exceededGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricExceeded, Help: "1 while the clock skew counts as beyond --max-clock-skew (no new remediation starts), else 0",
	})
)

func init() { crmetrics.Registry.MustRegister(skewGauge, uncertaintyGauge, exceededGauge) }

func observeMetrics(iv Interval, exceeded bool) {
	skewGauge.Set(iv.Mid().Seconds())
	uncertaintyGauge.Set(iv.HalfWidth().Seconds())
	if exceeded {
		exceededGauge.Set(1)
	} else {
		exceededGauge.Set(0)
	}
}

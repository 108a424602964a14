package upgradeguard

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// MetricGate is the gate state per enabled detector, one series per state ("unknown", "open",
// "closed"), exactly one of which is 1. Node-level detectors are "closed" while they block at least
// one NodeHealthCheck. Disabled detectors have no series.
const MetricGate = "nodehealthcheck_upgrade_gate"

// gateMetric exposes MetricGate from the gate's DetectorStates at each scrape: the metric reads the
// gate, never writes it, and the gate holds no metric.
type gateMetric struct {
	desc *prometheus.Desc
	// gate is the gate the Guard feeds (SetupWithManager); nil: no series.
	gate atomic.Pointer[upgrade.Gate]
}

func newGateMetric() *gateMetric {
	return &gateMetric{desc: prometheus.NewDesc(MetricGate,
		"Upgrade gate state per detector: 1 for the current state (unknown, open or closed), 0 for the others",
		[]string{"detector", "state"}, nil)}
}

// gateStates are the values of the state label, in the order they are exposed.
var gateStates = []upgrade.DetectorState{upgrade.StateUnknown, upgrade.StateOpen, upgrade.StateClosed}

// Describe implements prometheus.Collector.
func (m *gateMetric) Describe(ch chan<- *prometheus.Desc) { ch <- m.desc }

// Collect implements prometheus.Collector.
func (m *gateMetric) Collect(ch chan<- prometheus.Metric) {
	g := m.gate.Load()
	if g == nil {
		return
	}
	for detector, state := range g.DetectorStates() {
		for _, s := range gateStates {
			v := 0.0
			if s == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, v, detector, string(s))
		}
	}
}

// metric is the process's gate metric; one gate per process is exposed, the last one a Guard was
// set up with.
var metric = newGateMetric()

func init() { crmetrics.Registry.MustRegister(metric) }

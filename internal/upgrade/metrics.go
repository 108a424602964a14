package upgrade

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricGate is the gate state per enabled detector, one series per state ("unknown", "open",
// "closed"), exactly one of which is 1. Node-level detectors are "closed" while they block at least
// one NodeHealthCheck. Disabled detectors have no series.
const MetricGate = "nodehealthcheck_upgrade_gate"

const (
	stateUnknown = "unknown"
	stateOpen    = "open"
	stateClosed  = "closed"
)

var gateState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: MetricGate, Help: "Upgrade gate state per detector: 1 for the current state (unknown, open or closed), 0 for the others",
}, []string{"detector", "state"})

func init() { crmetrics.Registry.MustRegister(gateState) }

// setGauge records an evaluated detector's state.
func setGauge(detector string, closed bool) {
	gateState.WithLabelValues(detector, stateUnknown).Set(0)
	gateState.WithLabelValues(detector, stateOpen).Set(b2f(!closed))
	gateState.WithLabelValues(detector, stateClosed).Set(b2f(closed))
}

// setUnknown records an enabled detector that has not been evaluated yet.
func setUnknown(detector string) {
	gateState.WithLabelValues(detector, stateUnknown).Set(1)
	gateState.WithLabelValues(detector, stateOpen).Set(0)
	gateState.WithLabelValues(detector, stateClosed).Set(0)
}

// observeState records a node-level detector: no series while it is off.
func observeState(detector string, on, closed bool) {
	if !on {
		for _, s := range []string{stateUnknown, stateOpen, stateClosed} {
			gateState.DeleteLabelValues(detector, s)
		}
		return
	}
	setGauge(detector, closed)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

package upgradeguard

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// gather returns the gauge values of MetricGate by "detector/state", and fails on anything else.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != MetricGate || f.GetType().String() != "GAUGE" {
			t.Fatalf("unexpected family %s of type %s", f.GetName(), f.GetType())
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if len(labels) != 2 || labels["detector"] == "" || labels["state"] == "" {
				t.Fatalf("labels %v, want detector and state", labels)
			}
			out[labels["detector"]+"/"+labels["state"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestGateMetricShowsTheGatesStates(t *testing.T) {
	m := newGateMetric()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if got := gather(t, reg); len(got) != 0 {
		t.Fatalf("no gate yet: %v, want no series", got)
	}
	g := upgrade.NewGate(true)
	m.gate.Store(g)
	g.Expect(upgrade.DetectorClusterVersion)
	g.Expect(upgrade.DetectorClusterAPI)
	g.Discovered()
	g.Report(upgrade.DetectorClusterAPI, []upgrade.Signal{{Detector: upgrade.DetectorClusterAPI, Reason: "ClusterAPIRollout", Message: "rolls out"}}, time.Now())
	want := map[string]float64{
		"clusterapi/unknown": 0, "clusterapi/open": 0, "clusterapi/closed": 1,
		"clusterversion/unknown": 1, "clusterversion/open": 0, "clusterversion/closed": 0,
		"noderollout/unknown": 0, "noderollout/open": 1, "noderollout/closed": 0,
	}
	if got := gather(t, reg); !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	g.Report(upgrade.DetectorClusterAPI, nil, time.Now())
	if got := gather(t, reg); got["clusterapi/open"] != 1 || got["clusterapi/closed"] != 0 {
		t.Fatalf("the rollout ended: %v", got)
	}
}

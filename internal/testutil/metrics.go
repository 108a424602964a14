package testutil

import (
	. "github.com/onsi/gomega" //nolint:revive // test helpers
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Series returns the metric of the family with exactly these labels.
func Series(name string, labels map[string]string) *dto.Metric {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			match := true
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					match = false
				}
			}
			if match {
				return m
			}
		}
	}
	return nil
}

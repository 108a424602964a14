package remediation

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricOldRemediationCR counts remediation CRs flagged as running too long, labelled name (the
// node) and namespace (always empty), as the public operator labels it; bounded: a CR is flagged once.
const MetricOldRemediationCR = "nodehealthcheck_old_remediation_cr"

var oldRemediationCR = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricOldRemediationCR, Help: "Number of old remediation CRs detected by NodeHealthChecks",
}, []string{"name", "namespace"}) // node name, and "" (the public operator's labels)

func init() { crmetrics.Registry.MustRegister(oldRemediationCR) }

// MetricRemediationErrors counts reconciles of a NodeHealthCheck in which some remediation action
// (creating, escalating, deleting a CR, a node lease) failed and was retried; label nhc (bounded by
// the NodeHealthChecks).
const MetricRemediationErrors = "nodehealthcheck_remediation_errors_total"

var remediationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricRemediationErrors, Help: "Reconciles of a NodeHealthCheck in which a remediation action failed and is retried",
}, []string{"nhc"})

func init() { crmetrics.Registry.MustRegister(remediationErrors) }

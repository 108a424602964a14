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

// MetricDecisions counts the reconciles in which the remediation controller decided a
// NodeHealthCheck from its own snapshot and carried the decision out (whatever it decided, and
// whether or not an action failed); label nhc (bounded by the NodeHealthChecks: the series is
// removed with the NodeHealthCheck). A count that stops rising while the NodeHealthCheck's nodes
// change means it is not being decided (its snapshot cannot be gathered: see the logs). Tests read it
// as the witness that this controller decided after a change (testutil's RemediationDecided), since
// a decision that holds everything back writes nothing else.
const MetricDecisions = "nodehealthcheck_remediation_decisions_total"

var decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricDecisions, Help: "Reconciles in which the remediation controller decided a NodeHealthCheck and carried the decision out",
}, []string{"nhc"})

func init() { crmetrics.Registry.MustRegister(decisions) }

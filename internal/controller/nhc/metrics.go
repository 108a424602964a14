package nhc

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/outcome"
)

// Metric names. The first two keep the public operator's names (dashboards and alerts depend on
// them); histograms carry only bounded labels: the NodeHealthCheck's name and the remediation kind,
// never node or CR names.
const (
	// MetricOngoingRemediation is 1 per node with a running remediation CR and 0 once it ended (the
	// series is kept, as the public operator keeps it, while a NodeHealthCheck selects the node).
	// Labels: name (node), namespace (of the CR), remediation (CR kind), as in the public operator.
	// Bounded by the nodes the NodeHealthChecks select or list: a node's series are deleted
	// SeriesGrace after no NodeHealthCheck selects or lists it any more (metricsState.nodes).
	MetricOngoingRemediation = "nodehealthcheck_ongoing_remediation"
	// MetricUnhealthyNodeDuration observes, when a node leaves unhealthyNodes, for each of its
	// remediations, how long ago it started. Labels as MetricOngoingRemediation, as in the public
	// operator, and deleted as its series are.
	MetricUnhealthyNodeDuration = "nodehealthcheck_unhealthy_node_duration_seconds"
	// MetricTimeToRemediation observes the time from a node becoming unhealthy to its first
	// remediation CR being created.
	MetricTimeToRemediation = "nodehealthcheck_time_to_remediation_seconds"
	// MetricTimeToRecovery observes the time from a node's first remediation CR being created to the
	// node being healthy again: when status first reports the node healthy with its CRs
	// (conditionsHealthyTimestamp), or, if it never did, when its CRs go while it is healthy. So every
	// remediation that ends Healthy or NodeReplaced is observed once.
	MetricTimeToRecovery = "nodehealthcheck_time_to_recovery_seconds"
	// MetricCondition is 1 while a NodeHealthCheck's condition of the type is True, 0 otherwise, for
	// the types alerts care about (conditionMetricTypes). Labels: nhc, type.
	MetricCondition = "nodehealthcheck_condition"
	// MetricWouldRemediate is 1 per node a dry-run NodeHealthCheck would remediate now; the series
	// is removed when it no longer would. Labels: nhc, node, remediation (the template's kind without
	// Template: the CR kind). This operator's extension.
	MetricWouldRemediate = "nodehealthcheck_would_remediate"
	// MetricRepairBudgetExhausted is 1 per unhealthy node that spec.repairBudget holds back; the
	// series is removed when it no longer does. Labels: nhc, node. This operator's extension.
	MetricRepairBudgetExhausted = "nodehealthcheck_repair_budget_exhausted"
	// MetricFailureDomainUnhealthy is 1 per failure domain (spec.failureDomain) that holds more
	// unhealthy nodes than its bound; the series goes when it holds fewer.
	MetricFailureDomainUnhealthy = "nodehealthcheck_failure_domain_unhealthy"
	// MetricRemediationStalled is 1 per node whose remediation ended without it being done with
	// (every step exhausted, or waiting for manual confirmation: the RemediationsStalled condition
	// says which); the series goes with it. Labels: nhc, node. This operator's extension.
	MetricRemediationStalled = "nodehealthcheck_remediation_stalled"
	// MetricUntrustedConditionTimes is, per NodeHealthCheck, how many conditions of its nodes report
	// a lastTransitionTime the operator does not trust (the ConditionTimesUntrusted condition).
	// Labels: nhc. This operator's extension.
	MetricUntrustedConditionTimes = "nodehealthcheck_untrusted_condition_times"
	// MetricRemediationOutcomes counts ended remediations by how they ended (issue 28.5). Labels:
	// nhc, outcome (one of api/v1alpha1's RemediationOutcome values), step (the 1-based number of
	// the escalation step that ran last; at most 32 values). This operator's extension.
	MetricRemediationOutcomes = "nodehealthcheck_remediation_outcomes_total"
	// MetricRemediationDeadline is, per node under remediation whose NodeHealthCheck has escalation
	// steps, when its steps allow it to end: its first CR's creation plus the sum of the steps'
	// timeouts (unix seconds). The series is removed when the remediation ends. Labels: nhc, node.
	// Alerts compare it with time(). This operator's extension.
	MetricRemediationDeadline = "nodehealthcheck_remediation_deadline_timestamp_seconds"
)

// conditionMetricTypes are the condition types exported as MetricCondition.
var conditionMetricTypes = []string{
	remediationv1alpha1.ConditionTypeDisabled, remediationv1alpha1.ConditionTypeStormActive, remediationv1alpha1.ConditionTypeUpgradeInProgress,
}

// upstreamBuckets are the public operator's buckets, 30s to 1h: a reboot lands there.
var upstreamBuckets = []float64{30, 60, 120, 180, 240, 300, 600, 1200, 2400, 3600}

// durationBuckets are the public operator's buckets followed by 2h, 4h and 8h: reprovisioning a
// bare-metal node (firmware, inspection, an image written to disk) often takes hours, and with 1h
// as the last bucket every such remediation fell into +Inf alike. Every bucket of the public
// operator stays, so queries on its le values keep their meaning; 3 more series per histogram.
var durationBuckets = append(slices.Clone(upstreamBuckets), 7200, 14400, 28800)

var (
	ongoingRemediation = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricOngoingRemediation, Help: "Indication of an ongoing remediation of an unhealthy node",
	}, []string{"name", "namespace", "remediation"})
	unhealthyNodeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricUnhealthyNodeDuration, Help: "Unhealthy Node duration distribution", Buckets: durationBuckets,
	}, []string{"name", "namespace", "remediation"})
	timeToRemediation = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricTimeToRemediation, Help: "Time from a node becoming unhealthy to its first remediation CR", Buckets: durationBuckets,
	}, []string{"nhc", "remediation"})
	timeToRecovery = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricTimeToRecovery, Help: "Time from a node's first remediation CR to the node being healthy again", Buckets: durationBuckets,
	}, []string{"nhc", "remediation"})
	conditionGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricCondition, Help: "1 while the NodeHealthCheck's condition of this type is True",
	}, []string{"nhc", "type"})
	wouldRemediate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricWouldRemediate, Help: "1 per node a dry-run NodeHealthCheck would remediate now",
	}, []string{"nhc", "node", "remediation"})
	repairBudgetExhausted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricRepairBudgetExhausted, Help: "1 per unhealthy node the NodeHealthCheck's repair budget holds back",
	}, []string{"nhc", "node"})
	failureDomainUnhealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricFailureDomainUnhealthy, Help: "1 per failure domain of the NodeHealthCheck that holds more unhealthy nodes than its bound (no new remediation starts there)",
	}, []string{"nhc", "domain"})
	remediationStalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricRemediationStalled, Help: "1 per node whose remediation ended without it being done with: every step exhausted, or waiting for manual confirmation",
	}, []string{"nhc", "node"})
	untrustedConditionTimes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricUntrustedConditionTimes, Help: "Conditions of the NodeHealthCheck's nodes whose lastTransitionTime the operator does not trust (a writer's clock off by more than the clock-skew bound, or a backdated change): they count from when the operator saw them change",
	}, []string{"nhc"})
	remediationOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricRemediationOutcomes, Help: "Ended remediations, by how they ended and the escalation step that ran last",
	}, []string{"nhc", "outcome", "step"})
	remediationDeadline = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricRemediationDeadline, Help: "When a running remediation's escalation steps allow it to end (its first CR's creation plus the steps' timeouts), in unix seconds",
	}, []string{"nhc", "node"})
)

func init() {
	crmetrics.Registry.MustRegister(ongoingRemediation, unhealthyNodeDuration, timeToRemediation, timeToRecovery, conditionGauge, wouldRemediate, repairBudgetExhausted, failureDomainUnhealthy,
		remediationOutcomes, remediationDeadline, remediationStalled, untrustedConditionTimes)
}

// gaugeKey is one ongoing-remediation series.
type gaugeKey struct{ node, namespace, kind string }

// DefaultSeriesGrace is SeriesGrace in the manager: how long the series of a node that no
// NodeHealthCheck selects or lists any more stay before they are deleted. A node leaves the status
// (and unhealthy_node_duration observes its remediation) just as it goes, deleted or relabelled; the
// series must outlive that by a few scrapes (Prometheus scrapes every 15 s to 1 min, a
// ServiceMonitor often every 30 s), or its last value would never be read.
const DefaultSeriesGrace = 10 * time.Minute

// metricsState remembers the series each NodeHealthCheck has set, so that series of ended
// remediations, of nodes that went and of NodeHealthChecks deleted are removed. It is rebuilt from
// status after a restart.
type metricsState struct {
	// wall tells the real time, grace how long the series of a node no NodeHealthCheck holds any
	// more stay (SeriesGrace); set by SetupWithManager.
	wall  clock.PassiveClock
	grace time.Duration

	mu     sync.Mutex
	series map[string]map[gaugeKey]bool
	// nodes holds, per node, its series that carry no NodeHealthCheck label (MetricOngoingRemediation,
	// MetricUnhealthyNodeDuration: the public operator's labels) and which NodeHealthChecks hold it
	// (select or list it). Once none does, they are deleted after grace, at the next reconcile of any
	// NodeHealthCheck (the one that let the node go last looks again then), or at once when that
	// NodeHealthCheck is deleted. So they are bounded by the nodes the NodeHealthChecks hold.
	nodes map[string]*nodeSeries
	// would holds, per dry-run NodeHealthCheck, the series of MetricWouldRemediate it set (node -> CR kind).
	would map[string]map[string]string
	// stalled holds, per NodeHealthCheck, the nodes whose remediation stalled (node -> why), for
	// MetricRemediationStalled and the events.
	stalled map[string]map[string]string
	// exhausted holds, per NodeHealthCheck, the nodes its repair budget holds back (node -> skip
	// message), for MetricRepairBudgetExhausted and the events.
	exhausted map[string]map[string]string
	// domains holds, per NodeHealthCheck, the failure domains over their bound (domain -> why), for
	// MetricFailureDomainUnhealthy and the events.
	domains map[string]map[string]string
	// deadlines holds, per NodeHealthCheck, the nodes whose MetricRemediationDeadline series it set.
	deadlines map[string]map[string]bool
}

// syncDeadlines sets the deadline series of the NodeHealthCheck from its status (nil: deleted) and
// steps: for each node under remediation, when its steps allow it to end (outcome.Deadline: only
// with escalation steps, never while healthyDelay keeps a recovered node's CRs), and removes the
// series it set before that are gone.
func (m *metricsState) syncDeadlines(nhcName string, st *remediationv1alpha1.NodeHealthCheckStatus, steps []health.Step) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deadlines == nil {
		m.deadlines = map[string]map[string]bool{}
	}
	current := map[string]bool{}
	if st != nil {
		for i := range st.UnhealthyNodes {
			u := &st.UnhealthyNodes[i]
			if deadline, ok := outcome.Deadline(u, steps); ok {
				current[u.Name] = true
				remediationDeadline.WithLabelValues(nhcName, u.Name).Set(float64(deadline.Unix()))
			}
		}
	}
	for node := range m.deadlines[nhcName] {
		if !current[node] {
			remediationDeadline.DeleteLabelValues(nhcName, node)
		}
	}
	if len(current) == 0 {
		delete(m.deadlines, nhcName)
	} else {
		m.deadlines[nhcName] = current
	}
}

// maxStepLabel bounds the step label of MetricRemediationOutcomes: the CRD allows 20 escalation
// steps, and CRs of steps the spec no longer has could add a few; beyond it, the label says 32.
const maxStepLabel = 32

// observeOutcomes counts the ended remediations of a status that was written, each once.
func observeOutcomes(nhcName string, ended []outcome.Ended) {
	for _, e := range ended {
		remediationOutcomes.WithLabelValues(nhcName, string(e.Outcome), strconv.Itoa(min(e.Step, maxStepLabel))).Inc()
	}
}

// syncDomains sets the failure-domain series of the NodeHealthCheck to the held domains (domain ->
// why; nil: none) and returns those newly held since the last call, sorted.
// syncStalled sets the stalled series of the NodeHealthCheck to the stalled nodes (node -> why;
// nil: none) and returns those newly stalled, or stalled for another reason, since the last call.
func (m *metricsState) syncStalled(nhcName string, stalled map[string]string) []string {
	return m.syncHeld(remediationStalled, &m.stalled, nhcName, stalled, func(before, now string, _ bool) bool { return before != now })
}

func (m *metricsState) syncDomains(nhcName string, held map[string]string) []string {
	return m.syncHeld(failureDomainUnhealthy, &m.domains, nhcName, held, func(before, _ string, was bool) bool { return !was })
}

// syncExhausted sets the repair-budget series of the NodeHealthCheck to the held nodes (node ->
// skip message; nil: none) and returns those newly held, or held with a new message (a new
// window), since the last call. A process start reports every held node once more.
func (m *metricsState) syncExhausted(nhcName string, held map[string]string) []string {
	return m.syncHeld(repairBudgetExhausted, &m.exhausted, nhcName, held, func(before, now string, _ bool) bool { return before != now })
}

// syncHeld sets the gauge's series of the NodeHealthCheck to 1 for each key of held (the second
// label) and removes those of keys no longer held, remembering held in store; it returns the keys
// for which news says the hold is news (from what store held before, and whether it held the key),
// sorted.
func (m *metricsState) syncHeld(g *prometheus.GaugeVec, store *map[string]map[string]string, nhcName string, held map[string]string,
	news func(before, now string, was bool) bool) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if *store == nil {
		*store = map[string]map[string]string{}
	}
	before := (*store)[nhcName]
	var started []string
	for key, value := range held {
		if was, ok := before[key]; news(was, value, ok) {
			started = append(started, key)
		}
		g.WithLabelValues(nhcName, key).Set(1)
	}
	for key := range before {
		if _, ok := held[key]; !ok {
			g.DeleteLabelValues(nhcName, key)
		}
	}
	if len(held) == 0 {
		delete(*store, nhcName)
	} else {
		(*store)[nhcName] = held
	}
	slices.Sort(started)
	return started
}

// syncWould sets the would-remediate series of the NodeHealthCheck from its status (nil: deleted):
// 1 for each node's latest simulated step, and removes the series it set before that are gone.
func (m *metricsState) syncWould(nhcName string, st *remediationv1alpha1.NodeHealthCheckStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.would == nil {
		m.would = map[string]map[string]string{}
	}
	before, current := m.would[nhcName], map[string]string{}
	if st != nil {
		for _, u := range st.UnhealthyNodes {
			if n := len(u.DryRunRemediations); n > 0 {
				kind := strings.TrimSuffix(u.DryRunRemediations[n-1].Template.Kind, "Template")
				current[u.Name] = kind
				wouldRemediate.WithLabelValues(nhcName, u.Name, kind).Set(1)
			}
		}
	}
	for node, kind := range before {
		if current[node] != kind {
			wouldRemediate.DeleteLabelValues(nhcName, node, kind)
		}
	}
	if len(current) == 0 {
		delete(m.would, nhcName)
	} else {
		m.would[nhcName] = current
	}
}

// syncUntrusted sets the NodeHealthCheck's count of condition times it does not trust (nil nodes:
// deleted, the series goes).
func syncUntrusted(nhcName string, nodes []health.Node) {
	if nodes == nil {
		untrustedConditionTimes.DeleteLabelValues(nhcName)
		return
	}
	n := 0
	for _, node := range nodes {
		n += len(node.CountFrom)
	}
	untrustedConditionTimes.WithLabelValues(nhcName).Set(float64(n))
}

// syncOngoing sets the ongoing-remediation series for the NodeHealthCheck's status to 1, and to 0
// those it set before that the status no longer has; selected tells the nodes the NodeHealthCheck
// selects. A nil status (deleted) sets all of them to 0 and deletes the NodeHealthCheck's own series
// (labelled nhc) and those of the nodes no other NodeHealthCheck holds.
func (m *metricsState) syncOngoing(nhcName string, st *remediationv1alpha1.NodeHealthCheckStatus, selected func(node string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.series == nil {
		m.series = map[string]map[gaugeKey]bool{}
	}
	current := map[gaugeKey]bool{}
	listed := map[string]bool{}
	if st != nil {
		for _, n := range st.UnhealthyNodes {
			listed[n.Name] = true
			for _, r := range n.Remediations {
				k := gaugeKey{n.Name, r.Resource.Namespace, r.Resource.Kind}
				current[k] = true
				ongoingRemediation.WithLabelValues(k.node, k.namespace, k.kind).Set(1)
				m.node(n.Name, nhcName).ongoing[k] = true
			}
		}
	}
	for k := range m.series[nhcName] {
		if !current[k] {
			ongoingRemediation.WithLabelValues(k.node, k.namespace, k.kind).Set(0)
		}
	}
	if st == nil {
		delete(m.series, nhcName)
	} else {
		m.series[nhcName] = current
	}
	m.hold(nhcName, func(node string) bool { return listed[node] || (selected != nil && selected(node)) }, st == nil)
	for _, t := range conditionMetricTypes {
		if st == nil {
			conditionGauge.DeleteLabelValues(nhcName, t)
			continue
		}
		v := 0.0
		if meta.IsStatusConditionTrue(st.Conditions, t) {
			v = 1
		}
		conditionGauge.WithLabelValues(nhcName, t).Set(v)
	}
}

// observeTransitions observes the histograms for what changed from the old to the new status; it
// runs only after the new status was written, so each transition is observed once, also across
// restarts. unhealthySince gives when each node became unhealthy, recovered tells the selected nodes
// that are healthy now.
func (m *metricsState) observeTransitions(nhcName string, old, updated *remediationv1alpha1.NodeHealthCheckStatus, unhealthySince map[string]time.Time, recovered func(string) bool, now time.Time) {
	oldEntries := map[string]remediationv1alpha1.UnhealthyNode{}
	for _, n := range old.UnhealthyNodes {
		oldEntries[n.Name] = n
	}
	newEntries := map[string]bool{}
	for _, n := range updated.UnhealthyNodes {
		newEntries[n.Name] = true
		before := oldEntries[n.Name]
		if len(n.Remediations) > 0 && len(before.Remediations) == 0 {
			first := n.Remediations[0]
			if since, ok := unhealthySince[n.Name]; ok && !since.IsZero() {
				timeToRemediation.WithLabelValues(nhcName, first.Resource.Kind).Observe(first.Started.Sub(since).Seconds())
			}
		}
		if n.ConditionsHealthyTimestamp != nil && before.ConditionsHealthyTimestamp == nil && len(n.Remediations) > 0 {
			first := n.Remediations[0]
			timeToRecovery.WithLabelValues(nhcName, first.Resource.Kind).Observe(n.ConditionsHealthyTimestamp.Sub(first.Started.Time).Seconds())
		}
	}
	for name, before := range oldEntries {
		if newEntries[name] {
			continue
		}
		for _, r := range before.Remediations {
			unhealthyNodeDuration.WithLabelValues(name, r.Resource.Namespace, r.Resource.Kind).Observe(now.Sub(r.Started.Time).Seconds())
			m.observedDuration(nhcName, name, gaugeKey{name, r.Resource.Namespace, r.Resource.Kind})
		}
		// Healthy and its CRs gone within one batch of status writes: never listed as healthy.
		if before.ConditionsHealthyTimestamp == nil && len(before.Remediations) > 0 && recovered(name) {
			first := before.Remediations[0]
			timeToRecovery.WithLabelValues(nhcName, first.Resource.Kind).Observe(now.Sub(first.Started.Time).Seconds())
		}
	}
}

// nodeSeries is what metricsState.nodes holds per node.
type nodeSeries struct {
	// ongoing and durations are the node's MetricOngoingRemediation and MetricUnhealthyNodeDuration
	// series.
	ongoing, durations map[gaugeKey]bool
	// holders are the NodeHealthChecks that select or list the node.
	holders map[string]bool
	// left is when the last holder let the node go (wall), leftBy that NodeHealthCheck; zero and ""
	// while some NodeHealthCheck holds it.
	left   time.Time
	leftBy string
}

// node returns the node's record, new if it had none: then as if the NodeHealthCheck named by had
// let it go now (its hold, or the next sync of a holder, says otherwise).
func (m *metricsState) node(name, by string) *nodeSeries {
	if m.nodes == nil {
		m.nodes = map[string]*nodeSeries{}
	}
	s := m.nodes[name]
	if s == nil {
		s = &nodeSeries{ongoing: map[gaugeKey]bool{}, durations: map[gaugeKey]bool{}, holders: map[string]bool{}, left: m.now(), leftBy: by}
		m.nodes[name] = s
	}
	return s
}

// observedDuration records a MetricUnhealthyNodeDuration series of the node, observed by the
// NodeHealthCheck.
func (m *metricsState) observedDuration(nhcName, node string, k gaugeKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.node(node, nhcName).durations[k] = true
}

// hold records which of the nodes with series the NodeHealthCheck holds now (gone: it was deleted),
// and deletes the series of the nodes no NodeHealthCheck has held for grace, and at once those the
// deleted NodeHealthCheck let go. Called with m.mu held.
func (m *metricsState) hold(nhcName string, holds func(node string) bool, gone bool) {
	now := m.now()
	for name, s := range m.nodes {
		switch {
		case !gone && holds(name):
			s.holders[nhcName], s.left, s.leftBy = true, time.Time{}, ""
		case s.holders[nhcName]:
			delete(s.holders, nhcName)
			if len(s.holders) == 0 {
				s.left, s.leftBy = now, nhcName
			}
		}
		if len(s.holders) > 0 {
			continue
		}
		if (gone && s.leftBy == nhcName) || !now.Before(s.left.Add(m.grace)) {
			for k := range s.ongoing {
				ongoingRemediation.DeleteLabelValues(k.node, k.namespace, k.kind)
			}
			for k := range s.durations {
				unhealthyNodeDuration.DeleteLabelValues(k.node, k.namespace, k.kind)
			}
			delete(m.nodes, name)
		}
	}
	if gone {
		// Its own series: labelled with its name, they would stay for ever (the histograms and the
		// outcome counter are never reset otherwise).
		for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{timeToRemediation, timeToRecovery, remediationOutcomes} {
			v.DeletePartialMatch(prometheus.Labels{"nhc": nhcName})
		}
	}
}

// requeue returns again, or how long until the first series of a node this NodeHealthCheck let go
// last is due to be deleted when that is sooner (zero again: nothing else is due).
func (m *metricsState) requeue(nhcName string, again time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, s := range m.nodes {
		if s.leftBy != nhcName {
			continue
		}
		due := max(s.left.Add(m.grace).Sub(now), time.Millisecond)
		if again <= 0 || due < again {
			again = due
		}
	}
	return again
}

func (m *metricsState) now() time.Time {
	if m.wall == nil {
		return time.Now()
	}
	return m.wall.Now()
}

// selectedIn tells the nodes a snapshot selects.
func selectedIn(snap interface {
	SelectedNode(string) (*corev1.Node, bool)
}) func(string) bool {
	return func(node string) bool {
		_, ok := snap.SelectedNode(node)
		return ok
	}
}

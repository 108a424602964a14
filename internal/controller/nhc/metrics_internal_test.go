package nhc

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// seriesNaming counts the series of the family with a label of that value.
func seriesNaming(t *testing.T, family, value string) int {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					n++
					break
				}
			}
		}
	}
	return n
}

// remediated is a status listing the node with one running CR.
func remediated(node string, started time.Time) *remediationv1alpha1.NodeHealthCheckStatus {
	return &remediationv1alpha1.NodeHealthCheckStatus{UnhealthyNodes: []remediationv1alpha1.UnhealthyNode{{Name: node,
		Remediations: []remediationv1alpha1.Remediation{{Resource: corev1.ObjectReference{Kind: "TestRemediation", Namespace: "default", Name: node},
			Started: metav1.Time{Time: started}}}}}}
}

// The public operator's per-node series (no NodeHealthCheck label) stay while a NodeHealthCheck
// selects or lists the node, SeriesGrace more once none does (so the last values are scraped), and
// go at once with the last NodeHealthCheck that held the node.
func TestNodeSeriesOutliveTheNodeBySeriesGrace(t *testing.T) {
	wall := clocktesting.NewFakePassiveClock(time.Now())
	const grace = 10 * time.Minute
	m := &metricsState{wall: wall, grace: grace}
	node, other := "grace-node-1", "grace-node-2"
	empty := &remediationv1alpha1.NodeHealthCheckStatus{}
	selects := func(nodes ...string) func(string) bool {
		return func(n string) bool {
			for _, s := range nodes {
				if s == n {
					return true
				}
			}
			return false
		}
	}
	series := func(n string) int {
		return seriesNaming(t, MetricOngoingRemediation, n) + seriesNaming(t, MetricUnhealthyNodeDuration, n)
	}

	m.syncOngoing("grace-a", remediated(node, wall.Now()), selects(node))
	m.syncOngoing("grace-b", empty, selects(node)) // selects it too, lists nothing
	m.syncOngoing("grace-a", empty, selects(node))
	m.observeTransitions("grace-a", remediated(node, wall.Now()), empty, nil, func(string) bool { return true }, wall.Now())
	if got := series(node); got != 2 {
		t.Fatalf("%d series of a recovered node still selected, want ongoing (0) and the duration", got)
	}
	m.syncOngoing("grace-a", empty, selects())
	wall.SetTime(wall.Now().Add(time.Hour))
	m.syncOngoing("grace-a", empty, selects())
	if got := series(node); got != 2 {
		t.Fatalf("%d series while another NodeHealthCheck selects the node, want 2", got)
	}
	if got := m.requeue("grace-a", 0); got != 0 {
		t.Errorf("grace-a looks again in %s for a node it does not hold last, want never", got)
	}

	m.syncOngoing("grace-b", empty, selects()) // the last holder lets it go
	if got := m.requeue("grace-b", time.Hour); got != grace {
		t.Errorf("grace-b looks again in %s, want %s", got, grace)
	}
	if got := m.requeue("grace-b", time.Minute); got != time.Minute {
		t.Errorf("an earlier requeue stays: %s", got)
	}
	wall.SetTime(wall.Now().Add(grace - time.Second))
	m.syncOngoing("grace-a", empty, selects())
	if got := series(node); got != 2 {
		t.Fatalf("%d series within SeriesGrace, want 2", got)
	}
	wall.SetTime(wall.Now().Add(time.Second))
	m.syncOngoing("grace-a", empty, selects()) // any NodeHealthCheck's look deletes what is due
	if got := series(node); got != 0 {
		t.Fatalf("%d series SeriesGrace after the last NodeHealthCheck let the node go, want none", got)
	}
	if got := m.requeue("grace-b", 0); got != 0 {
		t.Errorf("nothing left to delete, yet a requeue in %s", got)
	}

	// A NodeHealthCheck deleted takes the series of the nodes only it held, and its own, at once.
	m.syncOngoing("grace-c", remediated(other, wall.Now()), selects(other))
	timeToRemediation.WithLabelValues("grace-c", "TestRemediation").Observe(1)
	remediationOutcomes.WithLabelValues("grace-c", "Healthy", "1").Inc()
	m.syncOngoing("grace-c", nil, nil)
	if got := series(other) + seriesNaming(t, MetricTimeToRemediation, "grace-c") + seriesNaming(t, MetricRemediationOutcomes, "grace-c"); got != 0 {
		t.Fatalf("%d series after the NodeHealthCheck was deleted, want none", got)
	}
	if _, kept := m.series["grace-c"]; kept || len(m.nodes) != 0 {
		t.Errorf("memory left: %d nodes, grace-c's series %v", len(m.nodes), kept)
	}
}

// The duration histograms keep every bucket of the public operator and reach at least 8h, where
// bare-metal reprovisioning lands; an observation of 7h is counted in a bucket of its own, not
// only in +Inf.
func TestDurationBucketsReachEightHours(t *testing.T) {
	if !slices.Equal(durationBuckets[:len(upstreamBuckets)], upstreamBuckets) {
		t.Errorf("buckets %v do not start with the public operator's %v", durationBuckets, upstreamBuckets)
	}
	if last := durationBuckets[len(durationBuckets)-1]; last < (8 * time.Hour).Seconds() {
		t.Errorf("the last bucket is %vs, want at least 8h", last)
	}
	unhealthyNodeDuration.WithLabelValues("buckets-node", "default", "TestRemediation").Observe((7 * time.Hour).Seconds())
	defer unhealthyNodeDuration.DeleteLabelValues("buckets-node", "default", "TestRemediation")
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != MetricUnhealthyNodeDuration {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				if b.GetUpperBound() >= (7*time.Hour).Seconds() && b.GetUpperBound() <= (8*time.Hour).Seconds() && b.GetCumulativeCount() == 1 {
					return
				}
			}
		}
	}
	t.Error("an observation of 7h is in no bucket up to 8h")
}

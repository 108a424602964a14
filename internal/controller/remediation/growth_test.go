package remediation_test

import (
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// churned is what churn created: the names of its nodes and NodeHealthChecks.
type churned struct{ nodes, nhcs []string }

// churn runs nodes and NodeHealthChecks through their lives, as a cluster does: nodes created,
// failing, remediated (one step of an escalating NodeHealthCheck, so its deadline series is set, and
// one running for 48 hours, flagged old), recovering, deleted while remediated and created again
// under new names, relabelled out of their NodeHealthCheck, a node held back by another party's
// lease, a dry-run NodeHealthCheck that would remediate; then every node and NodeHealthCheck goes.
// Once a node was deleted and another relabelled out of the NodeHealthCheck, which stays, it calls
// gone with their names. It returns once the NodeHealthChecks are deleted.
func churn(ctx context.Context, gone func(nodes ...string)) churned {
	GinkgoHelper()
	var c churned
	node := func(group string, ready corev1.ConditionStatus) *corev1.Node {
		n := e.NewNode(ctx, group, ready, time.Hour)
		c.nodes = append(c.nodes, n.Name)
		return n
	}
	remove := func(obj client.Object) { Expect(client.IgnoreNotFound(e.K8s.Delete(ctx, obj))).To(Succeed()) }

	group := e.Unique("g")
	for range 7 {
		node(group, corev1.ConditionTrue)
	}
	recovering, deleted, leased := node(group, corev1.ConditionUnknown), node(group, corev1.ConditionUnknown), node(group, corev1.ConditionUnknown)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodelease.DefaultNamespace}}
	Expect(client.IgnoreAlreadyExists(e.K8s.Create(ctx, ns))).To(Succeed())
	foreign := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: nodelease.Name(leased.Name)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-maintenance-operator"), LeaseDurationSeconds: ptr.To(int32((7 * 24 * time.Hour).Seconds())),
			AcquireTime: &metav1.MicroTime{Time: e.Clock.Now()}, RenewTime: &metav1.MicroTime{Time: e.Clock.Now()}},
	}
	e.Create(ctx, foreign)
	n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.RemediationTemplate = nil
		n.Spec.EscalatingRemediations = []remediationv1alpha1.EscalatingRemediation{stepTemplate(ctx, kindA, 1, 72*time.Hour, false)}
	})
	c.nhcs = append(c.nhcs, n.Name)
	Eventually(e.CRsOf(ctx, recovering.Name, kindA)).Should(HaveLen(1))
	Eventually(e.CRsOf(ctx, deleted.Name, kindA)).Should(HaveLen(1))
	// Listed with their CRs, so that leaving the list observes unhealthy_node_duration.
	listedWithCR := func(node string) {
		GinkgoHelper()
		Eventually(func() int {
			if u := entryOf(ctx, n, node)(); u != nil {
				return len(u.Remediations)
			}
			return 0
		}).Should(Equal(1), "node %s listed with its CR", node)
	}
	listedWithCR(recovering.Name)
	listedWithCR(deleted.Name)
	Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
		ContainSubstring("Node " + leased.Name + " is leased by")))

	// Running for 48 hours: flagged old and counted.
	created := e.CRsOf(ctx, deleted.Name, kindA)()[0].GetCreationTimestamp().Time
	e.Clock.SetTime(created.Add(48 * time.Hour))
	e.Touch(ctx, n)
	Eventually(func() map[string]string { return e.CRsOf(ctx, deleted.Name, kindA)()[0].GetAnnotations() }).Should(HaveKey(remediationv1alpha1.OldRemediationCRAnnotation))

	// One is deleted while remediated; new nodes come under new names, fail and are remediated; one
	// of them is relabelled out of the NodeHealthCheck. Then one recovers (last: a node that comes
	// back holds new remediations back for a while).
	remove(deleted)
	Eventually(e.CRsOf(ctx, deleted.Name, kindA)).Should(BeEmpty())
	replacement, relabelled := node(group, corev1.ConditionUnknown), node(group, corev1.ConditionUnknown)
	Eventually(e.CRsOf(ctx, replacement.Name, kindA)).Should(HaveLen(1))
	Eventually(e.CRsOf(ctx, relabelled.Name, kindA)).Should(HaveLen(1))
	listedWithCR(relabelled.Name)
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(relabelled), relabelled)).To(Succeed())
		relabelled.Labels[testutil.GroupLabel] = e.Unique("elsewhere")
		return e.K8s.Update(ctx, relabelled)
	})).To(Succeed())
	Eventually(e.CRsOf(ctx, relabelled.Name, kindA)).Should(BeEmpty())
	gone(deleted.Name, relabelled.Name)
	e.SetReady(ctx, recovering, corev1.ConditionTrue, 0)
	Eventually(e.CRsOf(ctx, recovering.Name, kindA)).Should(BeEmpty())

	// A dry-run NodeHealthCheck would remediate a node of its own.
	dryGroup := e.Unique("g")
	for range 2 {
		node(dryGroup, corev1.ConditionTrue)
	}
	wouldBe := node(dryGroup, corev1.ConditionUnknown)
	dry := e.NewNHC(ctx, dryGroup, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.DryRun = true })
	c.nhcs = append(c.nhcs, dry.Name)
	Eventually(func() float64 { return wouldRemediate(dry.Name, wouldBe.Name, "TestRemediation") }).Should(BeEquivalentTo(1))

	// Everything goes: first the nodes, while their NodeHealthChecks still select them, then the
	// NodeHealthChecks.
	for _, name := range c.nodes {
		remove(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(BeEmpty())
	e.RemediationDecided(ctx, n)
	remove(n)
	remove(dry)
	remove(foreign)
	return c
}

// seriesOf returns the metric series (one per label set) of the operator's families that name one
// of the nodes or NodeHealthChecks, as "family{labels}".
func seriesOf(c churned) []string {
	GinkgoHelper()
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	names := map[string]bool{}
	for _, n := range slices.Concat(c.nodes, c.nhcs) {
		names[n] = true
	}
	var out []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if names[l.GetValue()] && (l.GetName() == "nhc" || l.GetName() == "node" || l.GetName() == "name") {
					out = append(out, f.GetName()+m.String())
					break
				}
			}
		}
	}
	return out
}

var _ = Describe("Bounded growth", func() {
	It("deletes the metric series of the nodes that went and of the NodeHealthChecks deleted", func(ctx SpecContext) {
		c := churn(ctx, func(nodes ...string) {
			// Their series go while the NodeHealthCheck stays: at once the NodeHealthCheck's own (the
			// deadline) and the old CR's count, the public operator's SeriesGrace later.
			Eventually(func() []string { return seriesOf(churned{nodes: nodes}) }).WithTimeout(30*time.Second).Should(BeEmpty(),
				"the series of a node deleted and of a node relabelled out of its NodeHealthCheck")
		})
		// The per-node series of the public operator's metrics without a NodeHealthCheck label go
		// SeriesGrace after the last NodeHealthCheck let the node go (two seconds in this suite).
		Eventually(func() []string { return seriesOf(c) }).WithTimeout(30*time.Second).Should(BeEmpty(),
			"every series of the %d nodes and %d NodeHealthChecks churned is deleted", len(c.nodes), len(c.nhcs))
	})

	It("forgets what the remediation controller keeps in memory about nodes and NodeHealthChecks that went", func(ctx SpecContext) {
		// The memory of other specs' objects that are still being deleted only shrinks meanwhile.
		baseline := controllers.Remediation.MemorySizes()
		c := churn(ctx, func(nodes ...string) {
			Eventually(func() []string {
				return slices.DeleteFunc(slices.Clone(nodes), func(node string) bool { return !controllers.Remediation.Remembers(node) })
			}).Should(BeEmpty(), "what is kept about a node deleted and a node relabelled out of its NodeHealthCheck, which stays")
		})
		Eventually(func() map[string]int {
			sizes := controllers.Remediation.MemorySizes()
			for k, v := range sizes {
				sizes[k] = max(v-baseline[k], 0)
			}
			return sizes
		}).Should(HaveEach(0), "the memory of %d nodes and %d NodeHealthChecks churned is forgotten (sizes beyond those before the spec)", len(c.nodes), len(c.nhcs))
		Expect(controllers.Refusals.Len()).To(BeNumerically("<=", baseline["refusals"]))
	})
})

package remediation_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/nodetaints"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

var _ = Describe("spec.maxInFlight", func() {
	It("remediates at most that many nodes at once, the node that failed first first, and the next when one ends", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 6 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		first := e.NewNode(ctx, group, corev1.ConditionUnknown, 20*time.Minute)
		second := e.NewNode(ctx, group, corev1.ConditionUnknown, 10*time.Minute)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			one := intstr.FromInt32(1)
			n.Spec.MaxInFlight = &one
		})
		Eventually(e.TestCRs(ctx, first.Name)).Should(HaveLen(1), "the node that failed first")
		Eventually(heldBack(ctx, n, second.Name)).Should(BeTrue())
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(
			ContainSubstring("1 of at most 1 selected nodes are under remediation (maxInFlight 1); node %s waits", second.Name))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, second.Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("the first recovers: its CR goes, and the second's comes")
		e.SetReady(ctx, first, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, first.Name)).Should(BeEmpty())
		Eventually(e.TestCRs(ctx, second.Name)).Should(HaveLen(1))
	})
})

var _ = Describe("spec.skipNodesBeingRemoved", func() {
	It("starts no remediation of a node the autoscaler is removing, and does once the taint is gone; off, it remediates", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 4 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		removed := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		removed.Spec.Taints = []corev1.Taint{{Key: nodetaints.ClusterAutoscaler, Effect: corev1.TaintEffectNoSchedule}}
		Expect(e.K8s.Update(ctx, removed)).To(Succeed())
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.SkipNodesBeingRemoved = true })
		Eventually(heldBack(ctx, n, removed.Name)).Should(BeTrue())
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring(
			"node %s is being removed by the cluster autoscaler (taint %s)", removed.Name, nodetaints.ClusterAutoscaler))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, removed.Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("the autoscaler gives the node up: it is remediated")
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(removed), removed)).To(Succeed())
		removed.Spec.Taints = nil
		Expect(e.K8s.Update(ctx, removed)).To(Succeed())
		Eventually(e.TestCRs(ctx, removed.Name)).Should(HaveLen(1))

		By("without the option, a node being removed is remediated, as by the public operator")
		other := e.Unique("g")
		for range 4 {
			e.NewNode(ctx, other, corev1.ConditionTrue, time.Hour)
		}
		karpenter := e.NewNode(ctx, other, corev1.ConditionUnknown, time.Hour)
		karpenter.Spec.Taints = []corev1.Taint{{Key: nodetaints.Karpenter, Effect: corev1.TaintEffectNoSchedule}}
		Expect(e.K8s.Update(ctx, karpenter)).To(Succeed())
		e.NewNHC(ctx, other)
		Eventually(e.TestCRs(ctx, karpenter.Name)).Should(HaveLen(1))
	})
})

// inZone sets the node's topology.kubernetes.io/zone label (as its kubelet may) and returns it.
func inZone(ctx context.Context, n *corev1.Node, z string) *corev1.Node {
	GinkgoHelper()
	Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
	n.Labels["topology.kubernetes.io/zone"] = z
	Expect(e.K8s.Update(ctx, n)).To(Succeed())
	return n
}

var _ = Describe("spec.failureDomain", func() {
	It("starts no remediation in a zone that lost more nodes than its bound, while the other zones go on", func(ctx SpecContext) {
		group := e.Unique("g")
		zone := func(n *corev1.Node, z string) *corev1.Node { return inZone(ctx, n, z) }
		var a, b []*corev1.Node
		for range 3 {
			a = append(a, zone(e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour), "a"))
			b = append(b, zone(e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour), "b"))
		}
		// Zone a is partitioned: two of its three nodes fail; one in zone b fails too.
		e.SetReady(ctx, a[0], corev1.ConditionUnknown, time.Hour)
		e.SetReady(ctx, a[1], corev1.ConditionUnknown, time.Hour)
		e.SetReady(ctx, b[0], corev1.ConditionUnknown, time.Hour)
		// The NodeHealthCheck comes after the failures: it sees zone a with both down at once (one
		// failure first would rightly be remediated before the second one counts).
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromInt32(2)
			n.Spec.MinHealthy = &v
			n.Spec.FailureDomain = &remediationv1alpha1.FailureDomain{TopologyKey: "topology.kubernetes.io/zone", MaxUnhealthy: intstr.FromInt32(1)}
		})
		Eventually(e.TestCRs(ctx, b[0].Name)).Should(HaveLen(1), "zone b goes on")
		Eventually(heldBack(ctx, n, a[0].Name)).Should(BeTrue())
		Eventually(heldBack(ctx, n, a[1].Name)).Should(BeTrue())
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring(
			"in failure domain topology.kubernetes.io/zone=a 2 of 3 selected nodes are unhealthy or about to be, at most 1 allowed"))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(ContainSubstring("(FailureDomainUnhealthy)")))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonFailureDomainUnhealthy)).Should(ContainElement(
			ContainSubstring("No new remediation starts in failure domain topology.kubernetes.io/zone=a")))
		Expect(meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeFailureDomainUnhealthy)).To(
			HaveField("Message", ContainSubstring("topology.kubernetes.io/zone=a 2 of 3")))
		Expect(testutil.Series(nhc.MetricFailureDomainUnhealthy, map[string]string{"nhc": n.Name, "domain": "a"})).NotTo(BeNil())
		e.RemediationDecided(ctx, n)
		Consistently(func() int { return len(e.TestCRs(ctx, a[0].Name)()) + len(e.TestCRs(ctx, a[1].Name)()) }).WithTimeout(time.Second).Should(BeZero())

		By("one of zone a comes back: the other is remediated")
		e.SetReady(ctx, a[1], corev1.ConditionTrue, time.Hour)
		Eventually(e.TestCRs(ctx, a[0].Name)).Should(HaveLen(1))
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeFailureDomainUnhealthy)
		}).Should(BeNil())
		Eventually(func() any {
			return testutil.Series(nhc.MetricFailureDomainUnhealthy, map[string]string{"nhc": n.Name, "domain": "a"})
		}).Should(BeNil())
	})
})

var _ = Describe("spec.failureDomain, against a node that moves", func() {
	It("counts a failing node that changes its own zone label in both zones: it escapes nothing, and holds the zone it joined", func(ctx SpecContext) {
		const key = "topology.kubernetes.io/zone"
		group := e.Unique("g")
		zone := func(n *corev1.Node, z string) *corev1.Node { return inZone(ctx, n, z) }
		var a, b []*corev1.Node
		for range 3 {
			a = append(a, zone(e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour), "a"))
			b = append(b, zone(e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour), "b"))
		}
		e.SetReady(ctx, a[0], corev1.ConditionUnknown, time.Hour)
		e.SetReady(ctx, a[1], corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromInt32(2)
			n.Spec.MinHealthy = &v
			n.Spec.FailureDomain = &remediationv1alpha1.FailureDomain{TopologyKey: key, MaxUnhealthy: intstr.FromInt32(1)}
		})
		Eventually(heldBack(ctx, n, a[0].Name)).Should(BeTrue())
		Eventually(heldBack(ctx, n, a[1].Name)).Should(BeTrue())
		e.RemediationDecided(ctx, n)

		By("one of zone a's failing nodes sets its zone to b, as its kubelet may: both stay held")
		zone(a[1], "b")
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring(fmt.Sprintf("node %s was in failure domain a lately", a[1].Name)))
		e.RemediationDecided(ctx, n)
		Consistently(func() int { return len(e.TestCRs(ctx, a[0].Name)()) + len(e.TestCRs(ctx, a[1].Name)()) }).WithTimeout(time.Second).Should(BeZero())

		By("a node of zone b fails: zone b, which the mover joined, is over its bound too")
		e.SetReady(ctx, b[0], corev1.ConditionUnknown, time.Hour)
		Eventually(heldBack(ctx, n, b[0].Name)).Should(BeTrue())
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, b[0].Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("the mover recovers: zone a holds one failure, zone b one; both are remediated")
		e.SetReady(ctx, a[1], corev1.ConditionTrue, time.Hour)
		Eventually(e.TestCRs(ctx, a[0].Name)).Should(HaveLen(1))
		Eventually(e.TestCRs(ctx, b[0].Name)).Should(HaveLen(1))
		Expect(e.TestCRs(ctx, b[0].Name)()[0].GetAnnotations()).To(HaveKeyWithValue(remediationv1alpha1.FailureDomainAnnotation, key+"=b"),
			"the CR records the domain it was created in")
	})
})

package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/nodetaints"
)

var _ = Describe("Nodes being removed (spec.skipNodesBeingRemoved)", func() {
	It("hold a running remediation's escalation too, for at most the removal hold, which ends with an event", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 4 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		sick := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.SkipNodesBeingRemoved = true
			n.Spec.RemediationTemplate = nil
			n.Spec.EscalatingRemediations = []remediationv1alpha1.EscalatingRemediation{
				stepTemplate(ctx, kindA, 1, time.Minute, false), stepTemplate(ctx, kindB, 2, 2*time.Hour, false)}
		})
		Eventually(e.CRsOf(ctx, sick.Name, kindA)).Should(HaveLen(1))

		By("Karpenter starts removing the node (its taint carries no time): the due escalation is held")
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(sick), sick)).To(Succeed())
		sick.Spec.Taints = append(sick.Spec.Taints, corev1.Taint{Key: nodetaints.Karpenter, Effect: corev1.TaintEffectNoSchedule})
		Expect(e.K8s.Update(ctx, sick)).To(Succeed())
		elapse(ctx, n, 2*time.Minute)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			And(ContainSubstring("Escalation of node %s held: node %s is being removed by Karpenter", sick.Name, sick.Name), ContainSubstring("the hold ends at"))))
		e.RemediationDecided(ctx, n)
		Consistently(e.CRsOf(ctx, sick.Name, kindB)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.CRsOf(ctx, sick.Name, kindA)()).To(HaveLen(1), "the running step goes on")

		By("the removal never completes: after the hold, the escalation goes on, and an event says why")
		elapse(ctx, n, health.DefaultRemovalHold)
		Eventually(e.CRsOf(ctx, sick.Name, kindB)).Should(HaveLen(1))
		Eventually(e.EventNotes(ctx, sick.Name, remediationv1alpha1.EventReasonRemovalHoldExpired)).Should(ContainElement(
			And(ContainSubstring("being removed by Karpenter"), ContainSubstring("longer than the removal hold (30m0s, --removal-hold)"))))
	})

	It("recognise a node's deletion held by a finalizer, and Karpenter's taint before v1; a stopped instance is no removal", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 5 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		deleting := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(deleting), deleting)).To(Succeed())
		deleting.Finalizers = append(deleting.Finalizers, "karpenter.sh/termination")
		Expect(e.K8s.Update(ctx, deleting)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(deleting), deleting)).To(Succeed())
			deleting.Finalizers = nil
			Expect(e.K8s.Update(ctx, deleting)).To(Succeed())
		})
		Expect(e.K8s.Delete(ctx, deleting)).To(Succeed())
		legacy := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		legacy.Spec.Taints = []corev1.Taint{{Key: nodetaints.KarpenterLegacy, Value: "disrupting", Effect: corev1.TaintEffectNoSchedule}}
		Expect(e.K8s.Update(ctx, legacy)).To(Succeed())
		stopped := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		stopped.Spec.Taints = []corev1.Taint{{Key: nodetaints.CloudShutdown, Effect: corev1.TaintEffectNoSchedule}}
		Expect(e.K8s.Update(ctx, stopped)).To(Succeed())

		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.SkipNodesBeingRemoved = true })
		Eventually(e.TestCRs(ctx, stopped.Name)).Should(HaveLen(1), "a stopped instance is remediated")
		Eventually(heldBack(ctx, n, deleting.Name)).Should(BeTrue())
		Eventually(heldBack(ctx, n, legacy.Name)).Should(BeTrue())
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(And(
			ContainSubstring("node %s is being removed by its deletion", deleting.Name),
			ContainSubstring("node %s is being removed by Karpenter (taint %s)", legacy.Name, nodetaints.KarpenterLegacy)))
		e.RemediationDecided(ctx, n)
		Consistently(func() int { return len(e.TestCRs(ctx, deleting.Name)()) + len(e.TestCRs(ctx, legacy.Name)()) }).WithTimeout(time.Second).Should(BeZero())
	})
})

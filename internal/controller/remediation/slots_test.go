package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
)

// stalledCondition reads the NodeHealthCheck's RemediationsStalled condition (nil: none).
func stalledCondition(ctx SpecContext, n *remediationv1alpha1.NodeHealthCheck) func() *metav1.Condition {
	return func() *metav1.Condition {
		return meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeRemediationsStalled)
	}
}

func stalledGauge(nhcName, node string) float64 {
	return gauge(nhc.MetricRemediationStalled, map[string]string{"nhc": nhcName, "node": node})
}

var _ = Describe("maxInFlight slots that end", func() {
	oneInFlight := func(n *remediationv1alpha1.NodeHealthCheck) {
		one := intstr.FromInt32(1)
		n.Spec.MaxInFlight = &one
	}

	It("are freed by a remediation whose steps are exhausted, which the condition, an event and the metric report", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 5 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		dead := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, oneInFlight, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = nil
			n.Spec.EscalatingRemediations = []remediationv1alpha1.EscalatingRemediation{stepTemplate(ctx, kindA, 1, time.Hour, false)}
		})
		Eventually(e.CRsOf(ctx, dead.Name, kindA)).Should(HaveLen(1))
		next := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		Eventually(heldBack(ctx, n, next.Name)).Should(BeTrue())

		By("the only step fails: nothing is left to try, and the slot is free")
		failed := e.CRsOf(ctx, dead.Name, kindA)()[0]
		setCondition(ctx, &failed, map[string]any{"type": remediationv1alpha1.RemediationConditionSucceeded, "status": "False", "reason": "Failed", "message": "",
			"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})
		Eventually(func() bool { crs := e.CRsOf(ctx, dead.Name, kindA)(); return len(crs) == 1 && timedOut(crs[0]) }).Should(BeTrue())
		Eventually(e.CRsOf(ctx, next.Name, kindA)).Should(HaveLen(1), "the next node takes the slot")
		Eventually(stalledCondition(ctx, n)).Should(And(Not(BeNil()), HaveField("Reason", remediationv1alpha1.ConditionReasonStepsExhausted),
			HaveField("Message", ContainSubstring("node %s is still unhealthy and every remediation step timed out or failed", dead.Name))))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationStalled)).Should(ContainElement(ContainSubstring("Node %s is still unhealthy", dead.Name)))
		Expect(stalledGauge(n.Name, dead.Name)).To(Equal(1.0))

		By("the dead node recovers: the condition and the series go")
		e.SetReady(ctx, dead, corev1.ConditionTrue, 0)
		Eventually(stalledCondition(ctx, n)).Should(BeNil())
		Eventually(func() float64 { return stalledGauge(n.Name, dead.Name) }).Should(Equal(-1.0))
	})

	It("are freed by a node waiting for manual confirmation", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 5 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		first := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, oneInFlight, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.HealthyDelay = &metav1.Duration{Duration: -1}
		})
		Eventually(e.TestCRs(ctx, first.Name)).Should(HaveLen(1))
		next := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		Eventually(heldBack(ctx, n, next.Name)).Should(BeTrue())

		By("the first recovers: its CR waits for an administrator, and the next node takes the slot")
		e.SetReady(ctx, first, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, next.Name)).Should(HaveLen(1))
		Expect(e.TestCRs(ctx, first.Name)()).To(HaveLen(1), "kept until confirmed")
		Eventually(stalledCondition(ctx, n)).Should(And(Not(BeNil()), HaveField("Reason", remediationv1alpha1.ConditionReasonAwaitingConfirmation)))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationStalled)).Should(ContainElement(ContainSubstring("wait for manual confirmation")))
	})

	It("are held by the CRs of a node deleted for replacement, until its remediator is done", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 5 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		replaced := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, oneInFlight)
		Eventually(e.TestCRs(ctx, replaced.Name)).Should(HaveLen(1))
		cr := e.TestCRs(ctx, replaced.Name)()[0]
		setCondition(ctx, &cr, map[string]any{"type": remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected, "status": "True",
			"reason": "MachineDeletion", "message": "", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})

		By("the remediator deletes the node: its CR stays, and still holds the slot")
		Expect(e.K8s.Delete(ctx, replaced)).To(Succeed())
		next := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		Eventually(heldBack(ctx, n, next.Name)).Should(BeTrue())
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("1 of them no longer selected, their CRs kept: being replaced"))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, next.Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.TestCRs(ctx, replaced.Name)()).To(HaveLen(1))

		By("the remediator reports success: the CR goes, and the slot with it")
		setCondition(ctx, &cr,
			map[string]any{"type": remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected, "status": "True", "reason": "MachineDeletion", "message": "",
				"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)},
			map[string]any{"type": remediationv1alpha1.RemediationConditionSucceeded, "status": "True", "reason": "Replaced", "message": "",
				"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})
		Eventually(e.TestCRs(ctx, replaced.Name)).Should(BeEmpty())
		Eventually(e.TestCRs(ctx, next.Name)).Should(HaveLen(1))
	})
})

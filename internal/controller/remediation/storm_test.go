package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

func conditionStatus(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, conditionType string) func() metav1.ConditionStatus {
	return func() metav1.ConditionStatus {
		c := meta.FindStatusCondition(e.Status(ctx, n)().Conditions, conditionType)
		if c == nil {
			return ""
		}
		Expect(c.Reason).To(Equal(remediationv1alpha1.ConditionReasonHealthyNodeThresholdChange))
		return c.Status
	}
}

var _ = Describe("Storm recovery", func() {
	It("starts on a threshold violation, cools down, is interrupted by a new violation, and ends", func(ctx SpecContext) {
		n, group, nodes := poolOfFour(ctx, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.StormCooldownDuration = &metav1.Duration{Duration: 10 * time.Minute}
		})
		stormActive := conditionStatus(ctx, n, remediationv1alpha1.ConditionTypeStormActive)
		cooling := conditionStatus(ctx, n, remediationv1alpha1.ConditionTypeStormCooldownActive)
		Eventually(stormActive).Should(Equal(metav1.ConditionFalse), "re-evaluated while every node is healthy")

		// A remediation running throughout: its node never counts healthy, so the counts below stay
		// those of the four nodes, and the remediation controller renews its lease at each step of 5
		// minutes, which shows it looked then.
		running := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.SetReady(ctx, running, corev1.ConditionUnknown, time.Hour)
		Eventually(e.TestCRs(ctx, running.Name)).Should(HaveLen(1))

		// Two of four fail and become due at the same moment: 2 healthy, 3 required. (Failing them one
		// after the other would rightly remediate the first while the threshold still held.)
		e.SetReady(ctx, nodes[0], corev1.ConditionUnknown, 0)
		e.SetReady(ctx, nodes[1], corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(stormActive).Should(Equal(metav1.ConditionTrue))
		Expect(cooling()).To(Equal(metav1.ConditionFalse))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonStormRecoveryStarted))
		Expect(heldBack(ctx, n, nodes[0].Name)()).To(BeTrue(), "listed without remediations")
		Expect(heldBack(ctx, n, nodes[1].Name)()).To(BeTrue(), "listed without remediations")

		// One comes back by itself: the threshold holds, the cooldown starts; the other still waits.
		e.SetReady(ctx, nodes[1], corev1.ConditionTrue, 0)
		Eventually(cooling).Should(Equal(metav1.ConditionTrue))
		Expect(stormActive()).To(Equal(metav1.ConditionTrue))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonStormRecoveryCooldownStarted))
		e.Step(ctx, 5*time.Minute)
		renewedNow(ctx, running.Name)
		Consistently(e.TestCRs(ctx, nodes[0].Name)).WithTimeout(time.Second).Should(BeEmpty())

		// A new violation interrupts the cooldown.
		e.SetReady(ctx, nodes[2], corev1.ConditionUnknown, time.Hour)
		Eventually(cooling).Should(Equal(metav1.ConditionFalse))
		Expect(stormActive()).To(Equal(metav1.ConditionTrue))
		e.SetReady(ctx, nodes[2], corev1.ConditionTrue, 0)
		Eventually(cooling).Should(Equal(metav1.ConditionTrue))

		// The first cooldown's end passes without effect; the new one's end ends the storm, and the
		// waiting node is remediated in the same reconcile.
		e.Step(ctx, 5*time.Minute)
		// A new healthy node keeps the threshold; the status counting it shows the nhc controller looked.
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.SeenHealthy(ctx, n, 4)
		Consistently(stormActive).WithTimeout(time.Second).Should(Equal(metav1.ConditionTrue))
		e.Step(ctx, 5*time.Minute)
		Eventually(stormActive).Should(Equal(metav1.ConditionFalse))
		Expect(cooling()).To(Equal(metav1.ConditionFalse))
		Eventually(e.TestCRs(ctx, nodes[0].Name)).Should(HaveLen(1))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonStormRecoveryEnded))
	})
})

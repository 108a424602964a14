package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
)

// budgetGauge returns the repair-budget gauge of the node (-1: no series).
func budgetGauge(nhcName, node string) float64 {
	return gauge(nhc.MetricRepairBudgetExhausted, map[string]string{"nhc": nhcName, "node": node})
}

func history(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, node string) func() []metav1.Time {
	return func() []metav1.Time {
		for _, h := range e.Status(ctx, n)().RemediationHistory {
			if h.Name == node {
				return h.Started
			}
		}
		return nil
	}
}

var _ = Describe("The repair budget", func() {
	It("holds back a node remediated maxRemediations times within the window, says so, and is reset by the annotation", func(ctx SpecContext) {
		// The window is compared with the CRs' creationTimestamps (the API server's clock).
		e.Clock.SetTime(time.Now().Truncate(time.Second).Add(-time.Second))
		n, _, nodes := poolOfFour(ctx, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RepairBudget = &remediationv1alpha1.RepairBudget{MaxRemediations: 1, Window: metav1.Duration{Duration: 24 * time.Hour}}
		})
		node := nodes[0]

		By("the first failure is remediated, and its start recorded in status")
		e.SetReady(ctx, node, corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(e.TestCRs(ctx, node.Name)).Should(HaveLen(1))
		Eventually(history(ctx, n, node.Name)).Should(HaveLen(1))

		By("it recovers; its next failure within the window is not remediated")
		e.SetReady(ctx, node, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, node.Name)).Should(BeEmpty())
		e.Step(ctx, 2*returnGrace) // past the returning-node hold
		e.SetReady(ctx, node, corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(heldBack(ctx, n, node.Name)).Should(BeTrue())
		Eventually(func() string {
			c := meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeRepairBudgetExhausted)
			if c == nil {
				return ""
			}
			return c.Message
		}).Should(And(ContainSubstring("node %s was remediated 1 time(s) within 24h0m0s", node.Name), ContainSubstring(remediationv1alpha1.RepairBudgetResetAnnotation)))
		Eventually(e.RelatedEvents(ctx, n.Name, node.Name)).Should(ContainElement(remediationv1alpha1.EventReasonRepairBudgetExhausted))
		Expect(budgetGauge(n.Name, node.Name)).To(Equal(1.0))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, node.Name)).WithTimeout(time.Second).Should(BeEmpty())
		// The count is in the API: a decision made afresh from it (as after a restart) holds the node back too.
		Expect(decisions(ctx, n, nodes)()[0]).To(Equal("Skip RepairBudgetExhausted"))

		By("the node resets its own budget, as its kubelet may write any annotation on it: ignored, and said so")
		now := time.Now().UTC().Format(time.RFC3339)
		patch := []byte(`{"metadata":{"annotations":{"` + remediationv1alpha1.RepairBudgetResetAnnotation + `":"` + now + `"}}}`)
		Expect(e.K8s.Patch(ctx, node, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		Eventually(e.EventNotes(ctx, node.Name, remediationv1alpha1.EventReasonInvalidNodeAnnotation)).Should(ContainElement(
			And(ContainSubstring(`%s="%s" on node %s is ignored: the node's own kubelet may write it`, remediationv1alpha1.RepairBudgetResetAnnotation, now, node.Name),
				ContainSubstring("set %s=%s=<time> on NodeHealthCheck %s", remediationv1alpha1.RepairBudgetResetAnnotation, node.Name, n.Name))))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, node.Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("a reset on the NodeHealthCheck that is not a time is ignored, and said so")
		patch = []byte(`{"metadata":{"annotations":{"` + remediationv1alpha1.RepairBudgetResetAnnotation + `":"` + node.Name + `=yesterday"}}}`)
		Expect(e.K8s.Patch(ctx, n, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonInvalidAnnotation)).Should(ContainElement(
			ContainSubstring(`entry "%s=yesterday" is not an RFC 3339 time`, node.Name)))
		Expect(decisions(ctx, n, nodes)()[0]).To(Equal("Skip RepairBudgetExhausted"))

		By("an administrator resets the node's budget on the NodeHealthCheck: the node is remediated")
		patch = []byte(`{"metadata":{"annotations":{"` + remediationv1alpha1.RepairBudgetResetAnnotation + `":"` + node.Name + `=` + time.Now().UTC().Format(time.RFC3339) + `"}}}`)
		Expect(e.K8s.Patch(ctx, n, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		Eventually(e.TestCRs(ctx, node.Name)).Should(HaveLen(1))
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeRepairBudgetExhausted)
		}).Should(BeNil())
		Eventually(func() float64 { return budgetGauge(n.Name, node.Name) }).Should(Equal(-1.0))
	})

	It("never counts a dry-run NodeHealthCheck's simulated starts once dry-run is turned off", func(ctx SpecContext) {
		e.Clock.SetTime(time.Now().Truncate(time.Second).Add(-time.Second))
		n, _, nodes := poolOfFour(ctx, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.DryRun = true
			n.Spec.RepairBudget = &remediationv1alpha1.RepairBudget{MaxRemediations: 1, Window: metav1.Duration{Duration: 24 * time.Hour}}
		})
		node := nodes[0]
		dryRunHistory := func() []remediationv1alpha1.NodeRemediationHistory {
			return e.Status(ctx, n)().DryRunRemediationHistory
		}

		By("dry-run: the failure would be remediated; its start is recorded apart from the real ones")
		e.SetReady(ctx, node, corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(dryRunHistory).Should(ConsistOf(And(HaveField("Name", node.Name), HaveField("Started", HaveLen(1)))))
		Expect(history(ctx, n, node.Name)()).To(BeEmpty())

		By("it recovers and fails again: the dry-run budget holds it back, as the active one would")
		e.SetReady(ctx, node, corev1.ConditionTrue, 0)
		Eventually(simulated(ctx, n, node.Name)).Should(BeEmpty())
		e.Step(ctx, 2*returnGrace)
		e.SetReady(ctx, node, corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(decisions(ctx, n, nodes)).Should(HaveExactElements("Skip RepairBudgetExhausted", "no action", "no action", "no action"))

		By("dry-run off: the real budget is untouched, so the node is remediated, and only that start counts")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
			n.Spec.DryRun = false
			return e.K8s.Update(ctx, n)
		})).To(Succeed())
		Eventually(e.TestCRs(ctx, node.Name)).Should(HaveLen(1))
		Eventually(history(ctx, n, node.Name)).Should(HaveLen(1))
		Eventually(dryRunHistory).Should(BeEmpty())
	})
})

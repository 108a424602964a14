package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
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

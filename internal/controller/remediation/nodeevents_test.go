package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

var _ = Describe("A node's remediation in the node's own events", func() {
	It("shows its start and its end regarding the Node, related to the NodeHealthCheck (kubectl describe node)", func(ctx SpecContext) {
		group := e.Unique("g")
		sick := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		for range 3 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		n := e.NewNHC(ctx, group)
		Eventually(func() *int { return e.Status(ctx, n)().HealthyNodes }).Should(HaveValue(Equal(4)))

		e.SetReady(ctx, sick, corev1.ConditionUnknown, time.Hour) // its duration passed
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		onNode := func(reason string) func() []string {
			return func() []string {
				var notes []string
				for _, ev := range listEvents(ctx, sick.Name, reason) {
					if ev.Regarding.Kind == "Node" && ev.Related != nil && ev.Related.Name == n.Name {
						notes = append(notes, ev.Note)
					}
				}
				return notes
			}
		}
		Eventually(onNode(remediationv1alpha1.EventReasonRemediationCreated)).Should(ConsistOf(ContainSubstring("for node %s", sick.Name)))

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
		Eventually(onNode(remediationv1alpha1.EventReasonRemediationRemoved)).Should(ConsistOf(ContainSubstring("of node %s", sick.Name)))
	})
})

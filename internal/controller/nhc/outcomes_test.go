package nhc_test

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// Every outcome, as the whole operator records it from what the remediation controller does, is
// specified in the operator suite: internal/controller/remediation/operator_outcomes_test.go.
var _ = Describe("Remediation outcomes", func() {
	// Here the specs play the remediation controller: they create and delete the CRs.
	It("records each ended remediation once when many end together, over batched status writes", func(ctx SpecContext) {
		const recovering = 4
		group := e.Unique("g")
		for range 6 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		var sick []*corev1.Node
		for range recovering {
			sick = append(sick, e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour))
		}
		n := e.NewNHC(ctx, group)
		var names []string
		for _, node := range sick {
			e.NewCR(ctx, n, node.Name)
			names = append(names, node.Name)
		}
		Eventually(e.Status(ctx, n)).Should(And(remediating(recovering), WithTransform(testutil.Listed, ConsistOf(names))))

		mark := requests.Mark()
		for _, node := range sick {
			e.SetReady(ctx, node, corev1.ConditionTrue, 0)
			crs := e.TestCRs(ctx, node.Name)()
			Expect(crs).To(HaveLen(1))
			Expect(e.K8s.Delete(ctx, &crs[0])).To(Succeed())
		}
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(BeEmpty())
		st := e.Status(ctx, n)()
		Expect(st.RemediationOutcomes).To(HaveLen(recovering))
		for _, r := range st.RemediationOutcomes {
			Expect(r.Outcomes).To(ConsistOf(HaveField("Outcome", remediationv1alpha1.OutcomeHealthy)), "node %s", r.Name)
		}
		Expect(len(requests.Since(mark, statusWrites(n)))).To(BeNumerically("<", 2*recovering), "the writes were batched")
		count := func() float64 {
			m := testutil.Series(nhc.MetricRemediationOutcomes, map[string]string{"nhc": n.Name, "outcome": string(remediationv1alpha1.OutcomeHealthy), "step": strconv.Itoa(1)})
			if m == nil {
				return 0
			}
			return m.GetCounter().GetValue()
		}
		Eventually(count).Should(BeNumerically("==", recovering))
		// Reconciles after the last write find nothing new; a new failure written after them shows the
		// controller got past them.
		for range 3 {
			e.Touch(ctx, n)
		}
		last := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(last.Name))
		Expect(count()).To(BeNumerically("==", recovering), "each counted once")
		Expect(e.Status(ctx, n)().RemediationOutcomes).To(HaveLen(recovering))
	})
})

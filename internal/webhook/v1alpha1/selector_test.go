package v1alpha1_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

var _ = Describe("A NodeHealthCheck stored with an empty selector (webhook)", func() {
	It("can still be updated, to pause it in an incident, with a warning; its selector stays optional until set", func(ctx SpecContext) {
		// Stored before the rule, or with the webhook off: the CRD admits an empty selector.
		nhc := testutil.NewNHC(uniqueName("legacy"))
		storeUndecodable(ctx, undecodable(nhc, map[string]any{}, "spec", "selector"))
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(webhookClient.Delete(ctx, &remediationv1alpha1.NodeHealthCheck{ObjectMeta: nhc.ObjectMeta}))).To(Succeed())
		})

		c, rec := warningClient()
		got := &remediationv1alpha1.NodeHealthCheck{}
		Expect(c.Get(ctx, client.ObjectKeyFromObject(nhc), got)).To(Succeed())
		Expect(got.Spec.Selector.MatchLabels).To(BeEmpty())
		got.Spec.PauseRequests = []string{"incident 42"}
		Expect(c.Update(ctx, got)).To(Succeed())
		Expect(rec.warnings).To(ContainElement(ContainSubstring("spec.selector is empty and selects every node")))

		By("once it has a selector, emptying it again is refused")
		got.Spec.Selector = testutil.WorkerSelector()
		Expect(c.Update(ctx, got)).To(Succeed())
		got.Spec.Selector.MatchLabels, got.Spec.Selector.MatchExpressions = nil, nil
		err := c.Update(ctx, got)
		Expect(causeFields(err)).To(ConsistOf("spec.selector"), "refusal: %v", err)
		Expect(err.Error()).To(ContainSubstring("selector is mandatory"))
	})
})

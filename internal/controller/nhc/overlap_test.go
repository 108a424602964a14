package nhc_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// overlapMessage returns the SelectorOverlap condition's message ("" without the condition).
func overlapMessage(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck) func() string {
	return func() string {
		if c := meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeSelectorOverlap); c != nil {
			return c.Reason + ": " + c.Message
		}
		return ""
	}
}

var _ = Describe("Overlapping selectors", func() {
	It("are reported on both NodeHealthChecks while they last, with an event when it starts", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		first := e.NewNHC(ctx, group)
		Eventually(e.Status(ctx, first)).Should(counts(2, 2))
		Expect(overlapMessage(ctx, first)()).To(BeEmpty())

		// A second one selecting the same two nodes with another selector.
		second := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{testutil.GroupLabel: group}, MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpDoesNotExist}}}
		})
		Eventually(overlapMessage(ctx, first)).Should(And(HavePrefix(remediationv1alpha1.ConditionReasonOverlappingSelectors),
			ContainSubstring("%s (2 node(s))", second.Name)))
		Eventually(overlapMessage(ctx, second)).Should(ContainSubstring("%s (2 node(s))", first.Name))
		Eventually(e.Events(ctx, first.Name)).Should(ContainElement(remediationv1alpha1.EventReasonSelectorOverlap))
		Eventually(e.Events(ctx, second.Name)).Should(ContainElement(remediationv1alpha1.EventReasonSelectorOverlap))

		// The second one goes: the first no longer overlaps.
		Expect(e.K8s.Delete(ctx, second)).To(Succeed())
		Eventually(overlapMessage(ctx, first)).Should(BeEmpty())
	})
})

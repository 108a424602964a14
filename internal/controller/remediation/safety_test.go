package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

func label(ctx context.Context, n *corev1.Node, key, value string) {
	Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
	n.Labels[key] = value
	Expect(e.K8s.Update(ctx, n)).To(Succeed())
}

var _ = Describe("Safety rules", func() {
	DescribeTable("the exclusion label holds a node back only with the value \"true\", and warns about an empty value",
		func(ctx SpecContext, value string, excluded bool, warned bool) {
			group := e.Unique("g")
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			sick := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			label(ctx, sick, remediationv1alpha1.ExcludeFromRemediationLabel, value)
			e.SetReady(ctx, sick, corev1.ConditionUnknown, time.Hour)
			n := e.NewNHC(ctx, group)
			if excluded {
				Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(And(ContainSubstring("excluded by label"), ContainSubstring(sick.Name)),
					"an excluded node is still listed as unhealthy, in the reason")
				Expect(e.Status(ctx, n)().HealthyNodes).To(PointTo(Equal(2)), "an excluded unhealthy node is counted unhealthy")
				Expect(heldBack(ctx, n, sick.Name)()).To(BeTrue(), "and listed without remediations")
				// Another node fails (one more healthy node keeps the budget): its CR shows the
				// remediation controller looked at the excluded one too.
				e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
				other := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
				Eventually(e.TestCRs(ctx, other.Name)).Should(HaveLen(1))
				Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(BeEmpty())
			} else {
				Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
				e.SeenHealthy(ctx, n, 2) // the nhc controller, which warns, saw the node and its label
			}
			if warned {
				Eventually(e.Events(ctx, sick.Name)).Should(ContainElement(remediationv1alpha1.EventReasonInvalidNodeLabel))
			} else {
				Consistently(e.Events(ctx, sick.Name)).WithTimeout(500 * time.Millisecond).ShouldNot(ContainElement(remediationv1alpha1.EventReasonInvalidNodeLabel))
			}
		},
		Entry(`"true" excludes`, "true", true, false),
		Entry("an empty value is ignored with a warning", "", false, true),
		Entry("any other value is ignored", "yes", false, false),
	)

	It("remediates two unhealthy control-plane nodes one after the other", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 2 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		var cps []*corev1.Node
		for range 2 {
			cp := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			label(ctx, cp, remediationcr.ControlPlaneRoleLabel, "")
			e.SetReady(ctx, cp, corev1.ConditionUnknown, time.Hour)
			cps = append(cps, cp)
		}
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(1); n.Spec.MinHealthy = &v })

		crCount := func() int { return len(e.TestCRs(ctx, cps[0].Name)()) + len(e.TestCRs(ctx, cps[1].Name)()) }
		Eventually(crCount).Should(Equal(1))
		e.RemediationDecided(ctx, n)
		Consistently(crCount).WithTimeout(time.Second).Should(Equal(1), "never both at once")
		first, second := cps[0], cps[1]
		if len(e.TestCRs(ctx, first.Name)()) == 0 {
			first, second = second, first
		}
		Eventually(heldBack(ctx, n, second.Name)).Should(BeTrue(), "the waiting one is listed without remediations")
		e.SetReady(ctx, first, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, first.Name)).Should(BeEmpty())
		Eventually(e.TestCRs(ctx, second.Name)).Should(HaveLen(1))
	})

	It("decides from the cache's indexes of the CRs and of the control-plane nodes", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 2 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		cp := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		label(ctx, cp, remediationcr.ControlPlaneRoleLabel, "")
		e.SetReady(ctx, cp, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, cp.Name)).Should(HaveLen(1))
		for name, g := range map[string]*targets.Gatherer{"nhc": controllers.NHC.Wiring.Gatherer, "remediation": controllers.Remediation.Wiring.Gatherer} {
			store, ok, err := g.Indexes.CRs(ctx, testutil.TestRemediationKind)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue(), "the %s controller's gatherer has no index of the CRs", name)
			byIndex := func(index, value string) func() []string {
				return func() []string {
					objs, err := store.ByIndex(index, value)
					Expect(err).NotTo(HaveOccurred())
					var names []string
					for _, o := range objs {
						names = append(names, o.(client.Object).GetName())
					}
					return names
				}
			}
			// The API server showed the CR; the cache shows it a moment later.
			Eventually(byIndex(targets.CROwnerIndex, string(n.UID))).Should(ConsistOf(cp.Name), name)
			Expect(byIndex(targets.CRNodeIndex, cp.Name)()).To(ConsistOf(cp.Name), name)
			Expect(byIndex(targets.CRControlPlaneIndex, "true")()).To(ContainElement(cp.Name), name)
			nodes, ok := g.Indexes.Nodes()
			Expect(ok).To(BeTrue(), "the %s controller's gatherer has no index of the nodes", name)
			cps, err := nodes.ByIndex(targets.NodeControlPlaneIndex, "true")
			Expect(err).NotTo(HaveOccurred())
			Expect(cps).To(ContainElement(HaveField("ObjectMeta.Name", cp.Name)), name)
		}
	})
})

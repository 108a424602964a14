package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// poolOfFour creates four healthy nodes of a new group and a NodeHealthCheck selecting the group
// with minHealthy 3, changed by mutate (testutil's NewPool), and returns the group too.
func poolOfFour(ctx context.Context, mutate ...func(*remediationv1alpha1.NodeHealthCheck)) (*remediationv1alpha1.NodeHealthCheck, string, []*corev1.Node) {
	n, nodes := e.NewPool(ctx, 4, append([]func(*remediationv1alpha1.NodeHealthCheck){func(n *remediationv1alpha1.NodeHealthCheck) {
		v := intstr.FromInt32(3)
		n.Spec.MinHealthy = &v
	}}, mutate...)...)
	return n, nodes[0].Labels[testutil.GroupLabel], nodes
}

// outage makes three nodes of a pool of four fail at once (due at the same moment: 1 healthy, 3
// required), and waits until the three are listed and held back. The suite's clock is brought up to
// real time once the nodes exist: the failures' transition times are on it, and the nodes' creation
// times on the API server's, so a clock behind it (early in a suite process, before any spec stepped
// it; or set to real time a moment before the nodes were created, in the second before theirs) would
// date the failures before the nodes existed, which no node lifecycle does.
func outage(ctx context.Context) (*remediationv1alpha1.NodeHealthCheck, []*corev1.Node) {
	GinkgoHelper()
	n, _, nodes := poolOfFour(ctx)
	if now := time.Now(); e.Clock.Now().Before(now) {
		e.Clock.SetTime(now)
	}
	for _, node := range nodes[:3] {
		e.SetReady(ctx, node, corev1.ConditionUnknown, 0)
	}
	e.Step(ctx, 5*time.Minute)
	for _, node := range nodes[:3] {
		Eventually(heldBack(ctx, n, node.Name)).Should(BeTrue())
	}
	return n, nodes
}

// The suite runs with a returning-node grace of returnGrace (suite_test.go).
var _ = Describe("Nodes coming back after an outage", func() {
	It("are not remediated while the threshold holds only thanks to the nodes that came back; an isolated failure is not delayed", func(ctx SpecContext) {
		n, nodes := outage(ctx)

		// Two come back: 3 healthy, 3 required, but only thanks to the two that just came back. The
		// third one, likely coming back too, waits.
		e.SetReady(ctx, nodes[1], corev1.ConditionTrue, 0)
		e.SetReady(ctx, nodes[2], corev1.ConditionTrue, 0)
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(And(
			ContainSubstring("3 of 4 selected nodes are healthy, 3 required, but 2 of them came back less than 1m0s ago"),
			ContainSubstring(nodes[0].Name)))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[0].Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(heldBack(ctx, n, nodes[0].Name)()).To(BeTrue(), "listed without remediations")

		// Half the grace later it still waits; once both have been back for the grace, it is
		// remediated.
		e.Step(ctx, returnGrace/2)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[0].Name)).WithTimeout(time.Second).Should(BeEmpty())
		e.Step(ctx, returnGrace/2)
		Eventually(e.TestCRs(ctx, nodes[0].Name)).Should(HaveLen(1))

		// Meanwhile, in a pool that did not have an outage, a node that fails is remediated at once,
		// although nodes came back elsewhere a moment ago.
		_, _, steady := poolOfFour(ctx)
		e.SetReady(ctx, steady[0], corev1.ConditionUnknown, 10*time.Minute)
		Eventually(e.TestCRs(ctx, steady[0].Name)).Should(HaveLen(1))
	})

	It("are recognised by what the watch showed, when their condition keeps an old transition time", func(ctx SpecContext) {
		n, nodes := outage(ctx)

		// Two come back as kwok's stock stages bring a node back: Ready again, with the node's
		// creation time as the condition's lastTransitionTime.
		for _, node := range nodes[1:3] {
			e.SetReady(ctx, node, corev1.ConditionTrue, e.Clock.Since(node.CreationTimestamp.Time))
		}
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(
			ContainSubstring("3 of 4 selected nodes are healthy, 3 required, but 2 of them came back less than 1m0s ago"))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[0].Name)).WithTimeout(time.Second).Should(BeEmpty())

		e.Step(ctx, returnGrace)
		Eventually(e.TestCRs(ctx, nodes[0].Name)).Should(HaveLen(1))
	})
})

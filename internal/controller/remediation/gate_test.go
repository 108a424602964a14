package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// heldNote matches the remediation controller's own note that it held a node's escalation (the
// nhc controller's notes say so in other words): a witness that the remediation controller decided.
func heldNote(node string) OmegaMatcher {
	return And(ContainSubstring("Escalation of node %s held", node), ContainSubstring("the next step is decided again once nothing holds it"))
}

var _ = Describe("One gate for every new CR", func() {

	twoSteps := func(ctx context.Context) []remediationv1alpha1.EscalatingRemediation {
		return []remediationv1alpha1.EscalatingRemediation{stepTemplate(ctx, kindA, 1, time.Minute, false), stepTemplate(ctx, kindB, 2, 5*time.Minute, false)}
	}

	It("holds a running remediation's next step while paused, renewing its lease and saying so; the step is decided again once unpaused", func(ctx SpecContext) {
		n, sick := escalatingNHC(ctx, twoSteps(ctx)...)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(1))
		pause(ctx, n, "rack A is being recabled, by @admin")
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhasePaused))

		elapse(ctx, n, 2*time.Minute) // past the first step's timeout, and its lease's renewal
		renewedNow(ctx, sick.Name)    // the remediation controller decided after the step timed out
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			And(heldNote(sick.Name), ContainSubstring("rack A is being recabled"))))
		Consistently(e.CRsOf(ctx, sick.Name, stepKinds...)).WithTimeout(time.Second).Should(HaveLen(1))
		Expect(timedOut(e.CRsOf(ctx, sick.Name, stepKinds...)()[0])).To(BeFalse(), "the running step is not told to stop while the gate is closed")
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("escalation of node %s held", sick.Name))

		pause(ctx, n)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(2))
		crs := e.CRsOf(ctx, sick.Name, stepKinds...)()
		Expect(timedOut(crs[0])).To(BeTrue())
		Expect(crs[1].GetKind()).To(Equal(kindB.Kind))
	})

	It("holds a running remediation's next step while the healthy-node threshold is violated (a partition), and while nodes are returning", func(ctx SpecContext) {
		group := e.Unique("g")
		var nodes []*corev1.Node
		for range 4 {
			nodes = append(nodes, e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour))
		}
		steps := twoSteps(ctx)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate, n.Spec.EscalatingRemediations = nil, steps
			n.Spec.MinHealthy = ptr.To(intstr.FromInt32(3))
		})
		e.SetReady(ctx, nodes[0], corev1.ConditionUnknown, time.Hour)
		Eventually(e.CRsOf(ctx, nodes[0].Name, stepKinds...)).Should(HaveLen(1))
		// The rest of the rack goes: 2 of 4 healthy, 3 required.
		e.SetReady(ctx, nodes[1], corev1.ConditionUnknown, time.Hour)
		Eventually(heldBack(ctx, n, nodes[1].Name)).Should(BeTrue())

		elapse(ctx, n, 2*time.Minute)
		renewedNow(ctx, nodes[0].Name)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			And(heldNote(nodes[0].Name), ContainSubstring("2 of 4 selected nodes are healthy, 3 required"))))
		Consistently(e.CRsOf(ctx, nodes[0].Name, stepKinds...)).WithTimeout(time.Second).Should(HaveLen(1))
		Expect(e.CRsOf(ctx, nodes[1].Name, stepKinds...)()).To(BeEmpty())

		// The partition heals but for the first node: the threshold holds only with a node that came
		// back just now, and the escalation waits for the returning-node grace too.
		e.SetReady(ctx, nodes[1], corev1.ConditionTrue, 0)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			And(heldNote(nodes[0].Name), ContainSubstring("came back less than"))))
		Consistently(e.CRsOf(ctx, nodes[0].Name, stepKinds...)).WithTimeout(time.Second).Should(HaveLen(1))
		elapse(ctx, n, returnGrace)
		Eventually(e.CRsOf(ctx, nodes[0].Name, stepKinds...)).Should(HaveLen(2))
	})

	It("holds a running remediation's next step while someone else holds the node's lease, and goes on once it is released", func(ctx SpecContext) {
		n, sick := escalatingNHC(ctx, twoSteps(ctx)...)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(1))
		Eventually(nodeLease(ctx, sick.Name)).ShouldNot(BeNil())
		// Node maintenance takes the lease (as after the operator was down longer than the lease).
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l := nodeLease(ctx, sick.Name)()
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To("node-maintenance"), ptr.To[int32](3600)
			l.Spec.AcquireTime, l.Spec.RenewTime = &metav1.MicroTime{Time: e.Clock.Now()}, &metav1.MicroTime{Time: e.Clock.Now()}
			return e.K8s.Update(ctx, l)
		})).To(Succeed())

		elapse(ctx, n, 2*time.Minute)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			And(heldNote(sick.Name), ContainSubstring("leased by node-maintenance"))))
		Consistently(e.CRsOf(ctx, sick.Name, stepKinds...)).WithTimeout(time.Second).Should(HaveLen(1))
		Expect(timedOut(e.CRsOf(ctx, sick.Name, stepKinds...)()[0])).To(BeFalse())
		Expect(nodeLease(ctx, sick.Name)().Spec.HolderIdentity).To(PointTo(Equal("node-maintenance")), "their lease is left as they wrote it")
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("node %s is leased by node-maintenance", sick.Name))

		// Released: the lease's deletion alone brings the decision back (no clock step, no poke).
		Expect(e.K8s.Delete(ctx, nodeLease(ctx, sick.Name)())).To(Succeed())
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(2))
		Eventually(nodeLease(ctx, sick.Name)).Should(HaveField("Spec.HolderIdentity", PointTo(Equal("NodeHealthCheck-"+n.Name))))
	})

	It("leaves a paused NodeHealthCheck's CRs of nodes it no longer selects until it is unpaused, and removes those of recovered nodes", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 4 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		gone, back := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour), e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, gone.Name)).Should(HaveLen(1))
		Eventually(e.TestCRs(ctx, back.Name)).Should(HaveLen(1))
		pause(ctx, n, "maintenance")
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhasePaused))

		label(ctx, gone, testutil.GroupLabel, e.Unique("elsewhere"))
		e.SetReady(ctx, back, corev1.ConditionTrue, 0)
		// The remediation controller decided after both changes: it removed the recovered node's CR.
		Eventually(e.TestCRs(ctx, back.Name)).Should(BeEmpty())
		Consistently(e.TestCRs(ctx, gone.Name)).WithTimeout(time.Second).Should(HaveLen(1))

		pause(ctx, n)
		Eventually(e.TestCRs(ctx, gone.Name)).Should(BeEmpty())
	})
})

package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

var _ = Describe("A Node deleted and created again under the same name", func() {
	It("is another node: the earlier Node's CR goes, and the new one is judged afresh, not escalated, even when no watch saw the deletion", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 4 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		sick := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = nil
			n.Spec.EscalatingRemediations = []remediationv1alpha1.EscalatingRemediation{
				stepTemplate(ctx, kindA, 1, time.Minute, false), stepTemplate(ctx, kindB, 2, 2*time.Hour, false)}
		})
		Eventually(e.CRsOf(ctx, sick.Name, kindA)).Should(HaveLen(1))
		earlier := e.CRsOf(ctx, sick.Name, kindA)()[0]
		// Creation times have a resolution of a second: the new Node is created in a later one.
		Eventually(func() bool { return time.Since(earlier.GetCreationTimestamp().Time) > time.Second }).Should(BeTrue())

		By("while no manager runs, the node is deleted and registers again, as unhealthy")
		e.Restart(func(ctx context.Context, c client.Client) {
			Expect(c.Delete(ctx, sick)).To(Succeed())
			again := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: sick.Name, Labels: sick.Labels}}
			Expect(c.Create(ctx, again)).To(Succeed())
			e.SetReady(ctx, again, corev1.ConditionUnknown, time.Hour)
		})

		By("the earlier Node's CR is deleted, with an event saying why, and the new node gets a first step of its own")
		Eventually(func() []unstructured.Unstructured { return e.CRsOf(ctx, sick.Name, kindA)() }).Should(ConsistOf(
			And(WithTransform(func(cr unstructured.Unstructured) bool { return cr.GetUID() != earlier.GetUID() }, BeTrue()),
				WithTransform(func(cr unstructured.Unstructured) bool { return cr.GetDeletionTimestamp() == nil }, BeTrue()))))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationRemoved)).Should(ContainElement(
			ContainSubstring("made for an earlier Node of that name")))
		e.RemediationDecided(ctx, n)
		Expect(e.CRsOf(ctx, sick.Name, kindB)()).To(BeEmpty(), "the earlier Node's step is not escalated for the new node")
		Eventually(func() []remediationv1alpha1.UnhealthyNode { return e.Status(ctx, n)().UnhealthyNodes }).Should(ConsistOf(And(
			HaveField("Name", sick.Name), HaveField("Remediations", ConsistOf(HaveField("Resource.UID", Not(Equal(earlier.GetUID()))))))),
			"the status lists the new node's remediation, not the earlier one's")
	})
})

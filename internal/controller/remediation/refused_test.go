package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

var _ = Describe("A remediation CR the API server refuses for good", func() {
	It("is retried a few times, then held back with the API's message in events and status and the lease released; tried again after the hold", func(ctx SpecContext) {
		tmpl := &unstructured.Unstructured{}
		tmpl.SetAPIVersion("strict.medik8s.io/v1alpha1")
		tmpl.SetKind("StrictRemediationTemplate")
		tmpl.SetNamespace(testutil.TemplateNamespace)
		tmpl.SetName(e.Unique("strict"))
		Expect(unstructured.SetNestedMap(tmpl.Object, map[string]any{"spec": map[string]any{"strategy": "explode"}}, "spec", "template")).To(Succeed())
		e.Create(ctx, tmpl)
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: tmpl.GetAPIVersion(), Kind: tmpl.GetKind(), Namespace: tmpl.GetNamespace(), Name: tmpl.GetName()}
		})
		strictCRs := e.CRsOf(ctx, sick.Name, schema.GroupVersionKind{Group: "strict.medik8s.io", Version: "v1alpha1", Kind: "StrictRemediation"})

		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationRefused)).Should(ContainElement(
			And(ContainSubstring("refused to create StrictRemediation %s/%s (attempt 1 of %d)", testutil.TemplateNamespace, sick.Name, targets.RefusalAttempts),
				ContainSubstring(`Unsupported value: "explode"`))))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationRefused), 30*time.Second).Should(ContainElement(
			ContainSubstring("%d times in a row", targets.RefusalAttempts)))
		// Held back: the lease released, listed without remediations, not Remediating, and why.
		Eventually(nodeLease(ctx, sick.Name)).Should(BeNil())
		Eventually(e.Status(ctx, n)).Should(And(HaveField("Phase", remediationv1alpha1.PhaseEnabled),
			HaveField("Reason", And(ContainSubstring("the API server refused to create the node's StrictRemediation %d times in a row", targets.RefusalAttempts),
				ContainSubstring(`Unsupported value: "explode"`)))))
		Expect(heldBack(ctx, n, sick.Name)()).To(BeTrue())
		Expect(strictCRs()).To(BeEmpty())

		By("the template is fixed; the next attempt, after the hold, succeeds")
		Expect(unstructured.SetNestedField(tmpl.Object, "reboot", "spec", "template", "spec", "strategy")).To(Succeed())
		Expect(e.K8s.Update(ctx, tmpl)).To(Succeed())
		elapse(ctx, n, targets.RefusalHold)
		Eventually(strictCRs).Should(HaveLen(1))
		Eventually(nodeLease(ctx, sick.Name)).ShouldNot(BeNil())
	})
})

package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// The kinds of the escalation steps' CRs.
var (
	kindA     = testutil.TestRemediationKind
	kindB     = testutil.Metal3RemediationKind
	kindC     = testutil.SelfNodeRemediationKind
	stepKinds = []schema.GroupVersionKind{kindA, kindB, kindC}
)

// stepTemplate creates a template of the kind (with multiple-templates support when asked) and
// returns an escalation step for it.
func stepTemplate(ctx context.Context, k schema.GroupVersionKind, order int, timeout time.Duration, multi bool) remediationv1alpha1.EscalatingRemediation {
	t := &unstructured.Unstructured{}
	t.SetAPIVersion(k.GroupVersion().String())
	t.SetKind(k.Kind + "Template")
	t.SetNamespace(testutil.TemplateNamespace)
	t.SetName(e.Unique("step"))
	if multi {
		t.SetAnnotations(map[string]string{remediationv1alpha1.MultipleTemplatesSupportAnnotation: "true"})
	}
	Expect(unstructured.SetNestedMap(t.Object, map[string]any{"spec": map[string]any{"step": int64(order)}}, "spec", "template")).To(Succeed())
	e.Create(ctx, t)
	return remediationv1alpha1.EscalatingRemediation{
		RemediationTemplate: corev1.ObjectReference{APIVersion: k.GroupVersion().String(), Kind: t.GetKind(), Namespace: testutil.TemplateNamespace, Name: t.GetName()},
		Order:               order, Timeout: metav1.Duration{Duration: timeout},
	}
}

func timedOut(cr unstructured.Unstructured) bool {
	return cr.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation] != ""
}

// escalatingNHC creates workers with one unhealthy node and an NHC with the given steps.
func escalatingNHC(ctx context.Context, steps ...remediationv1alpha1.EscalatingRemediation) (*remediationv1alpha1.NodeHealthCheck, *corev1.Node) {
	group, sick := workers(ctx)
	n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.RemediationTemplate = nil
		n.Spec.EscalatingRemediations = steps
	})
	return n, sick
}

// elapse advances the fake clock and makes both controllers look again.
func elapse(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, d time.Duration) {
	e.Step(ctx, d)
	e.Touch(ctx, n)
}

var _ = Describe("Escalating remediations", func() {

	It("runs four steps of kinds A, B, C, C in order, marks each timed-out CR, and removes all when the node recovers", func(ctx SpecContext) {
		steps := []remediationv1alpha1.EscalatingRemediation{
			stepTemplate(ctx, kindC, 40, 4*time.Minute, true),
			stepTemplate(ctx, kindA, 10, time.Minute, false),
			stepTemplate(ctx, kindC, 30, 3*time.Minute, true),
			stepTemplate(ctx, kindB, 20, 2*time.Minute, false),
		}
		byOrder := map[int]string{}
		for _, s := range steps {
			byOrder[s.Order] = s.RemediationTemplate.Name
		}
		n, sick := escalatingNHC(ctx, steps...)

		Eventually(func() []string { return testutil.TemplateNames(e.CRsOf(ctx, sick.Name, stepKinds...)()) }).Should(Equal([]string{byOrder[10]}))
		elapse(ctx, n, 59*time.Second)
		renewedNow(ctx, sick.Name) // the first step's lease lasts 2m: renewed after 40s
		Consistently(func() []string { return testutil.TemplateNames(e.CRsOf(ctx, sick.Name, stepKinds...)()) }).WithTimeout(time.Second).Should(HaveLen(1))

		for i, order := range []int{20, 30, 40} {
			elapse(ctx, n, time.Duration(i+1)*time.Minute+time.Second)
			Eventually(func() []string { return testutil.TemplateNames(e.CRsOf(ctx, sick.Name, stepKinds...)()) }).Should(HaveLen(i + 2))
			crs := e.CRsOf(ctx, sick.Name, stepKinds...)()
			Expect(testutil.TemplateNames(crs)[i+1]).To(Equal(byOrder[order]))
			Expect(timedOut(crs[i])).To(BeTrue(), "the previous step's CR is marked")
			Expect(timedOut(crs[i+1])).To(BeFalse())
		}
		c := e.CRsOf(ctx, sick.Name, stepKinds...)()
		Expect(c[2].GetName()).To(HavePrefix(sick.Name+"-"), "two steps of one kind get generated names")
		Expect(c[3].GetName()).To(HavePrefix(sick.Name + "-"))

		// Status records the timeouts, keyed by kind and template name.
		Eventually(func() []remediationv1alpha1.Remediation {
			st := e.Status(ctx, n)()
			if len(st.UnhealthyNodes) != 1 {
				return nil
			}
			return st.UnhealthyNodes[0].Remediations
		}).Should(HaveLen(4))
		rems := e.Status(ctx, n)().UnhealthyNodes[0].Remediations
		for i := range 3 {
			Expect(rems[i].TimedOut).NotTo(BeNil())
			Expect(rems[i].TemplateName).To(Equal(byOrder[10*(i+1)]))
		}
		Expect(rems[3].TimedOut).To(BeNil())

		// The last step times out: nothing is left; the node stays listed.
		elapse(ctx, n, 4*time.Minute)
		Eventually(func() bool { return timedOut(e.CRsOf(ctx, sick.Name, stepKinds...)()[3]) }).Should(BeTrue())
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonNoTemplateLeft))
		Expect(testutil.Listed(e.Status(ctx, n)())).To(ConsistOf(sick.Name))
		Consistently(e.CRsOf(ctx, sick.Name, stepKinds...)).WithTimeout(time.Second).Should(HaveLen(4))

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(BeEmpty())
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(BeEmpty())
	})

	It("skips ahead at once when a CR reports Succeeded=False", func(ctx SpecContext) {
		n, sick := escalatingNHC(ctx, stepTemplate(ctx, kindA, 1, time.Hour, false), stepTemplate(ctx, kindB, 2, time.Hour, false))
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(1))
		first := e.CRsOf(ctx, sick.Name, stepKinds...)()[0]
		setCondition(ctx, &first, map[string]any{"type": "Succeeded", "status": "False", "reason": "Failed", "message": "", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(2))
		Expect(timedOut(e.CRsOf(ctx, sick.Name, stepKinds...)()[0])).To(BeTrue())
		_ = n
	})

	It("never marks a CR that reports Succeeded=True, but still escalates after its timeout", func(ctx SpecContext) {
		n, sick := escalatingNHC(ctx, stepTemplate(ctx, kindA, 1, time.Minute, false), stepTemplate(ctx, kindB, 2, time.Hour, false))
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(1))
		first := e.CRsOf(ctx, sick.Name, stepKinds...)()[0]
		setCondition(ctx, &first, map[string]any{"type": "Succeeded", "status": "True", "reason": "Done", "message": "", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})
		// Past the timeout; the CR's creationTimestamp may be in the second after the clock's start.
		elapse(ctx, n, time.Minute+2*time.Second)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(2))
		Consistently(func() bool { return timedOut(e.CRsOf(ctx, sick.Name, stepKinds...)()[0]) }).WithTimeout(time.Second).Should(BeFalse())
	})

	It("keeps a step's timer across a restart: it lives in the CR, not in memory", func(ctx SpecContext) {
		n, sick := escalatingNHC(ctx, stepTemplate(ctx, kindA, 1, 10*time.Minute, false), stepTemplate(ctx, kindB, 2, time.Hour, false))
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(1))
		created := e.CRsOf(ctx, sick.Name, stepKinds...)()[0].GetCreationTimestamp().Time
		// Late in the step, so its end comes before the next lease renewal (a third of 11m).
		e.Clock.SetTime(created.Add(8 * time.Minute))

		// A new reconciler, as after a restart of the manager, knows nothing but the API.
		restarted := remediation.Standalone(e.K8s, e.Clock, "", nil)
		res, err := restarted.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(n)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(Equal(2*time.Minute), "the remaining time of the step, not a fresh timeout")
		Expect(e.CRsOf(ctx, sick.Name, stepKinds...)()).To(HaveLen(1))
	})
})

package remediation_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// decisions returns the NodeHealthCheck's decision about each node of its pool, by the node's
// position, gathered from the API server with the controllers' own code.
func decisions(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, pool []*corev1.Node) func() []string {
	return func() []string {
		stored := &remediationv1alpha1.NodeHealthCheck{}
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), stored)).To(Succeed())
		snap, err := (&targets.Gatherer{Reader: e.K8s, ReturnGrace: returnGrace}).Gather(ctx, stored, e.Clock.Now(), targets.Options{Mode: targets.Acting})
		Expect(err).NotTo(HaveOccurred())
		out := make([]string, len(pool))
		for i, node := range pool {
			out[i] = "no action"
			if d, ok := snap.Node(node.Name); ok {
				out[i] = fmt.Sprintf("%v %s", d.Action, d.SkipReason)
			}
		}
		return out
	}
}

// gauge returns the value of the metric's series with exactly these labels (-1: no series).
func gauge(metric string, labels map[string]string) float64 {
	if m := testutil.Series(metric, labels); m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

// wouldRemediate returns the value of the would-remediate gauge for the node (-1: no series).
func wouldRemediate(nhcName, node, kind string) float64 {
	return gauge(nhc.MetricWouldRemediate, map[string]string{"nhc": nhcName, "node": node, "remediation": kind})
}

// simulated returns the dry-run remediations status records for the node.
func simulated(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, node string) func() []remediationv1alpha1.DryRunRemediation {
	return func() []remediationv1alpha1.DryRunRemediation {
		if u := entryOf(ctx, n, node)(); u != nil {
			return u.DryRunRemediations
		}
		return nil
	}
}

var _ = Describe("Dry-run", func() {
	It("makes the decisions the active NodeHealthCheck makes from the same history, reports them, and acts only once turned off", func(ctx SpecContext) {
		// Step timeouts compare the CRs' creationTimestamps (the API server's clock, whole seconds)
		// with the controllers' fake clock: start the fake clock a second behind the API server's, so
		// that a CR created at the first step is not already as old as its step's timeout.
		e.Clock.SetTime(time.Now().Truncate(time.Second).Add(-time.Second))
		steps := []remediationv1alpha1.EscalatingRemediation{
			stepTemplate(ctx, kindA, 1, 5*time.Minute, false),
			stepTemplate(ctx, kindB, 2, 5*time.Minute, false),
		}
		escalating := func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = nil
			n.Spec.EscalatingRemediations = steps
		}
		active, _, a := poolOfFour(ctx, escalating)
		dry, _, b := poolOfFour(ctx, escalating, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.DryRun = true })
		same := func(want ...string) {
			GinkgoHelper()
			Eventually(decisions(ctx, active, a)).Should(Equal(want))
			Eventually(decisions(ctx, dry, b)).Should(Equal(want))
		}
		Expect(decisions(ctx, dry, b)()).To(Equal([]string{"no action", "no action", "no action", "no action"}))

		By("one node fails in each pool: the active one remediates it, the dry-run one would")
		e.SetReady(ctx, a[0], corev1.ConditionUnknown, 0)
		e.SetReady(ctx, b[0], corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(func() []string { return testutil.TemplateNames(e.CRsOf(ctx, a[0].Name, stepKinds...)()) }).Should(Equal([]string{steps[0].RemediationTemplate.Name}))
		Eventually(simulated(ctx, dry, b[0].Name)).Should(
			ConsistOf(HaveField("Template", steps[0].RemediationTemplate)))
		same("ContinueRemediation ", "no action", "no action", "no action")
		e.RemediationDecided(ctx, dry)
		Consistently(e.CRsOf(ctx, b[0].Name, stepKinds...)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(nodeLease(ctx, b[0].Name)()).To(BeNil(), "dry-run takes no lease")
		Expect(nodeLease(ctx, a[0].Name)()).NotTo(BeNil())

		st := e.Status(ctx, dry)()
		Expect(st.ObservedNodes).To(Equal(e.Status(ctx, active)().ObservedNodes))
		Expect(*st.HealthyNodes).To(Equal(3))
		Expect(*e.Status(ctx, active)().HealthyNodes).To(Equal(3))
		Expect(st.Phase).To(Equal(remediationv1alpha1.PhaseEnabled))
		Expect(st.Reason).To(ContainSubstring("Dry run, no remediation starts: would be remediating 1 node(s): " + b[0].Name))
		c := meta.FindStatusCondition(st.Conditions, remediationv1alpha1.ConditionTypeDryRun)
		Expect(c).NotTo(BeNil())
		Expect(c.Reason).To(Equal(remediationv1alpha1.ConditionReasonWouldRemediate))
		Expect(c.Message).To(ContainSubstring("node %s with %s %s/%s", b[0].Name, steps[0].RemediationTemplate.Kind,
			steps[0].RemediationTemplate.Namespace, steps[0].RemediationTemplate.Name))
		Expect(meta.FindStatusCondition(e.Status(ctx, active)().Conditions, remediationv1alpha1.ConditionTypeDryRun)).To(BeNil())
		Eventually(e.RelatedEvents(ctx, dry.Name, b[0].Name)).Should(ContainElement(remediationv1alpha1.EventReasonWouldRemediate))
		Expect(e.RelatedEvents(ctx, active.Name, a[0].Name)()).NotTo(ContainElement(remediationv1alpha1.EventReasonWouldRemediate))
		Expect(wouldRemediate(dry.Name, b[0].Name, kindA.Kind)).To(Equal(1.0))

		By("the first step times out: the active one escalates, the dry-run one would")
		e.Step(ctx, 5*time.Minute)
		Eventually(e.CRsOf(ctx, a[0].Name, stepKinds...)).Should(HaveLen(2))
		Eventually(simulated(ctx, dry, b[0].Name)).Should(HaveExactElements(
			And(HaveField("Template", steps[0].RemediationTemplate), HaveField("TimedOut", Not(BeNil()))),
			And(HaveField("Template", steps[1].RemediationTemplate), HaveField("TimedOut", BeNil()))))
		same("ContinueRemediation ", "no action", "no action", "no action")
		Eventually(e.EventNotes(ctx, dry.Name, remediationv1alpha1.EventReasonWouldRemediate)).Should(ContainElement(
			ContainSubstring("would escalate node %s to %s", b[0].Name, steps[1].RemediationTemplate.Kind)))
		Eventually(func() float64 { return wouldRemediate(dry.Name, b[0].Name, kindB.Kind) }).Should(Equal(1.0))
		Expect(wouldRemediate(dry.Name, b[0].Name, kindA.Kind)).To(Equal(-1.0), "the series of the step that timed out is gone")
		Consistently(e.CRsOf(ctx, b[0].Name, stepKinds...)).WithTimeout(time.Second).Should(BeEmpty())

		By("two more fail: over the threshold in both pools, the new ones are held back and the first continues, its last step's timeout held too")
		for _, pool := range [][]*corev1.Node{a, b} {
			e.SetReady(ctx, pool[1], corev1.ConditionUnknown, 0)
			e.SetReady(ctx, pool[2], corev1.ConditionUnknown, 0)
		}
		e.Step(ctx, 5*time.Minute)
		same("ContinueRemediation HealthyNodeThreshold", "Skip HealthyNodeThreshold", "Skip HealthyNodeThreshold", "no action")
		// (same decides from the API server; the status listing a[1] shows the shared cache has it.)
		Eventually(heldBack(ctx, active, a[1].Name)).Should(BeTrue())
		e.RemediationDecided(ctx, active)
		Consistently(e.CRsOf(ctx, a[1].Name, stepKinds...)).WithTimeout(time.Second).Should(BeEmpty())
		annotations := func(cr unstructured.Unstructured) map[string]string { return cr.GetAnnotations() }
		Expect(e.CRsOf(ctx, a[0].Name, stepKinds...)()).To(HaveExactElements(
			WithTransform(annotations, HaveKey(remediationv1alpha1.NHCTimedOutAnnotation)),
			WithTransform(annotations, Not(HaveKey(remediationv1alpha1.NHCTimedOutAnnotation)))), "the running step is not marked while the gate is closed")
		Expect(simulated(ctx, dry, b[0].Name)()).To(HaveExactElements(HaveField("TimedOut", Not(BeNil())), HaveField("TimedOut", BeNil())))

		By("they recover: the active one's CRs go, the dry-run one's record too")
		for _, pool := range [][]*corev1.Node{a, b} {
			for _, node := range pool[:3] {
				e.SetReady(ctx, node, corev1.ConditionTrue, 0)
			}
		}
		Eventually(e.CRsOf(ctx, a[0].Name, stepKinds...)).Should(BeEmpty())
		Eventually(func() []remediationv1alpha1.UnhealthyNode { return e.Status(ctx, dry)().UnhealthyNodes }).Should(BeEmpty())
		same("no action", "no action", "no action", "no action")
		Eventually(func() float64 { return wouldRemediate(dry.Name, b[0].Name, kindB.Kind) }).Should(Equal(-1.0))
		Expect(meta.FindStatusCondition(e.Status(ctx, dry)().Conditions, remediationv1alpha1.ConditionTypeDryRun).Reason).To(
			Equal(remediationv1alpha1.ConditionReasonNothingToRemediate))

		By("turned off while a node would be remediated: the CR is created at once")
		e.SetReady(ctx, b[3], corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(entryOf(ctx, dry, b[3].Name)).Should(HaveField("DryRunRemediations", HaveLen(1)))
		e.RemediationDecided(ctx, dry)
		Consistently(e.CRsOf(ctx, b[3].Name, stepKinds...)).WithTimeout(time.Second).Should(BeEmpty())
		stored := &remediationv1alpha1.NodeHealthCheck{}
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(dry), stored)).To(Succeed())
		stored.Spec.DryRun = false
		Expect(e.K8s.Update(ctx, stored)).To(Succeed())
		// The first step's CR. (The fake clock is 20 minutes ahead of the API server's
		// creationTimestamps by now, so the step may time out at once and escalate: not asserted.)
		Eventually(func() []string { return testutil.TemplateNames(e.CRsOf(ctx, b[3].Name, stepKinds...)()) }).Should(
			WithTransform(func(names []string) string {
				if len(names) == 0 {
					return ""
				}
				return names[0]
			}, Equal(steps[0].RemediationTemplate.Name)))
		Eventually(nodeLease(ctx, b[3].Name)).ShouldNot(BeNil())
		Eventually(entryOf(ctx, dry, b[3].Name)).Should(And(HaveField("DryRunRemediations", BeEmpty()), HaveField("Remediations", Not(BeEmpty()))))
		Expect(meta.FindStatusCondition(e.Status(ctx, dry)().Conditions, remediationv1alpha1.ConditionTypeDryRun)).To(BeNil())
	})

	It("set on a NodeHealthCheck with a running remediation, leaves it running and escalates none: no CR marked timed out, no next step, until it is turned off", func(ctx SpecContext) {
		e.Clock.SetTime(time.Now().Truncate(time.Second).Add(-time.Second))
		// The second step's timeout outlasts the ten minutes the fake clock runs ahead of the API
		// server's (which sets the CRs' creationTimestamps): its timer starts when the first CR was
		// marked timed out, but that mark and the second CR come through two informers, and a look
		// that sees the second CR before the mark times the step from its creation.
		steps := []remediationv1alpha1.EscalatingRemediation{
			stepTemplate(ctx, kindA, 1, 5*time.Minute, false),
			stepTemplate(ctx, kindB, 2, time.Hour, false),
		}
		n, _, pool := poolOfFour(ctx, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = nil
			n.Spec.EscalatingRemediations = steps
		})
		node := pool[0]
		e.SetReady(ctx, node, corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(func() []string { return testutil.TemplateNames(e.CRsOf(ctx, node.Name, stepKinds...)()) }).Should(Equal([]string{steps[0].RemediationTemplate.Name}))

		setDryRun := func(on bool) {
			GinkgoHelper()
			Eventually(func() error {
				stored := &remediationv1alpha1.NodeHealthCheck{}
				if err := e.K8s.Get(ctx, client.ObjectKeyFromObject(n), stored); err != nil {
					return err
				}
				stored.Spec.DryRun = on
				return e.K8s.Update(ctx, stored)
			}).Should(Succeed())
		}
		By("dry-run on, and the running step times out: the remediation controller says what it would do, and does nothing")
		setDryRun(true)
		e.Step(ctx, 5*time.Minute)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonWouldRemediate)).Should(ContainElement(
			ContainSubstring("would escalate node %s to %s", node.Name, steps[1].RemediationTemplate.Kind)))
		timedOut := func(cr unstructured.Unstructured) bool {
			_, marked := cr.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]
			return marked
		}
		Consistently(e.CRsOf(ctx, node.Name, stepKinds...)).WithTimeout(2*time.Second).Should(HaveExactElements(
			WithTransform(timedOut, BeFalse())), "the running CR is neither marked timed out (its remediator would give up) nor followed by the next step")

		By("dry-run off: the escalation that was due happens at once")
		setDryRun(false)
		Eventually(e.CRsOf(ctx, node.Name, stepKinds...)).Should(HaveExactElements(
			WithTransform(timedOut, BeTrue()), WithTransform(timedOut, BeFalse())))
		Expect(testutil.TemplateNames(e.CRsOf(ctx, node.Name, stepKinds...)())).To(Equal([]string{steps[0].RemediationTemplate.Name, steps[1].RemediationTemplate.Name}))
	})
})

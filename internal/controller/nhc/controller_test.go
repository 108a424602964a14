package nhc_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

func phaseOf(st remediationv1alpha1.NodeHealthCheckStatus) remediationv1alpha1.NHCPhase {
	return st.Phase
}

func counts(observed, healthy int) OmegaMatcher {
	return And(
		WithTransform(func(st remediationv1alpha1.NodeHealthCheckStatus) *int { return st.ObservedNodes }, PointTo(Equal(observed))),
		WithTransform(func(st remediationv1alpha1.NodeHealthCheckStatus) *int { return st.HealthyNodes }, PointTo(Equal(healthy))),
	)
}

// remediating matches a status that counts that many nodes being remediated (the Remediating
// printer column).
func remediating(n int) OmegaMatcher {
	return WithTransform(func(st remediationv1alpha1.NodeHealthCheckStatus) *int { return st.RemediatingNodes }, PointTo(Equal(n)))
}

var _ = Describe("NodeHealthCheck evaluation", func() {
	It("selects nodes by label and sees a node move out at once", func(ctx SpecContext) {
		group := e.Unique("g")
		a := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, e.Unique("other"), corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group)
		Eventually(e.Status(ctx, n)).Should(And(counts(2, 2), WithTransform(phaseOf, Equal(remediationv1alpha1.PhaseEnabled))))

		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		a.Labels[testutil.GroupLabel] = "elsewhere"
		Expect(e.K8s.Update(ctx, a)).To(Succeed())
		Eventually(e.Status(ctx, n)).Should(counts(1, 1))
	})

	It("finds a node unhealthy only once a condition matched for its duration", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		sick := e.NewNode(ctx, group, corev1.ConditionFalse, 0)
		n := e.NewNHC(ctx, group)

		// Soon unhealthy: not healthy, not remediated.
		Eventually(e.Status(ctx, n)).Should(counts(3, 2))
		Consistently(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).WithTimeout(time.Second).Should(BeEmpty())

		e.Step(ctx, 5*time.Minute)
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(sick.Name))
		st := e.Status(ctx, n)()
		Expect(st.Phase).To(Equal(remediationv1alpha1.PhaseRemediating))
		// Listed, but no CR yet (only the nhc controller runs here): not counted as being remediated.
		Expect(st).To(remediating(0))
		Expect(st.Reason).To(ContainSubstring(sick.Name))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonDetectedUnhealthy))
	})

	It("keeps a node that goes Unknown -> False while rebooting (soon unhealthy) with its CR", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		sick := e.NewNode(ctx, group, corev1.ConditionUnknown, 10*time.Minute)
		n := e.NewNHC(ctx, group)
		e.NewCR(ctx, n, sick.Name)
		Eventually(func() int {
			st := e.Status(ctx, n)()
			if len(st.UnhealthyNodes) != 1 {
				return 0
			}
			return len(st.UnhealthyNodes[0].Remediations)
		}).Should(Equal(1), "the CR is recorded")

		e.SetReady(ctx, sick, corev1.ConditionFalse, 0) // rebooting
		// A node joins after the reboot: the status counting it comes from a reconcile that saw the
		// reboot too (one node informer, in order).
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		Eventually(e.Status(ctx, n)).Should(counts(4, 3), "the controller reconciled after the reboot")
		Consistently(e.Status(ctx, n)).WithTimeout(time.Second).Should(And(
			counts(4, 3),
			WithTransform(func(st remediationv1alpha1.NodeHealthCheckStatus) []remediationv1alpha1.UnhealthyNode {
				return st.UnhealthyNodes
			},
				ConsistOf(MatchFields(IgnoreExtras, Fields{"Name": Equal(sick.Name), "Remediations": HaveLen(1), "ConditionsHealthyTimestamp": BeNil()}))),
		))
	})

	DescribeTable("starts no new remediation below the healthy-node threshold, and says why",
		func(ctx SpecContext, budget func(*remediationv1alpha1.NodeHealthCheck)) {
			group := e.Unique("g")
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			sick := e.NewNode(ctx, group, corev1.ConditionFalse, time.Hour)
			n := e.NewNHC(ctx, group, budget)
			Eventually(e.Status(ctx, n)).Should(And(counts(3, 2), WithTransform(func(st remediationv1alpha1.NodeHealthCheckStatus) string { return st.Reason },
				ContainSubstring("2 of 3 selected nodes are healthy, 3 required"))))
			// Listed as the public operator lists it, without remediations; the phase says nothing runs.
			st := e.Status(ctx, n)()
			Expect(st.UnhealthyNodes).To(ConsistOf(MatchAllFields(Fields{"Name": Equal(sick.Name), "Remediations": BeEmpty(),
				"ConditionsHealthyTimestamp": BeNil(), "HealthyDelayed": BeNil(), "DryRunRemediations": BeNil(), "RemediationRequested": BeNil()})))
			Expect(st.Phase).To(Equal(remediationv1alpha1.PhaseEnabled))
			Eventually(e.Events(ctx, n.Name)).Should(ContainElements(remediationv1alpha1.EventReasonRemediationSkipped, remediationv1alpha1.EventReasonDetectedUnhealthy))
			Expect(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonDetectedUnhealthy)()).To(ConsistOf(
				fmt.Sprintf(`Node matches unhealthy condition. Node %q, condition type "Ready", condition status "False"`, sick.Name)))
		},
		Entry("minHealthy 3", func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(3); n.Spec.MinHealthy = &v }),
		Entry(`minHealthy "100%"`, func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromString("100%"); n.Spec.MinHealthy = &v }),
		Entry(`maxUnhealthy "0"`, func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromString("0")
			n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, &v
		}),
	)

	It("counts a healthy node with a remaining CR as not healthy", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		recovered := e.NewNode(ctx, group, corev1.ConditionTrue, time.Minute)
		n := e.NewNHC(ctx, group)
		e.NewCR(ctx, n, recovered.Name)
		Eventually(e.Status(ctx, n)).Should(counts(2, 1))
	})

	It("marks a recovered node and lists it until its CRs are really gone", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		sick := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group)
		cr := e.NewCR(ctx, n, sick.Name)
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(sick.Name))
		// Listed as soon as it is unhealthy; counted once the cache holds its CR.
		Eventually(e.Status(ctx, n)).Should(remediating(1))
		// Detected also when its CR existed before the node was first listed (the remediation
		// controller is often first).
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonDetectedUnhealthy))

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(func() *metav1.Time {
			st := e.Status(ctx, n)()
			if len(st.UnhealthyNodes) != 1 {
				return nil
			}
			return st.UnhealthyNodes[0].ConditionsHealthyTimestamp
		}).ShouldNot(BeNil())
		Expect(e.Status(ctx, n)().UnhealthyNodes[0].ConditionsHealthyTimestamp.Time).To(Equal(e.Clock.Now()))
		Expect(e.Status(ctx, n)()).To(remediating(1), "healthy again, its CR still there")

		Expect(e.K8s.Delete(ctx, cr)).To(Succeed())
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(BeEmpty())
		Eventually(e.Status(ctx, n)).Should(And(counts(3, 3), remediating(0), WithTransform(phaseOf, Equal(remediationv1alpha1.PhaseEnabled))))
	})

	It("lists a deleted node while its CR exists, then prunes its entry", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		sick := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group)
		cr := e.NewCR(ctx, n, sick.Name)
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(sick.Name))
		Expect(e.K8s.Delete(ctx, sick)).To(Succeed())
		// The node is gone, its CR is not (a remediator's finalizer, a machine being replaced): still
		// listed with its remediation, as the public operator lists it. Counted once the node is gone.
		Eventually(e.Status(ctx, n)).Should(And(counts(2, 2), WithTransform(func(st remediationv1alpha1.NodeHealthCheckStatus) []remediationv1alpha1.UnhealthyNode {
			return st.UnhealthyNodes
		}, ConsistOf(MatchFields(IgnoreExtras, Fields{"Name": Equal(sick.Name), "Remediations": ConsistOf(
			MatchFields(IgnoreExtras, Fields{"Resource": HaveField("UID", Equal(cr.GetUID()))}))})))))
		Expect(phaseOf(e.Status(ctx, n)())).To(Equal(remediationv1alpha1.PhaseRemediating))
		Expect(e.K8s.Delete(ctx, cr)).To(Succeed())
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(BeEmpty())
		Expect(phaseOf(e.Status(ctx, n)())).To(Equal(remediationv1alpha1.PhaseEnabled))
	})

	It("is disabled while its template is missing, and enabled when it appears", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		sick := e.NewNode(ctx, group, corev1.ConditionFalse, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Name = "created-later" })
		Eventually(disabledCondition(ctx, n)).Should(beDisabledFor(remediationv1alpha1.ConditionReasonDisabledTemplateNotFound))
		Expect(e.Status(ctx, n)().Phase).To(Equal(remediationv1alpha1.PhaseDisabled))
		st := e.Status(ctx, n)()
		Expect(st.NodesWithRunningRemediation()).To(BeEmpty(), "a disabled NodeHealthCheck starts no remediation")
		Expect(testutil.Listed(e.Status(ctx, n)())).To(ConsistOf(sick.Name), "the unhealthy node is reported")
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonDisabled))

		t := testutil.TestTemplateRef("created-later")
		createTemplateNamed(ctx, t.Name, true)
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhaseRemediating))
		Expect(meta.IsStatusConditionFalse(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeDisabled)).To(BeTrue())
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonEnabled))
	})

	It("is disabled by a template without spec.template", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		name := e.NewTemplate(ctx, false)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Name = name })
		Eventually(disabledCondition(ctx, n)).Should(beDisabledFor(remediationv1alpha1.ConditionReasonDisabledTemplateInvalid))
	})

	It("is disabled by a template whose spec.template.spec is not an object, naming the template", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		t := testutil.TemplateObject(e.Unique("template"), true)
		Expect(unstructured.SetNestedField(t.Object, "reboot", "spec", "template", "spec")).To(Succeed())
		e.Create(ctx, t)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Name = t.GetName() })
		Eventually(disabledCondition(ctx, n)).Should(And(beDisabledFor(remediationv1alpha1.ConditionReasonDisabledTemplateInvalid),
			HaveField("Message", ContainSubstring("%s/%s has a spec.template.spec of type string, not an object", t.GetNamespace(), t.GetName()))))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonDisabled))
	})

	It("is disabled by a selector that does not parse (admitted without the webhook), saying why, instead of failing every reconcile", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.Selector.MatchLabels = map[string]string{testutil.GroupLabel: group, "pool": "not a label value!"}
		})
		Eventually(disabledCondition(ctx, n)).Should(And(beDisabledFor(remediationv1alpha1.ConditionReasonDisabledInvalidConfig),
			HaveField("Message", And(ContainSubstring("spec.selector is invalid"), ContainSubstring("not a label value!")))))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonDisabled))
		Expect(e.Status(ctx, n)().Phase).To(Equal(remediationv1alpha1.PhaseDisabled))
	})

	It("is disabled by a template kind the API server does not know", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: "unknown.example.com/v1", Kind: "UnknownRemediationTemplate", Namespace: "default", Name: "x"}
		})
		Eventually(disabledCondition(ctx, n)).Should(beDisabledFor(remediationv1alpha1.ConditionReasonDisabledTemplateNotFound))
	})

	It("starts no remediation while paused; running ones stay listed", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		running := e.NewNode(ctx, group, corev1.ConditionFalse, time.Hour)
		waiting := e.NewNode(ctx, group, corev1.ConditionFalse, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.PauseRequests = []string{"upgrade by @admin"}
			v := intstr.FromInt32(1)
			n.Spec.MinHealthy = &v
		})
		e.NewCR(ctx, n, running.Name)
		// Both listed; only the running one with its remediation.
		Eventually(e.Status(ctx, n)).Should(And(WithTransform(phaseOf, Equal(remediationv1alpha1.PhasePaused)),
			WithTransform(testutil.Listed, ConsistOf(running.Name, waiting.Name)),
			WithTransform(func(st remediationv1alpha1.NodeHealthCheckStatus) []string { return st.NodesWithRunningRemediation() }, ConsistOf(running.Name))))
		Expect(e.Status(ctx, n)().Reason).To(ContainSubstring("upgrade by @admin"))

		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
		n.Spec.PauseRequests = nil
		Expect(e.K8s.Update(ctx, n)).To(Succeed())
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("Remediating 2 node(s): "))
		Expect(testutil.Listed(e.Status(ctx, n)())).To(ConsistOf(running.Name, waiting.Name))
	})

	It("writes status only when it changes, with lastUpdateTime, and requeues at the next deadline", func(ctx SpecContext) {
		group := e.Unique("g")
		healthy := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionFalse, 2*time.Minute) // due in 3 minutes
		n := e.NewNHC(ctx, group)
		Eventually(e.Status(ctx, n)).Should(counts(2, 1))
		st := e.Status(ctx, n)()
		Expect(st.LastUpdateTime).NotTo(BeNil())
		Expect(testutil.Listed(st)).To(BeEmpty(), "the node is due in 3 minutes, not yet")

		// Pokes annotate the NodeHealthCheck (new resourceVersions): its status is what must stay.
		got := &remediationv1alpha1.NodeHealthCheck{}
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
		before := got.Status.DeepCopy()
		e.Poke(ctx)
		e.Poke(ctx)
		// A change of a selected node that alters no status: an empty exclusion label is ignored, and
		// only warned about, in an event that shows the controller reconciled after the pokes.
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(healthy), healthy)).To(Succeed())
		healthy.Labels[remediationv1alpha1.ExcludeFromRemediationLabel] = ""
		Expect(e.K8s.Update(ctx, healthy)).To(Succeed())
		Eventually(e.Events(ctx, healthy.Name)).Should(ContainElement(remediationv1alpha1.EventReasonInvalidNodeLabel))
		Consistently(func() *remediationv1alpha1.NodeHealthCheckStatus {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
			return &got.Status
		}).WithTimeout(time.Second).Should(Equal(before), "a reconcile that changes nothing must not write")

		res, err := reconciler.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(n)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(Equal(3 * time.Minute))
	})
})

func createTemplateNamed(ctx SpecContext, name string, withSpecTemplate bool) {
	e.Create(ctx, testutil.TemplateObject(name, withSpecTemplate))
}

func disabledCondition(ctx SpecContext, n *remediationv1alpha1.NodeHealthCheck) func() *metav1.Condition {
	return func() *metav1.Condition {
		return meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeDisabled)
	}
}

func beDisabledFor(reason string) OmegaMatcher {
	return PointTo(MatchFields(IgnoreExtras, Fields{"Status": Equal(metav1.ConditionTrue), "Reason": Equal(reason)}))
}

// reconciles is how many times the nhc controller reconciled so far, every result counted.
func reconciles() float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == nhc.ControllerName {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// settledReconciles waits until the nhc controller has not reconciled for half a second, and returns
// its reconcile count.
func settledReconciles() float64 {
	var settled float64
	Eventually(func(g Gomega) {
		settled = reconciles()
		g.Consistently(reconciles).WithTimeout(500 * time.Millisecond).Should(Equal(settled))
	}).WithTimeout(30*time.Second).Should(Succeed(), "the nhc controller keeps reconciling")
	return settled
}

var _ = Describe("Node events", func() {
	It("reconcile the NodeHealthChecks that select the node, and every one for a control-plane node", func(ctx SpecContext) {
		const others = 10
		for range others {
			e.NewNHC(ctx, e.Unique("elsewhere")) // selects no node of this spec
		}
		group := e.Unique("g")
		node := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group)
		Eventually(e.Status(ctx, n)).Should(counts(1, 1))
		all := &remediationv1alpha1.NodeHealthCheckList{}
		Expect(e.K8s.List(ctx, all)).To(Succeed())

		before := settledReconciles()
		// A change that alters no status, but shows in an event that n reconciled.
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
		node.Labels[remediationv1alpha1.ExcludeFromRemediationLabel] = ""
		Expect(e.K8s.Update(ctx, node)).To(Succeed())
		Eventually(e.Events(ctx, node.Name)).Should(ContainElement(remediationv1alpha1.EventReasonInvalidNodeLabel))
		// n once or twice (the old and the new node each map to it); a stray requeue of an earlier
		// spec's NodeHealthCheck at most, never the others (every one, 1+10 at least, before).
		Expect(settledReconciles() - before).To(BeNumerically("<", 5))

		before = settledReconciles()
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
		node.Labels[remediationcr.ControlPlaneRoleLabel] = ""
		Expect(e.K8s.Update(ctx, node)).To(Succeed())
		Eventually(reconciles).Should(BeNumerically(">=", before+float64(len(all.Items))),
			"a control-plane node may be remediated elsewhere, which every NodeHealthCheck's decision reads")
	})
})

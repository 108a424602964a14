package remediation_test

import (
	"context"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	gomegatypes "github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// groups selects the nodes of these groups.
func groups(names ...string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: testutil.GroupLabel, Operator: metav1.LabelSelectorOpIn, Values: names}}}
}

// ownedBy matches a CR the NodeHealthCheck controls.
func ownedBy(n *remediationv1alpha1.NodeHealthCheck) gomegatypes.GomegaMatcher {
	return WithTransform(func(cr unstructured.Unstructured) types.UID { return cr.GetOwnerReferences()[0].UID }, Equal(n.UID))
}

// workers creates three nodes of a new group, the last one unhealthy for an hour.
func workers(ctx context.Context) (group string, sick *corev1.Node) {
	group = e.Unique("g")
	e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	return group, e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
}

// firstAndSecond sets up two NodeHealthChecks over one unhealthy worker: the first, over the
// workers' group, has remediated sick; the second selects that group and another, whose unhealthy
// node own it remediates itself (its CR shows the remediation controller reconciled the second).
// template is the second's remediation template, given the first.
func firstAndSecond(ctx context.Context, template func(first *remediationv1alpha1.NodeHealthCheck) *corev1.ObjectReference) (group string, sick, own *corev1.Node, first, second *remediationv1alpha1.NodeHealthCheck) {
	GinkgoHelper()
	group, sick = workers(ctx)
	other := e.Unique("g")
	e.NewNode(ctx, other, corev1.ConditionTrue, time.Hour)
	own = e.NewNode(ctx, other, corev1.ConditionUnknown, time.Hour)
	first = e.NewNHC(ctx, group)
	Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
	second = e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.RemediationTemplate = template(first)
		n.Spec.Selector = groups(group, other)
	})
	return group, sick, own, first, second
}

func setCondition(ctx context.Context, cr *unstructured.Unstructured, conds ...map[string]any) {
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		list = append(list, c)
	}
	// As a remediator writes it: again on a conflict. The operator may annotate the CR meanwhile (the
	// old-CR flag, on a fake clock that earlier specs moved days ahead of the CR's creation).
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.K8s.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return err
		}
		Expect(unstructured.SetNestedSlice(cr.Object, list, "status", "conditions")).To(Succeed())
		return e.K8s.Status().Update(ctx, cr)
	})).To(Succeed())
}

var _ = Describe("The remediation lifecycle", func() {
	It("creates exactly one CR from the template for an unhealthy node, records it, and deletes it when the node recovers", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)

		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		cr := e.TestCRs(ctx, sick.Name)()[0]
		Expect(cr.GetName()).To(Equal(sick.Name))
		Expect(cr.GetNamespace()).To(Equal(testutil.TemplateNamespace))
		Expect(cr.Object["spec"]).To(Equal(map[string]any{"strategy": "reboot"}))
		Expect(cr.GetAnnotations()).To(HaveKeyWithValue(remediationv1alpha1.TemplateNameAnnotation, n.Spec.RemediationTemplate.Name))
		Expect(cr.GetOwnerReferences()).To(ConsistOf(MatchFields(IgnoreExtras, Fields{
			"Kind": Equal("NodeHealthCheck"), "Name": Equal(n.Name), "UID": Equal(n.UID), "Controller": PointTo(BeFalse())}))) // a plain owner, as the public operator sets it

		// Status records the CR with its uid, start time and template.
		Eventually(func() []remediationv1alpha1.Remediation {
			st := e.Status(ctx, n)()
			if len(st.UnhealthyNodes) != 1 {
				return nil
			}
			return st.UnhealthyNodes[0].Remediations
		}).Should(ConsistOf(MatchFields(IgnoreExtras, Fields{
			"Resource":     MatchFields(IgnoreExtras, Fields{"Kind": Equal("TestRemediation"), "Name": Equal(sick.Name), "UID": Equal(cr.GetUID())}),
			"Started":      Equal(cr.GetCreationTimestamp()),
			"TemplateName": Equal(n.Spec.RemediationTemplate.Name),
			"TimedOut":     BeNil(),
		})))
		// On the NodeHealthCheck, as the public operator records them, related to the node (one event
		// series per node).
		Eventually(e.RelatedEvents(ctx, n.Name, sick.Name)).Should(ContainElements(remediationv1alpha1.EventReasonDetectedUnhealthy, remediationv1alpha1.EventReasonRemediationCreated))

		Eventually(func() float64 {
			v, ok := gaugeValue(nhc.MetricOngoingRemediation, map[string]string{"name": sick.Name, "namespace": testutil.TemplateNamespace, "remediation": "TestRemediation"})
			if !ok {
				return -1
			}
			return v
		}).Should(BeNumerically("==", 1))
		Expect(histogramCount(nhc.MetricTimeToRemediation, map[string]string{"nhc": n.Name, "remediation": "TestRemediation"})).To(BeEquivalentTo(1))

		// Exactly once, however often the controllers look: the lease renewed past a third of its 11
		// minutes shows the remediation controller looked again with the CR in view.
		e.Poke(ctx)
		e.Step(ctx, 4*time.Minute)
		renewedNow(ctx, sick.Name)
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(HaveLen(1))

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(BeEmpty())
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhaseEnabled))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonRemediationRemoved))

		// The gauge series is kept at 0, as the public operator keeps it; each histogram observed the
		// transition once, unhealthy_node_duration with the public operator's labels.
		Eventually(func() float64 {
			v, ok := gaugeValue(nhc.MetricOngoingRemediation, map[string]string{"name": sick.Name, "namespace": testutil.TemplateNamespace, "remediation": "TestRemediation"})
			if !ok {
				return -1
			}
			return v
		}).Should(BeNumerically("==", 0))
		labels := map[string]string{"nhc": n.Name, "remediation": "TestRemediation"}
		Expect(histogramCount(nhc.MetricTimeToRemediation, labels)).To(BeEquivalentTo(1))
		Expect(histogramCount(nhc.MetricTimeToRecovery, labels)).To(BeEquivalentTo(1))
		Expect(histogramCount(nhc.MetricUnhealthyNodeDuration, map[string]string{"name": sick.Name, "namespace": testutil.TemplateNamespace, "remediation": "TestRemediation"})).To(BeEquivalentTo(1))
	})

	It("creates the CR only after the unhealthy condition's duration", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 4 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		sick := e.NewNode(ctx, group, corev1.ConditionFalse, 0)
		// Due at once, and 299s later: their CRs show the remediation controller looked at sick then.
		due := e.NewNode(ctx, group, corev1.ConditionFalse, 300*time.Second)
		later := e.NewNode(ctx, group, corev1.ConditionFalse, time.Second)
		e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, due.Name)).Should(HaveLen(1))
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(BeEmpty())
		e.Step(ctx, 299*time.Second)
		Eventually(e.TestCRs(ctx, later.Name)).Should(HaveLen(1))
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(BeEmpty())
		e.Step(ctx, time.Second)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
	})

	DescribeTable("creates the CR with the spec of each remediator's template shape",
		func(ctx SpecContext, apiVersion, templateKind string, spec map[string]any) {
			group, sick := workers(ctx)
			t := &unstructured.Unstructured{}
			t.SetAPIVersion(apiVersion)
			t.SetKind(templateKind)
			t.SetNamespace(testutil.TemplateNamespace)
			t.SetName(e.Unique("template"))
			Expect(unstructured.SetNestedMap(t.Object, map[string]any{"spec": spec}, "spec", "template")).To(Succeed())
			e.Create(ctx, t)
			e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
				n.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: apiVersion, Kind: templateKind, Namespace: testutil.TemplateNamespace, Name: t.GetName()}
			})
			kind := templateKind[:len(templateKind)-len("Template")]
			Eventually(e.CRsOf(ctx, sick.Name, schema.FromAPIVersionAndKind(apiVersion, kind))).Should(HaveLen(1))
			Expect(e.CRsOf(ctx, sick.Name, schema.FromAPIVersionAndKind(apiVersion, kind))()[0].Object["spec"]).To(Equal(spec))
		},
		Entry("Metal3RemediationTemplate", "infrastructure.cluster.x-k8s.io/v1beta1", "Metal3RemediationTemplate",
			map[string]any{"strategy": map[string]any{"type": "Reboot", "retryLimit": int64(1), "timeout": "300s"}}),
		Entry("SelfNodeRemediationTemplate", "self-node-remediation.medik8s.io/v1alpha1", "SelfNodeRemediationTemplate",
			map[string]any{"remediationStrategy": "Automatic"}),
	)

	It("gives the CR a generated name when the template supports several CRs per node", func(ctx SpecContext) {
		group, sick := workers(ctx)
		t := testutil.TemplateObject(e.Unique("multi"), true)
		t.SetAnnotations(map[string]string{remediationv1alpha1.MultipleTemplatesSupportAnnotation: "true"})
		e.Create(ctx, t)
		e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Name = t.GetName() })
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		cr := e.TestCRs(ctx, sick.Name)()[0]
		Expect(cr.GetGenerateName()).To(Equal(sick.Name + "-"))
		Expect(cr.GetName()).To(HavePrefix(sick.Name + "-"))
	})

	It("leaves a node to the NodeHealthCheck that remediates it first", func(ctx SpecContext) {
		group, sick, own, first, second := firstAndSecond(ctx, func(first *remediationv1alpha1.NodeHealthCheck) *corev1.ObjectReference {
			return first.Spec.RemediationTemplate.DeepCopy()
		})
		Eventually(e.Events(ctx, second.Name)).Should(ContainElement(remediationv1alpha1.EventReasonRemediationSkipped))
		Eventually(e.TestCRs(ctx, own.Name)).Should(ConsistOf(ownedBy(second)), "the remediation controller reconciled the second NodeHealthCheck")
		// A new healthy node makes both controllers look again; the status counting it shows the nhc
		// controller did.
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.SeenHealthy(ctx, second, 4)
		e.RemediationDecided(ctx, second)
		Consistently(func() int {
			n := 0
			for _, r := range e.Events(ctx, second.Name)() {
				if r == remediationv1alpha1.EventReasonRemediationSkipped {
					n++
				}
			}
			return n
		}).WithTimeout(time.Second).Should(Equal(1), "reported once, not on every reconcile")
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(ConsistOf(ownedBy(first)))
	})

	It("deletes the CR of a node that was deleted, but keeps one that expects the node's permanent deletion until it succeeds", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 3 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		gone := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		deleted := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromString("50%")
			n.Spec.MinHealthy = &v
		})
		Eventually(e.TestCRs(ctx, gone.Name)).Should(HaveLen(1))
		Eventually(e.TestCRs(ctx, deleted.Name)).Should(HaveLen(1))

		kept := e.TestCRs(ctx, deleted.Name)()[0]
		setCondition(ctx, &kept, map[string]any{"type": remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected, "status": "True",
			"reason": "Deleting", "message": "", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})

		// In this order, whoever sees gone deleted sees deleted deleted too: the removal of gone's CR
		// shows the remediation controller looked at both.
		Expect(e.K8s.Delete(ctx, deleted)).To(Succeed())
		Expect(e.K8s.Delete(ctx, gone)).To(Succeed())
		Eventually(e.TestCRs(ctx, gone.Name)).Should(BeEmpty())
		Consistently(e.TestCRs(ctx, deleted.Name)).WithTimeout(time.Second).Should(HaveLen(1))

		now := metav1.Now().UTC().Format(time.RFC3339)
		setCondition(ctx, &kept,
			map[string]any{"type": remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected, "status": "True", "reason": "Deleting", "message": "", "lastTransitionTime": now},
			map[string]any{"type": remediationv1alpha1.RemediationConditionSucceeded, "status": "True", "reason": "Done", "message": "", "lastTransitionTime": now})
		Eventually(e.TestCRs(ctx, deleted.Name)).Should(BeEmpty())
	})

	It("deletes the CR of a deleted node only as it read it: not one whose remediator said meanwhile that it deletes the node for good", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 3 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		deleted := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromString("50%")
			n.Spec.MinHealthy = &v
		})
		Eventually(e.TestCRs(ctx, deleted.Name)).Should(HaveLen(1))
		kept := e.TestCRs(ctx, deleted.Name)()[0]
		crDeletes := func(r testutil.Request) bool {
			return r.Method == http.MethodDelete && strings.HasSuffix(r.Path, "/testremediations/"+kept.GetName())
		}
		mark := requests.Mark()

		By("the remediator marks the CR, which the manager's cache does not show yet, and deletes the node")
		release := watches.Hold("testremediations")
		DeferCleanup(release)
		setCondition(ctx, &kept, map[string]any{"type": remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected, "status": "True",
			"reason": "Deleting", "message": "", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})
		Expect(e.K8s.Delete(ctx, deleted)).To(Succeed())
		// The decision read the CR unmarked and deleted it as an orphan: the API server refused that
		// delete, made of a state the CR no longer has.
		Eventually(func() []testutil.Request { return requests.Since(mark, crDeletes) }).ShouldNot(BeEmpty())
		Expect(e.TestCRs(ctx, deleted.Name)()).To(HaveLen(1), "the marked CR, deleted from what the cache showed before the mark")

		By("the cache catches up: the mark keeps the CR")
		release()
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, deleted.Name)).WithTimeout(time.Second).Should(HaveLen(1))
	})

	It("lists a recovered node until a remediator's finalizer lets its CR go", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		cr := e.TestCRs(ctx, sick.Name)()[0]
		// The controller may annotate the CR meanwhile (after a spec stepped the clock by days, new
		// CRs are flagged as old at once): retry on conflicts, as a remediator would.
		setFinalizers := func(finalizers ...string) {
			Eventually(func() error {
				Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(&cr), &cr)).To(Succeed())
				cr.SetFinalizers(finalizers)
				return e.K8s.Update(ctx, &cr)
			}).Should(Succeed())
		}
		setFinalizers("test.medik8s.io/remediator")

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(func() bool {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(&cr), &cr)).To(Succeed())
			return cr.GetDeletionTimestamp() != nil
		}).Should(BeTrue())
		// A new healthy node makes the nhc controller look again; the status counting it (and not sick,
		// whose CR it still sees) shows it did.
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.SeenHealthy(ctx, n, 3)
		Consistently(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).WithTimeout(time.Second).Should(ConsistOf(sick.Name))

		setFinalizers()
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(BeEmpty())
	})

	It("starts remediating once a remediator installed after the NodeHealthCheck provides its kind and template", func(ctx SpecContext) {
		group, sick := workers(ctx)
		suffix := e.Unique("late")
		group_ := "late-" + suffix + ".test.medik8s.io"
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: group_ + "/v1", Kind: "LateRemediationTemplate", Namespace: testutil.TemplateNamespace, Name: "late"}
		})
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhaseDisabled))

		for _, kind := range []string{"LateRemediationTemplate", "LateRemediation"} {
			crd := lateCRD(group_, kind)
			Expect(e.K8s.Create(ctx, crd)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(e.K8s.Delete(ctx, crd)).To(Succeed()) })
		}
		t := &unstructured.Unstructured{}
		t.SetAPIVersion(group_ + "/v1")
		t.SetKind("LateRemediationTemplate")
		t.SetNamespace(testutil.TemplateNamespace)
		t.SetName("late")
		Expect(unstructured.SetNestedMap(t.Object, map[string]any{"spec": map[string]any{}}, "spec", "template")).To(Succeed())
		Eventually(func() error { return e.K8s.Create(ctx, t) }).Should(Succeed()) // once the CRD is established
		Eventually(e.CRsOf(ctx, sick.Name, schema.FromAPIVersionAndKind(group_+"/v1", "LateRemediation"))).WithTimeout(30 * time.Second).Should(HaveLen(1))
		// The status write that lists the node waits for its first CR (nhc.DefaultStartWait).
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhaseRemediating))
	})

	It("deletes the CR of a node that is no longer selected", func(ctx SpecContext) {
		group, sick := workers(ctx)
		e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(sick), sick)).To(Succeed())
		sick.Labels[testutil.GroupLabel] = "elsewhere"
		Expect(e.K8s.Update(ctx, sick)).To(Succeed())
		Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
	})

	It("creates no CR while paused, and creates it when the pause ends", func(ctx SpecContext) {
		group, sick := workers(ctx)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour) // the budget, with running below
		running := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.PauseRequests = []string{"maintenance"} })
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhasePaused))
		// A running remediation continues during a pause: the lease the remediation controller takes
		// for it shows that controller looked while paused.
		e.NewCR(ctx, n, running.Name)
		Eventually(nodeLease(ctx, running.Name)).Should(HaveField("Spec.HolderIdentity", PointTo(Equal("NodeHealthCheck-"+n.Name))))
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(BeEmpty())
		pause(ctx, n)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
	})
})

// gaugeValue returns the gauge's value and whether the series exists.
func gaugeValue(name string, labels map[string]string) (float64, bool) {
	m := testutil.Series(name, labels)
	if m == nil {
		return 0, false
	}
	return m.GetGauge().GetValue(), true
}

// histogramCount returns how many observations the histogram series has.
func histogramCount(name string, labels map[string]string) uint64 {
	m := testutil.Series(name, labels)
	if m == nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// lateCRD is a namespaced CRD with an open schema, like a remediator installs.
func lateCRD(group, kind string) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(kind) + "s"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

var _ = Describe("Long-running remediations", func() {
	It("flags a CR older than 48 hours once, with an annotation, a metric and an event", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		flagged := func() map[string]string { return e.TestCRs(ctx, sick.Name)()[0].GetAnnotations() }

		created := e.TestCRs(ctx, sick.Name)()[0].GetCreationTimestamp().Time
		e.Clock.SetTime(created.Add(48*time.Hour - time.Second))
		e.Poke(ctx)
		e.Touch(ctx, n)
		renewedNow(ctx, sick.Name)
		Consistently(flagged).WithTimeout(time.Second).ShouldNot(HaveKey(remediationv1alpha1.OldRemediationCRAnnotation))

		e.Clock.SetTime(created.Add(48 * time.Hour))
		e.Poke(ctx)
		e.Touch(ctx, n)
		Eventually(flagged).Should(HaveKey(remediationv1alpha1.OldRemediationCRAnnotation))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonOldRemediationCR))
		counter := func() float64 {
			m := testutil.Series(remediation.MetricOldRemediationCR, map[string]string{"name": sick.Name, "namespace": ""}) // the public operator's labels
			if m == nil {
				return 0
			}
			return m.GetCounter().GetValue()
		}
		Expect(counter()).To(BeEquivalentTo(1))

		e.Step(ctx, time.Hour)
		e.Touch(ctx, n)
		renewedNow(ctx, sick.Name)
		Consistently(counter).WithTimeout(time.Second).Should(BeEquivalentTo(1), "flagged once")
	})
})

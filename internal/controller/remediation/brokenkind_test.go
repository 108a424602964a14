package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// brokenRemediatorCRDs are a remediator's template kind and a CR kind served in two versions whose
// conversion webhook does not answer: reading its CRs in the version the template names fails.
func brokenRemediatorCRDs() []*apiextensionsv1.CustomResourceDefinition {
	down := &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"}, ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/convert")}}}
	return []*apiextensionsv1.CustomResourceDefinition{
		remediatorCRD("broken.medik8s.io", "RemediationTemplate", nil, "v1alpha1"),
		remediatorCRD("broken.medik8s.io", "Remediation", down, "v1alpha1", "v1"),
	}
}

// remediatorCRD is the CRD of a kind Broken<kind> of the group, served in the versions (the last
// one stored), converted between them by conversion.
func remediatorCRD(group, kind string, conversion *apiextensionsv1.CustomResourceConversion, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	open := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "broken" + lower(kind) + "s." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped, Conversion: conversion,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Broken" + kind, ListKind: "Broken" + kind + "List", Plural: "broken" + lower(kind) + "s"}},
	}
	for i, v := range versions {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: i == len(versions)-1, Schema: open})
	}
	return c
}

func lower(kind string) string {
	out := []rune{}
	for _, r := range kind {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		out = append(out, r)
	}
	return string(out)
}

var _ = Describe("A remediation kind whose CRs cannot be listed", func() {
	It("disables only the NodeHealthChecks that use it, naming the kind and the error; the others go on remediating, and the upgrade gate stays known", func(ctx SpecContext) {
		for _, crd := range brokenRemediatorCRDs() {
			Expect(e.K8s.Create(ctx, crd)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(e.K8s.Delete(ctx, crd))).To(Succeed()) })
		}
		// A CR stored in v1: listing the kind in v1alpha1 needs the conversion webhook, which is down.
		stored := &unstructured.Unstructured{}
		stored.SetAPIVersion("broken.medik8s.io/v1")
		stored.SetKind("BrokenRemediation")
		stored.SetNamespace(testutil.TemplateNamespace)
		stored.SetName(e.Unique("stored"))
		Eventually(func() error { return e.K8s.Create(ctx, stored) }).Should(Succeed())
		Eventually(func() error {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion("broken.medik8s.io/v1alpha1")
			l.SetKind("BrokenRemediationList")
			return e.K8s.List(ctx, l)
		}).Should(MatchError(ContainSubstring("conversion webhook")), "the test's precondition: the kind cannot be listed")
		tmpl := &unstructured.Unstructured{}
		tmpl.SetAPIVersion("broken.medik8s.io/v1alpha1")
		tmpl.SetKind("BrokenRemediationTemplate")
		tmpl.SetNamespace(testutil.TemplateNamespace)
		tmpl.SetName(e.Unique("broken"))
		Expect(unstructured.SetNestedMap(tmpl.Object, map[string]any{"spec": map[string]any{}}, "spec", "template")).To(Succeed())
		e.Create(ctx, tmpl)

		brokenGroup, brokenSick := workers(ctx)
		broken := e.NewNHC(ctx, brokenGroup, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: tmpl.GetAPIVersion(), Kind: tmpl.GetKind(), Namespace: tmpl.GetNamespace(), Name: tmpl.GetName()}
		})
		group, sick := workers(ctx)
		healthy := e.NewNHC(ctx, group)

		Eventually(e.TestCRs(ctx, sick.Name), 30*time.Second).Should(HaveLen(1), "a NodeHealthCheck of another kind remediates")
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(e.Status(ctx, broken)().Conditions, remediationv1alpha1.ConditionTypeDisabled)
		}, 30*time.Second).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", remediationv1alpha1.ConditionReasonDisabledRemediationUnavailable),
			HaveField("Message", And(ContainSubstring("BrokenRemediation.broken.medik8s.io cannot be read"), ContainSubstring("conversion webhook")))))
		Eventually(e.Events(ctx, broken.Name)).Should(ContainElement(remediationv1alpha1.EventReasonDisabled))
		Expect(e.CRsOf(ctx, brokenSick.Name, schema.GroupVersionKind{Group: "broken.medik8s.io", Version: "v1", Kind: "BrokenRemediation"})()).To(BeEmpty(), "read in the stored version, which needs no conversion")
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(e.Status(ctx, healthy)().Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress)
		}).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse)), "the upgrade gate is known")

		By("another failure in the healthy NodeHealthCheck's pool is remediated at once: no decision waits for the broken kind")
		again := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.SetReady(ctx, again, corev1.ConditionUnknown, time.Hour)
		Eventually(e.TestCRs(ctx, again.Name), 3*time.Second).Should(HaveLen(1))
		Expect(e.K8s.Delete(ctx, broken)).To(Succeed())
	})

	It("across a leader change while its conversion webhook is down, keeps a running remediation's lease, status entry and outcome unknown, starts no other NodeHealthCheck on the node, and goes on once the webhook is back", func(ctx SpecContext) {
		webhook := newConversionWebhook()
		group := e.Unique("leader") + ".broken.medik8s.io"
		crds := []*apiextensionsv1.CustomResourceDefinition{
			remediatorCRD(group, "RemediationTemplate", webhook.Conversion(), "v1alpha1", "v1"),
			remediatorCRD(group, "Remediation", webhook.Conversion(), "v1alpha1", "v1"),
		}
		for _, crd := range crds {
			Expect(e.K8s.Create(ctx, crd)).To(Succeed())
			// After the webhook is back (cleanups run last in, first out): the CRs are deleted with
			// their CRD, read in their stored version.
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(e.K8s.Delete(ctx, crd))).To(Succeed()) })
		}
		// The template is written and read in v1alpha1 and stored in v1: every read of it, and of the
		// CRs made from it, goes through the webhook.
		tmpl := &unstructured.Unstructured{}
		tmpl.SetAPIVersion(group + "/v1alpha1")
		tmpl.SetKind("BrokenRemediationTemplate")
		tmpl.SetNamespace(testutil.TemplateNamespace)
		tmpl.SetName(e.Unique("leader"))
		Expect(unstructured.SetNestedMap(tmpl.Object, map[string]any{"spec": map[string]any{}}, "spec", "template")).To(Succeed())
		Eventually(func() error { return e.K8s.Create(ctx, tmpl) }).Should(Succeed(), "the CRDs are served")
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(e.K8s.Delete(ctx, tmpl))).To(Succeed()) })
		crKind := schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "BrokenRemediation"}

		grp, sick := workers(ctx)
		first := e.NewNHC(ctx, grp, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: tmpl.GetAPIVersion(), Kind: tmpl.GetKind(), Namespace: tmpl.GetNamespace(), Name: tmpl.GetName()}
		})
		Eventually(e.CRsOf(ctx, sick.Name, crKind), 30*time.Second).Should(HaveLen(1))
		running := e.CRsOf(ctx, sick.Name, crKind)()[0]
		Eventually(entryOf(ctx, first, sick.Name)).Should(HaveField("Remediations", ConsistOf(HaveField("Resource.UID", running.GetUID()))))
		Eventually(nodeLease(ctx, sick.Name)).ShouldNot(BeNil())
		lease := nodeLease(ctx, sick.Name)()
		Expect(lease.Spec.HolderIdentity).To(PointTo(Equal(nodelease.Holder(first.Name))))
		// Another NodeHealthCheck selects the same nodes, with a remediator that works.
		second := e.NewNHC(ctx, grp)
		Eventually(func() string { return e.Status(ctx, second)().Reason }).Should(ContainSubstring("remediated by NodeHealthCheck " + first.Name))
		// A third escalates to the broken kind after a first step of a kind that works, which runs.
		brokenStep := remediationv1alpha1.EscalatingRemediation{Order: 2, Timeout: metav1.Duration{Duration: time.Hour},
			RemediationTemplate: *first.Spec.RemediationTemplate}
		third, recovering := escalatingNHC(ctx, stepTemplate(ctx, testutil.TestRemediationKind, 1, time.Hour, false), brokenStep)
		Eventually(e.TestCRs(ctx, recovering.Name)).Should(HaveLen(1))
		Eventually(nodeLease(ctx, recovering.Name)).ShouldNot(BeNil())

		By("the webhook goes down, and the leader changes")
		Expect(webhook.Stop()).To(Succeed())
		// The remediator writes its CR and its template in the version it stores, which needs no
		// conversion: the API server's cache of the version the operator reads cannot convert them,
		// and every list of that version now needs the webhook.
		for _, obj := range []*unstructured.Unstructured{&running, tmpl} {
			stored := &unstructured.Unstructured{}
			stored.SetAPIVersion(group + "/v1")
			stored.SetKind(obj.GetKind())
			stored.SetNamespace(obj.GetNamespace())
			stored.SetName(obj.GetName())
			Expect(e.K8s.Patch(ctx, stored, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.medik8s.io/written":"v1"}}}`)))).To(Succeed())
			Eventually(func() error {
				l := &unstructured.UnstructuredList{}
				l.SetAPIVersion(obj.GetAPIVersion())
				l.SetKind(obj.GetKind() + "List")
				return e.K8s.List(ctx, l)
			}).Should(MatchError(ContainSubstring("conversion webhook")), "the test's precondition: %s cannot be listed", obj.GetKind())
		}
		e.Restart()

		By("the new leader cannot read the template or the CRs: disabled with a reason, not pinned")
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(e.Status(ctx, first)().Conditions, remediationv1alpha1.ConditionTypeDisabled)
		}, time.Minute).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", remediationv1alpha1.ConditionReasonDisabledTemplateUnavailable),
			HaveField("Message", And(ContainSubstring("BrokenRemediationTemplate"), ContainSubstring("cannot be read")))))
		Eventually(func() string { return e.Status(ctx, second)().Reason }, time.Minute).Should(
			ContainSubstring("may be remediated by NodeHealthCheck "+first.Name), "the other NodeHealthCheck knows the node's remediation is unknown")
		// Both NodeHealthChecks' first reconciles in the new process (the lease sweep) are over.
		e.RemediationDecided(ctx, first)
		e.RemediationDecided(ctx, second)
		unknown := func(g Gomega) {
			l := nodeLease(ctx, sick.Name)()
			g.Expect(l).NotTo(BeNil(), "the running remediation's lease is not released")
			g.Expect(l.UID).To(Equal(lease.UID))
			g.Expect(l.Spec.HolderIdentity).To(PointTo(Equal(nodelease.Holder(first.Name))))
			g.Expect(e.TestCRs(ctx, sick.Name)()).To(BeEmpty(), "no other NodeHealthCheck starts on the node")
			st := e.Status(ctx, first)()
			g.Expect(st.UnhealthyNodes).To(ContainElement(And(HaveField("Name", sick.Name),
				HaveField("Remediations", ConsistOf(HaveField("Resource.UID", running.GetUID()))))), "the status entry stays")
			g.Expect(st.RemediationOutcomes).NotTo(ContainElement(HaveField("Name", sick.Name)), "no outcome is recorded")
		}
		Consistently(unknown).WithTimeout(2 * time.Second).Should(Succeed())

		By("a node of a NodeHealthCheck that uses the kind recovers: its CR of the kind that works goes, its lease stays")
		e.SetReady(ctx, recovering, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, recovering.Name)).Should(BeEmpty())
		e.RemediationDecided(ctx, third)
		Consistently(nodeLease(ctx, recovering.Name)).WithTimeout(2*time.Second).ShouldNot(BeNil(), "a CR of the kind that cannot be read may still run")

		By("the lease expires while the kind cannot be read: still no other NodeHealthCheck starts on the node")
		e.Step(ctx, nodelease.Duration(0)+time.Minute)
		e.RemediationDecided(ctx, second)
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(2 * time.Second).Should(BeEmpty())

		By("the webhook is back: the remediation is seen again and goes on")
		Expect(webhook.Start()).To(Succeed())
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(e.Status(ctx, first)().Conditions, remediationv1alpha1.ConditionTypeDisabled)
		}, time.Minute).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionFalse)))
		e.Poke(ctx)
		Eventually(func() time.Time {
			l := nodeLease(ctx, sick.Name)()
			if l == nil || l.UID != lease.UID || l.Spec.RenewTime == nil {
				return time.Time{}
			}
			return l.Spec.RenewTime.Time
		}, time.Minute).Should(BeTemporally("==", e.Clock.Now()), "the same lease, renewed by the new leader")
		Expect(e.CRsOf(ctx, sick.Name, crKind)()).To(ConsistOf(WithTransform(func(cr unstructured.Unstructured) types.UID { return cr.GetUID() }, Equal(running.GetUID()))))
		Expect(entryOf(ctx, first, sick.Name)()).To(HaveField("Remediations", ConsistOf(HaveField("Resource.UID", running.GetUID()))))
		Expect(e.Status(ctx, first)().RemediationOutcomes).NotTo(ContainElement(HaveField("Name", sick.Name)))
		Expect(e.TestCRs(ctx, sick.Name)()).To(BeEmpty())
		Eventually(nodeLease(ctx, recovering.Name), time.Minute).Should(BeNil(), "the kept lease is released once nothing runs on the node")
		Expect(e.K8s.Delete(ctx, third)).To(Succeed())
		Expect(e.K8s.Delete(ctx, second)).To(Succeed())
		Expect(e.K8s.Delete(ctx, first)).To(Succeed())
	})
})

package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// brokenRemediatorCRDs are a remediator's template kind and a CR kind served in two versions whose
// conversion webhook does not answer: reading its CRs in the version the template names fails.
func brokenRemediatorCRDs() []*apiextensionsv1.CustomResourceDefinition {
	open := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}
	crd := func(kind string, versions []string, conversion *apiextensionsv1.CustomResourceConversion) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "broken" + lower(kind) + "s.broken.medik8s.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "broken.medik8s.io", Scope: apiextensionsv1.NamespaceScoped, Conversion: conversion,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Broken" + kind, ListKind: "Broken" + kind + "List", Plural: "broken" + lower(kind) + "s"}},
		}
		for i, v := range versions {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: i == len(versions)-1, Schema: open})
		}
		return c
	}
	down := &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"}, ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/convert")}}}
	return []*apiextensionsv1.CustomResourceDefinition{
		crd("RemediationTemplate", []string{"v1alpha1"}, nil),
		crd("Remediation", []string{"v1alpha1", "v1"}, down),
	}
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
})

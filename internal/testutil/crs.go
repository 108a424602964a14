package testutil

import (
	"context"
	"slices"

	. "github.com/onsi/gomega" //nolint:revive // test helpers
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Remediation CR kinds of the test remediators (test/crds).
var (
	TestRemediationKind        = schema.GroupVersionKind{Group: "test.medik8s.io", Version: "v1alpha1", Kind: "TestRemediation"}
	ClusterTestRemediationKind = schema.GroupVersionKind{Group: "test.medik8s.io", Version: "v1alpha1", Kind: "ClusterTestRemediation"}
	SelfNodeRemediationKind    = schema.GroupVersionKind{Group: "self-node-remediation.medik8s.io", Version: "v1alpha1", Kind: "SelfNodeRemediation"}
	Metal3RemediationKind      = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: "Metal3Remediation"}
)

// ListCRs lists the remediation CRs of the kinds in the namespace ("": every namespace) whose
// node-name annotation names the node ("": every CR), oldest first: by creationTimestamp; within
// one second (the API's precision) by spec.step where the spec carries one (the test templates of
// escalation steps do), then in the order of the kinds given.
func ListCRs(ctx context.Context, c client.Reader, namespace, node string, kinds ...schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, k := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.GroupVersion().WithKind(k.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		for _, cr := range list.Items {
			if node == "" || cr.GetAnnotations()[remediationv1alpha1.NodeNameAnnotation] == node {
				out = append(out, cr)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b unstructured.Unstructured) int {
		if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		sa, _, _ := unstructured.NestedInt64(a.Object, "spec", "step")
		sb, _, _ := unstructured.NestedInt64(b.Object, "spec", "step")
		return int(sa - sb)
	})
	return out, nil
}

// TemplateNames returns the template each CR was created from (its template-name annotation).
func TemplateNames(crs []unstructured.Unstructured) []string {
	var out []string
	for _, cr := range crs {
		out = append(out, cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation])
	}
	return out
}

// NodeCRs returns a function listing, through c, the node's remediation CRs of the kinds in
// TemplateNamespace, oldest first (ListCRs), for Eventually.
func NodeCRs(ctx context.Context, c client.Reader, node string, kinds ...schema.GroupVersionKind) func() []unstructured.Unstructured {
	return func() []unstructured.Unstructured {
		crs, err := ListCRs(ctx, c, TemplateNamespace, node, kinds...)
		Expect(err).NotTo(HaveOccurred())
		return crs
	}
}

// CRsOf is NodeCRs through the uncached client.
func (e *ControllerEnv) CRsOf(ctx context.Context, node string, kinds ...schema.GroupVersionKind) func() []unstructured.Unstructured {
	return NodeCRs(ctx, e.K8s, node, kinds...)
}

// TestCRs lists the node's TestRemediations (see CRsOf).
func (e *ControllerEnv) TestCRs(ctx context.Context, node string) func() []unstructured.Unstructured {
	return e.CRsOf(ctx, node, TestRemediationKind)
}

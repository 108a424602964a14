package nhc

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// templateProblem says why a NodeHealthCheck cannot use its templates; nil when it can.
type templateProblem struct {
	reason  string
	message string
}

// RemediationGVK returns the remediation CR kind a template kind stands for: the same group and
// version, the kind without the "Template" suffix.
func RemediationGVK(template corev1.ObjectReference) schema.GroupVersionKind {
	gvk := template.GroupVersionKind()
	gvk.Kind = strings.TrimSuffix(gvk.Kind, remediationv1alpha1.TemplateSuffix)
	return gvk
}

// checkTemplates reads every referenced template from the cache and reports the first problem.
func checkTemplates(ctx context.Context, c client.Reader, spec *remediationv1alpha1.NodeHealthCheckSpec) (*templateProblem, error) {
	for _, ref := range spec.TemplateRefs() {
		t := &unstructured.Unstructured{}
		t.SetGroupVersionKind(ref.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, t)
		switch {
		case meta.IsNoMatchError(err):
			return &templateProblem{remediationv1alpha1.ConditionReasonDisabledTemplateNotFound,
				fmt.Sprintf("Kind %s of template %s/%s is not served by the API server; is its remediator installed?", ref.Kind, ref.Namespace, ref.Name)}, nil
		case apierrors.IsNotFound(err):
			return &templateProblem{remediationv1alpha1.ConditionReasonDisabledTemplateNotFound,
				fmt.Sprintf("Remediation template %s %s/%s not found", ref.Kind, ref.Namespace, ref.Name)}, nil
		case err != nil:
			return nil, fmt.Errorf("getting template %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
		}
		if _, found, _ := unstructured.NestedMap(t.Object, "spec", "template"); !found {
			return &templateProblem{remediationv1alpha1.ConditionReasonDisabledTemplateInvalid,
				fmt.Sprintf("Remediation template %s %s/%s has no spec.template", ref.Kind, ref.Namespace, ref.Name)}, nil
		}
	}
	return nil, nil
}

// selectedNodes lists the nodes the selector selects.
func selectedNodes(ctx context.Context, c client.Reader, selector *metav1.LabelSelector) ([]corev1.Node, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("parsing selector: %w", err)
	}
	list := &corev1.NodeList{}
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return list.Items, nil
}

// remediationCRs returns the remediation CRs this NodeHealthCheck owns, by node name. A CR names its
// node by the node-name annotation, or by its own name.
func remediationCRs(ctx context.Context, c client.Reader, nhc *remediationv1alpha1.NodeHealthCheck) (map[string][]unstructured.Unstructured, error) {
	byNode := map[string][]unstructured.Unstructured{}
	seen := map[schema.GroupVersionKind]map[string]bool{}
	for _, ref := range nhc.Spec.TemplateRefs() {
		gvk := RemediationGVK(ref)
		if seen[gvk][ref.Namespace] {
			continue
		}
		if seen[gvk] == nil {
			seen[gvk] = map[string]bool{}
		}
		seen[gvk][ref.Namespace] = true
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ref.Namespace)); err != nil {
			if meta.IsNoMatchError(err) {
				continue // reported as a template problem
			}
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for _, cr := range list.Items {
			if !ownedBy(&cr, nhc.UID) {
				continue
			}
			node := cr.GetAnnotations()[remediationv1alpha1.NodeNameAnnotation]
			if node == "" {
				node = cr.GetName()
			}
			byNode[node] = append(byNode[node], cr)
		}
	}
	return byNode, nil
}

func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.UID == uid {
			return true
		}
	}
	return false
}

// Package remediationcr implements the remediation template contract shared by the controllers:
// the remediation kind of a template kind, building a remediation CR from a template for a node, and
// telling which NodeHealthCheck controls a CR, and reading a CR as an escalation step. Build is
// pure; CRs are found by internal/targets.
package remediationcr

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// GVK returns the remediation CR kind a template kind stands for: the same group and version, the
// kind without the "Template" suffix.
func GVK(template corev1.ObjectReference) schema.GroupVersionKind {
	gvk := template.GroupVersionKind()
	gvk.Kind = strings.TrimSuffix(gvk.Kind, remediationv1alpha1.TemplateSuffix)
	return gvk
}

// NodeName returns the node a remediation CR remediates: its node-name annotation, or its name.
func NodeName(cr metav1.Object) string {
	if n, _ := Annotation(cr, remediationv1alpha1.NodeNameAnnotation); n != "" {
		return n
	}
	return cr.GetName()
}

// Annotation returns one annotation of an object and whether it has it. Unlike GetAnnotations it
// copies nothing of an unstructured object: every decision reads every CR of a kind (900 in the
// scale benchmark's outage), and copying their annotations was a tenth of the manager's garbage.
func Annotation(obj metav1.Object, key string) (string, bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return metadataString(u, "annotations", key)
	}
	v, ok := obj.GetAnnotations()[key]
	return v, ok
}

// Label is Annotation for a label.
func Label(obj metav1.Object, key string) (string, bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return metadataString(u, "labels", key)
	}
	v, ok := obj.GetLabels()[key]
	return v, ok
}

// metadataString reads metadata.<field>[key] of an unstructured object in place.
func metadataString(u *unstructured.Unstructured, field, key string) (string, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, "metadata", field, key)
	if !found || err != nil {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// SupportsMultiple reports whether a template's remediator handles several CRs per node.
func SupportsMultiple(template metav1.Object) bool {
	return template.GetAnnotations()[remediationv1alpha1.MultipleTemplatesSupportAnnotation] == "true"
}

// TemplateSpec returns the spec a CR built from the template gets: its spec.template.spec (empty when
// it has none). A template without a spec.template object, or whose spec.template.spec is not an
// object, is invalid: a CR built from it would carry an empty spec the remediator never asked for.
func TemplateSpec(template *unstructured.Unstructured) (map[string]any, error) {
	outer, found := template.Object["spec"].(map[string]any)
	tmpl, isMap := outer["template"].(map[string]any)
	if !found || !isMap {
		return nil, fmt.Errorf("template %s %s/%s has no spec.template object", template.GetKind(), template.GetNamespace(), template.GetName())
	}
	raw, present := tmpl["spec"]
	if !present || raw == nil {
		return map[string]any{}, nil
	}
	spec, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("template %s %s/%s has a spec.template.spec of type %T, not an object", template.GetKind(), template.GetNamespace(), template.GetName(), raw)
	}
	return spec, nil
}

// Machine is what a node's verified Machine adds to its CR (internal/targets.MachineLink); the zero
// value: none.
type Machine struct {
	// Owner references the Machine; nil when it lives in another namespace than the CR.
	Owner *metav1.OwnerReference
	// ControlPlane is set for a control-plane Machine.
	ControlPlane bool
}

// Build returns the remediation CR for node from template: the template's apiVersion and namespace,
// its kind without "Template", the node's name (or generateName "<node>-" where the template supports
// several CRs per node), the node-name and template-name annotations, the part-of label and, for a
// control-plane node (by its role labels or its verified Machine), the isControlPlaneNode label, an
// owner reference to the NodeHealthCheck (not a controller reference, as the public operator sets
// it: that one is left to the remediator), an owner reference to the node's verified Machine when
// given, and spec copied from the template's spec.template.spec.
func Build(template *unstructured.Unstructured, owner *remediationv1alpha1.NodeHealthCheck, target *corev1.Node, machine Machine) (*unstructured.Unstructured, error) {
	node := target.Name
	kind := template.GetKind()
	if !strings.HasSuffix(kind, remediationv1alpha1.TemplateSuffix) || kind == remediationv1alpha1.TemplateSuffix {
		return nil, fmt.Errorf("template kind %q does not end with %q", kind, remediationv1alpha1.TemplateSuffix)
	}
	spec, err := TemplateSpec(template)
	if err != nil {
		return nil, err
	}
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": runtimeDeepCopy(spec)}}
	cr.SetAPIVersion(template.GetAPIVersion())
	cr.SetKind(strings.TrimSuffix(kind, remediationv1alpha1.TemplateSuffix))
	cr.SetNamespace(template.GetNamespace())
	if SupportsMultiple(template) {
		cr.SetGenerateName(generateNamePrefix(node))
	} else {
		cr.SetName(node)
	}
	cr.SetAnnotations(map[string]string{
		remediationv1alpha1.NodeNameAnnotation:     node,
		remediationv1alpha1.TemplateNameAnnotation: template.GetName(),
	})
	labels := map[string]string{remediationv1alpha1.PartOfLabel: remediationv1alpha1.PartOfValue}
	if IsControlPlane(target.Labels) || machine.ControlPlane {
		labels[remediationv1alpha1.ControlPlaneCRLabel] = ""
	}
	cr.SetLabels(labels)
	refs := []metav1.OwnerReference{{
		APIVersion: remediationv1alpha1.GroupVersion.String(), Kind: "NodeHealthCheck",
		Name: owner.Name, UID: owner.UID, Controller: ptr.To(false),
	}}
	if machine.Owner != nil {
		refs = append(refs, *machine.Owner)
	}
	cr.SetOwnerReferences(refs)
	return cr, nil
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// Control-plane role labels; a node with either is a control-plane node.
const (
	ControlPlaneRoleLabel = "node-role.kubernetes.io/control-plane"
	MasterRoleLabel       = "node-role.kubernetes.io/master"
)

// IsControlPlane reports whether a node's labels give it a control-plane (or master) role.
func IsControlPlane(labels map[string]string) bool {
	_, cp := labels[ControlPlaneRoleLabel]
	_, master := labels[MasterRoleLabel]
	return cp || master
}

// ControllerNHC returns the name and UID of the NodeHealthCheck that owns a CR, if any: the first
// owner reference to a NodeHealthCheck, controller or not (the public operator's are not, ours were
// before).
func ControllerNHC(cr metav1.Object) (string, types.UID, bool) {
	if u, ok := cr.(*unstructured.Unstructured); ok {
		// In place, as Annotation: GetOwnerReferences builds a new slice of every reference.
		refs, _, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "ownerReferences")
		list, _ := refs.([]any)
		for _, r := range list {
			if o, _ := r.(map[string]any); o["kind"] == "NodeHealthCheck" && o["apiVersion"] == remediationv1alpha1.GroupVersion.String() {
				name, _ := o["name"].(string)
				uid, _ := o["uid"].(string)
				return name, types.UID(uid), true
			}
		}
		return "", "", false
	}
	for _, o := range cr.GetOwnerReferences() {
		if o.Kind == "NodeHealthCheck" && o.APIVersion == remediationv1alpha1.GroupVersion.String() {
			return o.Name, o.UID, true
		}
	}
	return "", "", false
}

// Condition returns the status of a condition of a remediation CR (status.conditions[type]), or ""
// when it has none.
func Condition(cr *unstructured.Unstructured, conditionType string) metav1.ConditionStatus {
	conds, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != conditionType {
			continue
		}
		s, _ := m["status"].(string)
		return metav1.ConditionStatus(s)
	}
	return ""
}

// StepKeyOf returns the escalation step a CR of the kind was created for from the named template.
func StepKeyOf(crKind, templateName string) health.StepKey {
	return health.StepKey{TemplateKind: crKind + remediationv1alpha1.TemplateSuffix, TemplateName: templateName}
}

// StepCR returns the CR as escalation sees it: its step, creation time, timeout mark and Succeeded
// condition.
func StepCR(cr *unstructured.Unstructured) health.StepCR {
	mark := cr.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]
	markedAt, _ := time.Parse(time.RFC3339, mark)
	return health.StepCR{
		StepKey:    StepKeyOf(cr.GetKind(), cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]),
		Created:    cr.GetCreationTimestamp().Time,
		TimedOut:   mark != "",
		TimedOutAt: markedAt,
		Succeeded:  Condition(cr, remediationv1alpha1.RemediationConditionSucceeded),
	}
}

// PatchAnnotation sets (value non-nil) or removes (nil) one annotation of obj with a merge patch
// that touches nothing else, and updates obj.
func PatchAnnotation(ctx context.Context, c client.Writer, obj client.Object, key string, value *string) error {
	var v any
	if value != nil {
		v = *value
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

// maxGenerateNamePrefix is the longest generateName the API server accepts: it appends five random
// characters to at most 248 of them, and validates the prefix itself as a name.
const maxGenerateNamePrefix = 248

// generateNamePrefix is "<node>-", cut for node names so long that it would not be a valid prefix
// (the node-name annotation keeps the whole name).
func generateNamePrefix(node string) string {
	if len(node)+1 <= maxGenerateNamePrefix {
		return node + "-"
	}
	return strings.TrimRight(node[:maxGenerateNamePrefix-1], ".-") + "-"
}

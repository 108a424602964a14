package targets

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/templateaccess"
)

// Problem says why a NodeHealthCheck cannot work (its Disabled condition's reason and message).
type Problem struct {
	// Reason is the Disabled condition's reason.
	Reason string
	// Message explains it to an administrator.
	Message string
}

// TemplateGetter reads templates (templateaccess.Reader, or a client).
type TemplateGetter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// TemplatesThrough is how the controllers read templates: through a, with the rights remediators
// grant, or through c (the cache) where a is nil.
func TemplatesThrough(a *templateaccess.Reader, c client.Reader) TemplateGetter {
	if a != nil {
		return a
	}
	return c
}

// Metal3TemplateKind is Metal3's remediation template; on OpenShift it must be in
// MachineAPINamespace, where the Machines it remediates through are (as the public operator checks).
const (
	Metal3TemplateKind  = "Metal3RemediationTemplate"
	MachineAPINamespace = "openshift-machine-api"
)

// CheckTemplates reads every referenced template and reports the first problem: missing, invalid, or
// of a kind that cannot be read now (c returns a NotReadableError, see KindSync). On OpenShift a
// Metal3RemediationTemplate outside openshift-machine-api is one (as for the public operator; on
// other clusters Metal3's Machines live in any namespace).
func CheckTemplates(ctx context.Context, c TemplateGetter, spec *remediationv1alpha1.NodeHealthCheckSpec, openShift bool) (*Problem, error) {
	_, problem, err := readTemplates(ctx, c, spec, openShift)
	return problem, err
}

// templateKey names a template: its reference's apiVersion, kind, namespace and name.
type templateKey struct{ apiVersion, kind, namespace, name string }

func keyOf(ref corev1.ObjectReference) templateKey {
	return templateKey{ref.APIVersion, ref.Kind, ref.Namespace, ref.Name}
}

// readTemplates is CheckTemplates, and returns the templates read (all of them when there is no
// problem), for the CRs built from them.
func readTemplates(ctx context.Context, c TemplateGetter, spec *remediationv1alpha1.NodeHealthCheckSpec, openShift bool) (map[templateKey]*unstructured.Unstructured, *Problem, error) {
	read := map[templateKey]*unstructured.Unstructured{}
	for _, ref := range spec.TemplateRefs() {
		if openShift && ref.Kind == Metal3TemplateKind && ref.Namespace != MachineAPINamespace {
			// Metal3 remediates through the node's Machine, which on OpenShift lives there.
			return nil, &Problem{remediationv1alpha1.ConditionReasonDisabledTemplateInvalid,
				fmt.Sprintf("%s must be in the %s namespace. It is configured to be in namespace: %s", Metal3TemplateKind, MachineAPINamespace, ref.Namespace)}, nil
		}
		if ref.GroupVersionKind().Group == "" {
			// PodTemplate would make Pods the remediation CRs.
			return nil, &Problem{remediationv1alpha1.ConditionReasonDisabledTemplateInvalid,
				fmt.Sprintf("Remediation template %s %s/%s is of the core API group; remediation templates are custom resources of their remediator", ref.Kind, ref.Namespace, ref.Name)}, nil
		}
		t := &unstructured.Unstructured{}
		t.SetGroupVersionKind(ref.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, t)
		switch {
		case meta.IsNoMatchError(err):
			return nil, &Problem{remediationv1alpha1.ConditionReasonDisabledTemplateNotFound,
				fmt.Sprintf("Kind %s of template %s/%s is not served by the API server; is its remediator installed?", ref.Kind, ref.Namespace, ref.Name)}, nil
		case apierrors.IsNotFound(err):
			return nil, &Problem{remediationv1alpha1.ConditionReasonDisabledTemplateNotFound,
				fmt.Sprintf("Remediation template %s %s/%s not found", ref.Kind, ref.Namespace, ref.Name)}, nil
		case IsNotReadable(err):
			// Unknown is not free, and no read waits for ever: a template whose kind cannot be read
			// now (its conversion webhook down) disables, and is looked at again when the kind's
			// informer syncs (its events) or at the next recheck.
			return nil, &Problem{remediationv1alpha1.ConditionReasonDisabledTemplateUnavailable,
				fmt.Sprintf("Remediation template %s %s/%s cannot be read, so no remediation can be built from it: %v", ref.Kind, ref.Namespace, ref.Name, err)}, nil
		case err != nil:
			return nil, nil, fmt.Errorf("getting template %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
		}
		if _, err := remediationcr.TemplateSpec(t); err != nil {
			return nil, &Problem{remediationv1alpha1.ConditionReasonDisabledTemplateInvalid, "Remediation " + err.Error()}, nil
		}
		read[keyOf(ref)] = t
	}
	return read, nil, nil
}

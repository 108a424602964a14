package v1alpha1

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/openshift"
	"github.com/medik8s/node-healthcheck/internal/templateaccess"
)

// Webhook paths, the conventional ones controller-runtime derives from the group, version and kind.
const (
	MutatePath   = "/mutate-remediation-medik8s-io-v1alpha1-nodehealthcheck"
	ValidatePath = "/validate-remediation-medik8s-io-v1alpha1-nodehealthcheck"
)

// lookupTimeout bounds the lookups (control-plane topology, then templates) of one admission request.
// The webhook configurations allow 5s; a lookup that cannot be answered sooner (a template kind the
// operator may not list, say) refuses the request with a clear message instead of timing out the API
// server's call.
const lookupTimeout = 3 * time.Second

// ControlPlaneTopologyDualReplica is the status.controlPlaneTopology of OpenShift's Infrastructure/cluster
// on a two-node cluster with fencing. The cluster fences its own nodes there, so NodeHealthCheck is not
// supported and the validating webhook refuses to create or update one.
const ControlPlaneTopologyDualReplica = "DualReplica"

// +kubebuilder:webhook:path=/mutate-remediation-medik8s-io-v1alpha1-nodehealthcheck,mutating=true,failurePolicy=fail,sideEffects=None,groups=remediation.medik8s.io,resources=nodehealthchecks,verbs=create;update,versions=v1alpha1,name=mnodehealthcheck.remediation.medik8s.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-remediation-medik8s-io-v1alpha1-nodehealthcheck,mutating=false,failurePolicy=fail,sideEffects=None,groups=remediation.medik8s.io,resources=nodehealthchecks,verbs=create;update;delete,versions=v1alpha1,name=vnodehealthcheck.remediation.medik8s.io,admissionReviewVersions=v1,timeoutSeconds=5

// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get;list;watch

// SetupWithManager registers the defaulting and validating webhooks on the manager's webhook server.
// Template lookups use the manager's RESTMapper and cache; the control-plane topology is read straight
// from the API server (mgr.GetAPIReader), so it is never stale and no informer is started for it.
func SetupWithManager(mgr ctrl.Manager) error {
	v := &Validator{
		Lookup: &CachedTemplateLookup{Mapper: mgr.GetRESTMapper(), Reader: &templateaccess.Reader{
			Cached: mgr.GetClient(), Direct: mgr.GetAPIReader(), Reviewer: mgr.GetClient(), Mapper: mgr.GetRESTMapper()}},
		Topology: &InfrastructureTopologyReader{Reader: mgr.GetAPIReader()},
	}
	return ctrl.NewWebhookManagedBy(mgr, &remediationv1alpha1.NodeHealthCheck{}).
		WithDefaulter(Defaulter{}).
		WithValidator(v).
		Complete()
}

// Defaulter applies the API's defaults (remediationv1alpha1.SetDefaults) to every created or updated
// NodeHealthCheck.
type Defaulter struct{}

var _ admission.Defaulter[*remediationv1alpha1.NodeHealthCheck] = Defaulter{}

// Default applies the defaults in place.
func (Defaulter) Default(_ context.Context, nhc *remediationv1alpha1.NodeHealthCheck) error {
	remediationv1alpha1.SetDefaults(nhc)
	return nil
}

// TemplateLookup answers what validation cannot tell from the NodeHealthCheck alone.
type TemplateLookup interface {
	// Scope reports whether the kind is namespaced; known is false when the API server does not
	// serve the kind (its CRD is not installed yet).
	Scope(gvk schema.GroupVersionKind) (namespaced, known bool, err error)
	// Annotations returns the annotations of the referenced template; found is false when it does
	// not exist.
	Annotations(ctx context.Context, ref corev1.ObjectReference) (annotations map[string]string, found bool, err error)
}

// TopologyReader reports the cluster's control-plane topology.
type TopologyReader interface {
	// ControlPlaneTopology returns status.controlPlaneTopology of OpenShift's Infrastructure/cluster,
	// or "" when the cluster does not have one (not OpenShift, or the object does not exist).
	ControlPlaneTopology(ctx context.Context) (string, error)
}

// Validator refuses NodeHealthChecks that cannot work, on create, update and delete.
type Validator struct {
	// Lookup answers questions about referenced templates; nil skips those rules.
	Lookup TemplateLookup
	// Topology reports the cluster's control-plane topology; nil skips the topology rule.
	Topology TopologyReader
}

var _ admission.Validator[*remediationv1alpha1.NodeHealthCheck] = &Validator{}

// ValidateCreate validates a new NodeHealthCheck. On a cluster whose topology NodeHealthCheck does
// not support it is refused before its spec is looked at: no spec would work there.
func (v *Validator) ValidateCreate(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck) (admission.Warnings, error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	if err := validateTopology(ctx, v.Topology, nhc.Name); err != nil {
		return nil, err
	}
	errs, warnings := v.validate(ctx, nhc)
	return warnings, toAPIError(nhc, errs)
}

// ValidateUpdate validates a changed NodeHealthCheck, including the rules that compare it with the
// old one. An object that is being deleted is exempt from the topology rule, so that its finalizers
// can still be removed: deletion is always allowed and must be able to complete.
func (v *Validator) ValidateUpdate(ctx context.Context, oldNHC, newNHC *remediationv1alpha1.NodeHealthCheck) (admission.Warnings, error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	if newNHC.DeletionTimestamp == nil {
		if err := validateTopology(ctx, v.Topology, newNHC.Name); err != nil {
			return nil, err
		}
	}
	errs, warnings := v.validate(ctx, newNHC)
	errs = append(errs, ValidateUpdate(oldNHC, newNHC)...)
	return warnings, toAPIError(newNHC, errs)
}

// ValidateDelete refuses to delete a NodeHealthCheck that is remediating. The topology rule does not
// apply: a NodeHealthCheck on an unsupported cluster can always be deleted.
func (v *Validator) ValidateDelete(_ context.Context, nhc *remediationv1alpha1.NodeHealthCheck) (admission.Warnings, error) {
	if err := ValidateDelete(nhc); err != nil {
		return nil, apierrors.NewForbidden(nhcResource, nhc.Name, err)
	}
	return nil, nil
}

// nhcResource names NodeHealthChecks in Forbidden refusals.
var nhcResource = remediationv1alpha1.GroupVersion.WithResource("nodehealthchecks").GroupResource()

// validate runs the spec rules and, with a Lookup, the template lookups; ctx bounds the lookups.
func (v *Validator) validate(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck) (field.ErrorList, admission.Warnings) {
	errs := ValidateSpec(&nhc.Spec)
	if v.Lookup == nil {
		return errs, nil
	}
	lookupErrs, warnings := validateTemplateLookups(ctx, &nhc.Spec, v.Lookup)
	return append(errs, lookupErrs...), warnings
}

// validateTopology refuses a NodeHealthCheck named name on a cluster whose control-plane topology
// NodeHealthCheck does not support (Forbidden), and when the topology cannot be read (InternalError,
// asking to retry: admission is rare, so failing closed costs little and never admits a
// NodeHealthCheck onto a cluster that fences its own nodes). A nil reader checks nothing.
func validateTopology(ctx context.Context, reader TopologyReader, name string) error {
	if reader == nil {
		return nil
	}
	topology, err := reader.ControlPlaneTopology(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("the cluster's control-plane topology could not be read to check that "+
			"NodeHealthCheck is supported on this cluster; retry the request: %w", err))
	}
	if topology == ControlPlaneTopologyDualReplica {
		return apierrors.NewForbidden(nhcResource, name, errors.New("NodeHealthCheck is not supported on this cluster: "+
			"Infrastructure/"+openshift.InfrastructureName+" reports status.controlPlaneTopology "+ControlPlaneTopologyDualReplica+
			" (two-node OpenShift with fencing), whose nodes are fenced by the cluster itself"))
	}
	return nil
}

// templateAt is a template reference with its field path.
type templateAt struct {
	ref  corev1.ObjectReference
	path *field.Path
}

// allTemplates returns every template reference of the spec with its field path: remediationTemplate
// and the escalation steps in list order (a valid spec has only one of the two).
func allTemplates(spec *remediationv1alpha1.NodeHealthCheckSpec) []templateAt {
	var out []templateAt
	if spec.RemediationTemplate != nil {
		out = append(out, templateAt{*spec.RemediationTemplate, specPath.Child("remediationTemplate")})
	}
	for i, e := range spec.EscalatingRemediations {
		out = append(out, templateAt{e.RemediationTemplate, specPath.Child("escalatingRemediations").Index(i).Child("remediationTemplate")})
	}
	return out
}

// validateTemplateLookups checks the rules that need the API: the template's namespace matches its
// kind's scope, a template is not referenced twice, and a kind used by several escalation steps
// supports several remediations per node.
func validateTemplateLookups(ctx context.Context, spec *remediationv1alpha1.NodeHealthCheckSpec, lookup TemplateLookup) (field.ErrorList, admission.Warnings) {
	var errs field.ErrorList
	var warnings admission.Warnings
	templates := allTemplates(spec)

	for _, t := range templates {
		gv, err := schema.ParseGroupVersion(t.ref.APIVersion)
		if err != nil || t.ref.Kind == "" || t.ref.Name == "" {
			continue // already reported by ValidateSpec
		}
		gvk := gv.WithKind(t.ref.Kind)
		namespaced, known, err := lookup.Scope(gvk)
		switch {
		case err != nil:
			errs = append(errs, field.InternalError(t.path, fmt.Errorf("looking up kind %s: %w", gvk, err)))
		case !known:
			warnings = append(warnings, fmt.Sprintf("%s: kind %s is not served by the API server (is its remediator installed?); "+
				"the NodeHealthCheck stays disabled until it is", t.path, gvk.Kind))
		case namespaced && t.ref.Namespace == "":
			errs = append(errs, field.Required(t.path.Child("namespace"), fmt.Sprintf("kind %s is namespaced: the template's namespace is required", gvk.Kind)))
		case !namespaced && t.ref.Namespace != "":
			errs = append(errs, field.Invalid(t.path.Child("namespace"), t.ref.Namespace, fmt.Sprintf("kind %s is cluster-scoped: namespace must be empty", gvk.Kind)))
		}
	}

	// Group the escalation steps by template kind; only escalation references several templates.
	byKind := map[schema.GroupKind][]templateAt{}
	var kinds []schema.GroupKind
	seenRef := map[corev1.ObjectReference]bool{}
	escalationSteps := templates
	if spec.RemediationTemplate != nil {
		escalationSteps = templates[1:]
	}
	for _, t := range escalationSteps {
		gv, err := schema.ParseGroupVersion(t.ref.APIVersion)
		if err != nil || t.ref.Kind == "" || t.ref.Name == "" {
			continue
		}
		id := corev1.ObjectReference{APIVersion: gv.Group, Kind: t.ref.Kind, Namespace: t.ref.Namespace, Name: t.ref.Name}
		if seenRef[id] {
			errs = append(errs, field.Duplicate(t.path, fmt.Sprintf("%s %s", t.ref.Kind, types.NamespacedName{Namespace: t.ref.Namespace, Name: t.ref.Name})))
			continue
		}
		seenRef[id] = true
		gk := schema.GroupKind{Group: gv.Group, Kind: t.ref.Kind}
		if _, ok := byKind[gk]; !ok {
			kinds = append(kinds, gk)
		}
		byKind[gk] = append(byKind[gk], t)
	}
	for _, gk := range kinds {
		steps := byKind[gk]
		if len(steps) < 2 {
			continue
		}
		for _, t := range steps {
			annotations, found, err := lookup.Annotations(ctx, t.ref)
			nn := types.NamespacedName{Namespace: t.ref.Namespace, Name: t.ref.Name}
			switch {
			case err != nil:
				errs = append(errs, field.InternalError(t.path, fmt.Errorf("kind %s is used by more than one step, and template %s could not be read to confirm it supports that: %w", gk.Kind, nn, err)))
			case !found:
				errs = append(errs, field.Invalid(t.path, nn.String(), fmt.Sprintf("kind %s is used by more than one step, which needs every template of that kind to carry annotation %s=true; template %s was not found",
					gk.Kind, remediationv1alpha1.MultipleTemplatesSupportAnnotation, nn)))
			case annotations[remediationv1alpha1.MultipleTemplatesSupportAnnotation] != "true":
				errs = append(errs, field.Invalid(t.path, nn.String(), fmt.Sprintf("kind %s is used by more than one step, which needs every template of that kind to carry annotation %s=true; template %s does not",
					gk.Kind, remediationv1alpha1.MultipleTemplatesSupportAnnotation, nn)))
			}
		}
	}
	return errs, warnings
}

func toAPIError(nhc *remediationv1alpha1.NodeHealthCheck, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck").GroupKind(), nhc.Name, errs)
}

// CachedTemplateLookup answers template questions from the manager's RESTMapper (discovery, cached)
// and cache (a metadata-only informer per template kind, started on first use and shared with the
// controllers), so admission never makes an uncached API call per request.
type CachedTemplateLookup struct {
	// Mapper maps template kinds to resources and scopes.
	Mapper meta.RESTMapper
	// Reader reads template metadata: through the manager's cache when the operator may list and
	// watch the kind, directly otherwise (templateaccess.Reader).
	Reader interface {
		Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	}
}

// Scope implements TemplateLookup.
func (l *CachedTemplateLookup) Scope(gvk schema.GroupVersionKind) (namespaced, known bool, err error) {
	mapping, err := l.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return mapping.Scope.Name() == meta.RESTScopeNameNamespace, true, nil
}

// Annotations implements TemplateLookup.
func (l *CachedTemplateLookup) Annotations(ctx context.Context, ref corev1.ObjectReference) (map[string]string, bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.GroupVersionKind())
	err := l.Reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return obj.GetAnnotations(), true, nil
}

// InfrastructureTopologyReader reads the control-plane topology from OpenShift's Infrastructure/cluster,
// as unstructured so that the operator needs no OpenShift API types.
type InfrastructureTopologyReader struct {
	// Reader reads Infrastructure/cluster; the manager's API reader (uncached) in production.
	Reader client.Reader
}

var _ TopologyReader = &InfrastructureTopologyReader{}

// ControlPlaneTopology implements TopologyReader. A cluster that does not serve the Infrastructure
// kind (not OpenShift) or has no Infrastructure/cluster object reports "".
func (r *InfrastructureTopologyReader) ControlPlaneTopology(ctx context.Context) (string, error) {
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(openshift.Infrastructure)
	err := r.Reader.Get(ctx, client.ObjectKey{Name: openshift.InfrastructureName}, infra)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading Infrastructure/%s: %w", openshift.InfrastructureName, err)
	}
	topology, _, err := unstructured.NestedString(infra.Object, "status", "controlPlaneTopology")
	if err != nil {
		return "", fmt.Errorf("reading status.controlPlaneTopology of Infrastructure/%s: %w", openshift.InfrastructureName, err)
	}
	return topology, nil
}

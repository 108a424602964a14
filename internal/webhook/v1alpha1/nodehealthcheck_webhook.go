package v1alpha1

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/templateaccess"
)

// Webhook paths, the conventional ones controller-runtime derives from the group, version and kind.
const (
	MutatePath   = "/mutate-remediation-medik8s-io-v1alpha1-nodehealthcheck"
	ValidatePath = "/validate-remediation-medik8s-io-v1alpha1-nodehealthcheck"
)

// +kubebuilder:webhook:path=/mutate-remediation-medik8s-io-v1alpha1-nodehealthcheck,mutating=true,failurePolicy=fail,sideEffects=None,groups=remediation.medik8s.io,resources=nodehealthchecks,verbs=create;update,versions=v1alpha1,name=mnodehealthcheck.kb.io,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-remediation-medik8s-io-v1alpha1-nodehealthcheck,mutating=false,failurePolicy=fail,sideEffects=None,groups=remediation.medik8s.io,resources=nodehealthchecks,verbs=create;update;delete,versions=v1alpha1,name=vnodehealthcheck.kb.io,admissionReviewVersions=v1,timeoutSeconds=5

// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get;list;watch

// SetupWithManager registers the defaulting and validating webhooks on the manager's webhook server.
// Template lookups use the manager's RESTMapper and cache (templateaccess.Reader); the control-plane
// topology is read from the manager's cache (InfrastructureTopologyReader), whose informer for
// OpenShift's Infrastructure starts on the first admission request and sees a change as the watch
// delivers it (NewValidator).
func SetupWithManager(mgr ctrl.Manager) error {
	v := NewValidator(mgr)
	if err := ctrl.NewWebhookManagedBy(mgr, &remediationv1alpha1.NodeHealthCheck{}).
		WithDefaulter(Defaulter{}).
		Complete(); err != nil {
		return err
	}
	mgr.GetWebhookServer().Register(ValidatePath, ValidatingWebhook(mgr.GetScheme(), v))
	return nil
}

// NewValidator returns the validator with the production lookups: template scopes from the manager's
// RESTMapper, template annotations through its cache (templateaccess.Reader), the control-plane
// topology from its cache. SetupWithManager serves it; the admission benchmark drives it.
func NewValidator(mgr ctrl.Manager) *Validator {
	return &Validator{
		Lookup: &CachedTemplateLookup{Mapper: mgr.GetRESTMapper(), Reader: &templateaccess.Reader{
			Cached: mgr.GetClient(), Direct: mgr.GetAPIReader(), Reviewer: mgr.GetClient(), Mapper: mgr.GetRESTMapper()}},
		Topology: &InfrastructureTopologyReader{Reader: mgr.GetCache()},
		Cluster:  mgr.GetClient(),
	}
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

// Validator refuses NodeHealthChecks that cannot work, on create, update and delete.
type Validator struct {
	// Lookup answers questions about referenced templates; nil skips those rules.
	Lookup TemplateLookup
	// Topology reports the cluster's control-plane topology; nil skips the topology rule.
	Topology TopologyReader
	// Cluster reads nodes and NodeHealthChecks (the manager's cache) to warn about selectors that
	// select nodes another NodeHealthCheck selects; nil skips the warning.
	Cluster client.Reader
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
	selectorErrs, selectorWarnings := ValidateSelectorPresent(nil, nhc)
	return append(warnings, selectorWarnings...), toAPIError(nhc, append(selectorErrs, errs...))
}

// ValidateUpdate validates a changed NodeHealthCheck, including the rules that compare it with the
// old one. An object that is being deleted is exempt from the topology rule, so that its finalizers
// can still be removed: deletion is always allowed and must be able to complete.
func (v *Validator) ValidateUpdate(ctx context.Context, oldNHC, newNHC *remediationv1alpha1.NodeHealthCheck) (admission.Warnings, error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	errs, warnings, err := v.validateUpdated(ctx, newNHC)
	if err != nil {
		return nil, err
	}
	selectorErrs, selectorWarnings := ValidateSelectorPresent(oldNHC, newNHC)
	errs = append(append(selectorErrs, errs...), ValidateUpdate(oldNHC, newNHC)...)
	return append(warnings, selectorWarnings...), toAPIError(newNHC, errs)
}

// validateUpdateAlone validates a changed NodeHealthCheck whose stored version is not known (it
// could not be decoded): every rule of ValidateUpdate but those that compare it with the old one.
func (v *Validator) validateUpdateAlone(ctx context.Context, newNHC *remediationv1alpha1.NodeHealthCheck) (admission.Warnings, error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	errs, warnings, err := v.validateUpdated(ctx, newNHC)
	if err != nil {
		return nil, err
	}
	selectorErrs, selectorWarnings := ValidateSelectorPresent(nil, newNHC)
	return append(warnings, selectorWarnings...), toAPIError(newNHC, append(selectorErrs, errs...))
}

// validateUpdated runs the rules a changed NodeHealthCheck must meet on its own: the topology rule
// (err; not for an object being deleted) and the spec rules (errs).
func (v *Validator) validateUpdated(ctx context.Context, newNHC *remediationv1alpha1.NodeHealthCheck) (field.ErrorList, admission.Warnings, error) {
	if newNHC.DeletionTimestamp == nil {
		if err := validateTopology(ctx, v.Topology, newNHC.Name); err != nil {
			return nil, nil, err
		}
	}
	errs, warnings := v.validate(ctx, newNHC)
	return errs, warnings, nil
}

// ValidateDelete refuses to delete a NodeHealthCheck that is remediating. The topology rule does not
// apply: a NodeHealthCheck on an unsupported cluster can always be deleted.
func (v *Validator) ValidateDelete(_ context.Context, nhc *remediationv1alpha1.NodeHealthCheck) (admission.Warnings, error) {
	if err := ValidateDelete(nhc); err != nil {
		return nil, apierrors.NewForbidden(nhcResource, nhc.Name, err)
	}
	return nil, nil
}

// validate runs the spec rules and, with a Lookup, the template lookups; ctx bounds the lookups.
func (v *Validator) validate(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck) (field.ErrorList, admission.Warnings) {
	errs := ValidateSpec(&nhc.Spec)
	if v.Lookup == nil {
		return errs, nil
	}
	lookupErrs, warnings := validateTemplateLookups(ctx, &nhc.Spec, v.Lookup)
	errs = append(errs, lookupErrs...)
	if len(errs) == 0 && nhc.DeletionTimestamp.IsZero() {
		warnings = append(warnings, overlapWarnings(ctx, v.Cluster, nhc)...)
	}
	return errs, warnings
}

func toAPIError(nhc *remediationv1alpha1.NodeHealthCheck, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck").GroupKind(), nhc.Name, errs)
}

package v1alpha1

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/decodeguard"
	"github.com/medik8s/node-healthcheck/internal/health"
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

// ValidatingWebhook returns the validating webhook served at ValidatePath. It is controller-runtime's
// typed validator webhook (admission.WithValidator) for v, except for a stored object that does not
// decode into the Go type: an integer or duration its field cannot hold, written before the CRD
// bounded it or while the webhook was off. The typed webhook refuses every UPDATE and DELETE of such
// an object, since it cannot decode the old object, so it could be neither fixed nor deleted. Here an
// UPDATE is validated on its own (every rule but those that compare it with the stored version) and a
// DELETE by the stored status alone (refused while it lists running remediations); both carry a
// warning that names the object and the decode error. A new object
// that does not decode is refused, naming the offending fields.
func ValidatingWebhook(scheme *runtime.Scheme, v *Validator) *admission.Webhook {
	return &admission.Webhook{Handler: &validatingHandler{
		validator: v,
		typed:     admission.WithValidator[*remediationv1alpha1.NodeHealthCheck](scheme, v).Handler,
		decoder:   admission.NewDecoder(scheme),
	}}
}

// validatingHandler hands every request to controller-runtime's typed validator handler once both
// objects are known to decode, and handles the stored object that does not itself.
type validatingHandler struct {
	validator *Validator
	typed     admission.Handler
	decoder   admission.Decoder
}

// maxDecodeErrorRunes bounds the decode error quoted in a warning or refusal: enough for the field
// paths and values of a few broken fields, short enough that the API server, which truncates a
// request's warnings beyond 4096 characters in all, passes it on whole.
const maxDecodeErrorRunes = 512

// Handle implements admission.Handler.
func (h *validatingHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	newNHC := &remediationv1alpha1.NodeHealthCheck{}
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		if err := h.decoder.Decode(req, newNHC); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("NodeHealthCheck %s cannot be decoded: %s", req.Name, decodeError(req.Object, err)))
		}
	}
	hasOld := (req.Operation == admissionv1.Update || req.Operation == admissionv1.Delete) && len(req.OldObject.Raw) > 0
	if !hasOld {
		return h.typed.Handle(ctx, req)
	}
	oldErr := h.decoder.DecodeRaw(req.OldObject, &remediationv1alpha1.NodeHealthCheck{})
	if oldErr == nil {
		return h.typed.Handle(ctx, req)
	}

	reason := decodeError(req.OldObject, oldErr)
	ctrl.LoggerFrom(ctx).Info("Stored NodeHealthCheck cannot be decoded; validating the request without it", "operation", req.Operation, "error", reason)
	if req.Operation == admissionv1.Delete {
		// The spec is what does not decode; the status, written by the operator, usually does, and
		// says whether remediations run.
		if stored, ok := storedStatus(req.OldObject); ok {
			if err := ValidateDelete(&remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: req.Name}, Status: stored}); err != nil {
				return admission.Errored(http.StatusForbidden, apierrors.NewForbidden(nhcResource, req.Name, err)).WithWarnings(
					fmt.Sprintf("NodeHealthCheck %s: the stored version could not be decoded (%s); its status still tells running remediations", req.Name, reason))
			}
			return admission.Allowed("").WithWarnings(fmt.Sprintf("NodeHealthCheck %s: the stored version could not be decoded (%s); "+
				"deletion allowed: its status lists no running remediation", req.Name, reason))
		}
		return admission.Allowed("").WithWarnings(fmt.Sprintf("NodeHealthCheck %s: the stored version could not be decoded (%s); "+
			"deletion allowed without checking for running remediations", req.Name, reason))
	}
	warnings, err := h.validator.validateUpdateAlone(admission.NewContextWithRequest(ctx, req), newNHC)
	warnings = append(warnings, fmt.Sprintf("NodeHealthCheck %s: the stored version could not be decoded (%s); "+
		"the update was validated on its own, without the rules that compare it with the stored version", req.Name, reason))
	if err == nil {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	// As the typed handler answers an error.
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		status := apiStatus.Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Result: &status}}.WithWarnings(warnings...)
	}
	return admission.Denied(err.Error()).WithWarnings(warnings...)
}

// storedStatus decodes the status of a stored object alone; false when it does not decode either.
func storedStatus(raw runtime.RawExtension) (remediationv1alpha1.NodeHealthCheckStatus, bool) {
	var obj struct {
		Status *remediationv1alpha1.NodeHealthCheckStatus `json:"status"`
	}
	if err := utiljson.Unmarshal(raw.Raw, &obj); err != nil || obj.Status == nil {
		return remediationv1alpha1.NodeHealthCheckStatus{}, err == nil
	}
	return *obj.Status, true
}

// decodeError says why raw did not decode, naming the offending fields as decodeguard does in the
// operator's InvalidSpec event ("spec.healthyDelay: time: invalid duration ..."), cut to
// maxDecodeErrorRunes. err is the decoder's error, used when the fields cannot be told.
func decodeError(raw runtime.RawExtension, err error) string {
	msg := err.Error()
	u := &unstructured.Unstructured{}
	if jsonErr := utiljson.Unmarshal(raw.Raw, &u.Object); jsonErr == nil {
		if _, located := decodeguard.Decode(u); located != nil {
			msg = located.Error()
		}
	}
	if r := []rune(msg); len(r) > maxDecodeErrorRunes {
		msg = string(r[:maxDecodeErrorRunes]) + "..."
	}
	return msg
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
	errs = append(errs, lookupErrs...)
	if len(errs) == 0 && nhc.DeletionTimestamp.IsZero() {
		warnings = append(warnings, overlapWarnings(ctx, v.Cluster, nhc)...)
	}
	return errs, warnings
}

// maxOverlapWarnings bounds the overlap warnings of one request (one per other NodeHealthCheck).
const maxOverlapWarnings = 5

// overlapWarnings warns about each other NodeHealthCheck that selects some of the nodes nhc selects
// (a warning, not a refusal: "first wins" decides who remediates a node both select). It reads the
// cache only; a read error warns nothing.
func overlapWarnings(ctx context.Context, c client.Reader, nhc *remediationv1alpha1.NodeHealthCheck) admission.Warnings {
	if c == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&nhc.Spec.Selector)
	if err != nil {
		return nil
	}
	nodes, others := &corev1.NodeList{}, &remediationv1alpha1.NodeHealthCheckList{}
	if c.List(ctx, nodes, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy) != nil ||
		c.List(ctx, others, client.UnsafeDisableDeepCopy) != nil {
		return nil
	}
	var warnings admission.Warnings
	selected := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		selected[i] = &nodes.Items[i]
	}
	overlaps := health.Overlaps(nhc.Name, selected, others.Items)
	for _, o := range overlaps[:min(len(overlaps), maxOverlapWarnings)] {
		warnings = append(warnings, fmt.Sprintf("spec.selector: NodeHealthCheck %s selects %d of the %d node(s) this one selects; "+
			"a node both select is remediated by the one that takes its node lease first, the other holds back meanwhile", o.NHC, o.Nodes, len(nodes.Items)))
	}
	if len(overlaps) > maxOverlapWarnings {
		warnings = append(warnings, fmt.Sprintf("spec.selector: %d more NodeHealthChecks select some of the same nodes", len(overlaps)-maxOverlapWarnings))
	}
	return warnings
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
	// Reader reads Infrastructure/cluster; the manager's cache in production: an informer on the
	// kind (OpenShift has the one object), started by the first read, which waits for it to sync
	// within the request's lookup budget. An admission then sends nothing to the API server, and a
	// change of topology is seen as soon as the watch delivers it. A read that cannot be answered
	// fails the admission closed.
	Reader client.Reader
	// Clock tells when a "kind not served" answer was given; nil is the real clock.
	Clock clock.PassiveClock

	mu sync.Mutex
	// notServedSince is when Reader last answered that the Infrastructure kind is not served; zero
	// when it has not, or when it served it since.
	notServedSince time.Time
}

var _ TopologyReader = &InfrastructureTopologyReader{}

// notServedRecheck is how long a "the Infrastructure kind is not served" answer holds. The manager's
// RESTMapper asks the API server's discovery again every time it is asked for a kind of a group it
// does not know, so without this every create and update on a cluster that is not OpenShift would
// send a discovery request. A cluster does not become OpenShift, and OpenShift serves the kind from
// its installation on, so the answer is close to permanent; a minute bounds the cost to one discovery
// request a minute and the time a newly installed kind goes unseen to a minute.
const notServedRecheck = time.Minute

// ControlPlaneTopology implements TopologyReader. A cluster that does not serve the Infrastructure
// kind (not OpenShift) or has no Infrastructure/cluster object reports "".
func (r *InfrastructureTopologyReader) ControlPlaneTopology(ctx context.Context) (string, error) {
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	r.mu.Lock()
	notServed := !r.notServedSince.IsZero() && clk.Since(r.notServedSince) < notServedRecheck
	r.mu.Unlock()
	if notServed {
		return "", nil
	}
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(openshift.Infrastructure)
	err := r.Reader.Get(ctx, client.ObjectKey{Name: openshift.InfrastructureName}, infra)
	r.mu.Lock()
	if meta.IsNoMatchError(err) {
		r.notServedSince = clk.Now()
	} else {
		r.notServedSince = time.Time{}
	}
	r.mu.Unlock()
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

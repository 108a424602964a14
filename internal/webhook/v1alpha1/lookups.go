package v1alpha1

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/openshift"
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
	all := make([]*remediationv1alpha1.NodeHealthCheck, len(others.Items))
	for i := range others.Items {
		all[i] = &others.Items[i]
	}
	overlaps := health.Overlaps(nhc.Name, selected, all)
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

// notServedRecheck is how long a "the Infrastructure kind is not served" answer holds. The manager's
// RESTMapper asks the API server's discovery again every time it is asked for a kind of a group it
// does not know, so without this every create and update on a cluster that is not OpenShift would
// send a discovery request. A cluster does not become OpenShift, and OpenShift serves the kind from
// its installation on, so the answer is close to permanent; a minute bounds the cost to one discovery
// request a minute and the time a newly installed kind goes unseen to a minute.
const notServedRecheck = time.Minute

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

var _ TopologyReader = &InfrastructureTopologyReader{}

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

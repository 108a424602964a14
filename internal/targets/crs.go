package targets

import (
	"context"
	"fmt"

	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// RemediationKinds returns the remediation CR kinds a NodeHealthCheck uses: those of the templates
// it references now, then those of the CRs its status lists (the templates may have changed since).
// Remediation kinds are custom resources: kinds of the core group are left out, so that a status
// entry cannot make the operator watch Pods or Secrets.
func RemediationKinds(nhc *remediationv1alpha1.NodeHealthCheck) []schema.GroupVersionKind {
	kinds := templateKinds(nhc)
	add := func(gvk schema.GroupVersionKind) {
		if gvk.Kind != "" && gvk.Group != "" && !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	for _, e := range nhc.Status.UnhealthyNodes {
		for _, r := range e.Remediations {
			add(r.Resource.GroupVersionKind())
		}
	}
	return kinds
}

// kindsRead says what remediationCRs could not read: the problem of a kind the NodeHealthCheck uses
// (not watchable, or unavailable), and a kind whose CRs were never listed.
type kindsRead struct {
	problem  *Problem
	unlisted string
}

// remediationCRs lists, from the cache, every remediation CR that a NodeHealthCheck controls, in
// every kind any NodeHealthCheck uses or used since the process started, across namespaces. A kind
// the operator may not list and watch is not read (its informer would never sync), nor is one whose
// CRs cannot be listed now (kindReadable); when nhc uses it, the returned problem says so. nhcs are
// every NodeHealthCheck, as the cache holds them (read only).
func (g *Gatherer) remediationCRs(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, nhcs []remediationv1alpha1.NodeHealthCheck) ([]unstructured.Unstructured, kindsRead, error) {
	own := templateKinds(nhc)
	kinds := RemediationKinds(nhc)
	for i := range nhcs {
		for _, gvk := range RemediationKinds(&nhcs[i]) {
			if !slices.Contains(kinds, gvk) {
				kinds = append(kinds, gvk)
			}
		}
	}
	inUse := slices.Clone(kinds) // by a NodeHealthCheck now, not only read since the process started
	g.mu.Lock()
	for _, gvk := range kinds {
		if !slices.Contains(g.seen, gvk) {
			g.seen = append(g.seen, gvk)
		}
	}
	for _, gvk := range g.seen {
		if !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	g.mu.Unlock()
	var read kindsRead
	var out []unstructured.Unstructured
	for _, gvk := range kinds {
		if g.Access != nil {
			served, watchable, err := g.Access.Check(ctx, gvk)
			if err != nil {
				return nil, read, err
			}
			if !served {
				continue // no CR of a kind that is not served exists
			}
			if !watchable {
				if read.problem == nil && slices.Contains(own, gvk) {
					read.problem = &Problem{remediationv1alpha1.ConditionReasonDisabledRemediationNotWatchable,
						fmt.Sprintf("The operator may not list and watch %s.%s, so it cannot tell which nodes are remediated; the remediator's ClusterRole labelled %s=true must grant get, list, watch, create, update, patch and delete on them",
							gvk.Kind, gvk.Group, remediationv1alpha1.AggregateToExtRemediationLabel)}
				}
				continue
			}
		}
		if g.Watch != nil {
			served, err := g.Watch(gvk)
			if err != nil {
				return nil, read, err
			}
			if !served {
				continue
			}
		}
		if state := g.kindReadable(ctx, gvk, slices.Contains(inUse, gvk)); !state.ok {
			if read.problem == nil && slices.Contains(own, gvk) {
				read.problem = &Problem{remediationv1alpha1.ConditionReasonDisabledRemediationUnavailable,
					fmt.Sprintf("The remediation CRs of kind %s.%s cannot be read, so the operator cannot tell which nodes are remediated: %s", gvk.Kind, gvk.Group, state.why)}
			}
			// A kind no NodeHealthCheck uses any more (its CRD deleted, say) holds nothing back.
			if read.unlisted == "" && slices.Contains(inUse, gvk) {
				read.unlisted = gvk.Kind + "." + gvk.Group
			}
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		// The cache's own objects, not copies: every NodeHealthCheck's CRs are listed on every
		// decision (900 CRs copied per decision in the scale benchmark's outage); only this
		// NodeHealthCheck's are copied below, the others are only read.
		if err := g.Reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			if meta.IsNoMatchError(err) {
				continue // not served (any more): no CR of it exists
			}
			return nil, read, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for _, cr := range g.withCreated(gvk, list.Items) {
			if _, uid, ok := remediationcr.ControllerNHC(&cr); ok {
				if uid == nhc.UID {
					cr = *cr.DeepCopy() // acted on: patched, deleted
				}
				out = append(out, cr)
			}
		}
	}
	return out, read, nil
}

// templateKinds returns the remediation CR kinds of the templates the NodeHealthCheck references;
// like RemediationKinds, never kinds of the core group (CheckTemplates disables such a spec).
func templateKinds(nhc *remediationv1alpha1.NodeHealthCheck) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	for _, ref := range nhc.Spec.TemplateRefs() {
		if gvk := remediationcr.GVK(ref); gvk.Kind != "" && gvk.Group != "" && !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	return kinds
}

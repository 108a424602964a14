package explain

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// partial is the user's client, made to answer rather than fail where the user may not read a kind
// an explanation only consults: a forbidden List of any kind but NodeHealthChecks and Nodes is
// empty, a forbidden Get is NotFound, and the kind is noted (Forbidden), so that the answer is
// given with a clear note of what it could not see. NodeHealthChecks and Nodes, without which there
// is nothing to explain, still fail.
type partial struct {
	client.Client
	mu        sync.Mutex
	forbidden map[string]bool
}

func (p *partial) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := p.Client.Get(ctx, key, obj, opts...)
	if apierrors.IsForbidden(err) {
		if gvk, ok := p.consulted(obj); ok {
			p.note(gvk)
			return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
		}
	}
	return err
}

func (p *partial) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := p.Client.List(ctx, list, opts...)
	if apierrors.IsForbidden(err) {
		if gvk, ok := p.consulted(list); ok {
			p.note(schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: strings.TrimSuffix(gvk.Kind, "List")})
			return meta.SetList(list, nil)
		}
	}
	return err
}

// consulted returns the object's kind, and whether an explanation can do without it.
func (p *partial) consulted(obj runtime.Object) (schema.GroupVersionKind, bool) {
	gvk, err := apiutil.GVKForObject(obj, p.Scheme())
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	kind := strings.TrimSuffix(gvk.Kind, "List")
	essential := (gvk.Group == remediationv1alpha1.GroupVersion.Group && kind == "NodeHealthCheck") ||
		(gvk.Group == corev1.GroupName && kind == "Node")
	return gvk, !essential
}

func (p *partial) note(gvk schema.GroupVersionKind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.forbidden == nil {
		p.forbidden = map[string]bool{}
	}
	kind := strings.TrimSuffix(gvk.Kind, "List")
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	p.forbidden[kind] = true
}

// Forbidden returns the kinds the user may not read, sorted.
func (p *partial) Forbidden() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.forbidden {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// forbiddenNote prints what the answer could not see, if anything.
func forbiddenNote(pr *printer, p *partial) {
	if kinds := p.Forbidden(); len(kinds) > 0 {
		pr.line(0, "")
		pr.line(0, "Partial answer: you may not read %s; the answer takes them as absent (no lease held, no "+
			"Machine, no template, no remediation CR of those kinds), so it may differ from the operator's. "+
			"Ask for get and list on them for the full answer.", strings.Join(kinds, ", "))
	}
}

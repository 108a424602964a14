package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// A remediator whose kinds are served in two versions converted by its webhook: the operator reads
// the template's version (v1alpha1), the objects are stored in v1. With the webhook down (the
// conversion move), nothing of the kind can be read in v1alpha1 once an object changed (the API
// server's cache of that version cannot convert it), nor created: unknown is not free. The driver
// and the recorder read the stored version, which needs no conversion.
const (
	convGroup        = "conv.chaos.medik8s.io"
	convReadVersion  = convGroup + "/v1alpha1"
	convStoreVersion = convGroup + "/v1"
)

// convCRDs are the remediator's template kind and CR kind: served in v1alpha1 and v1, stored in v1,
// converted by the webhook.
func convCRDs(w *testutil.ConversionWebhook) []*apiextensionsv1.CustomResourceDefinition {
	conversion := w.Conversion()
	open := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec":   {Type: "object", XPreserveUnknownFields: new(true)},
			"status": {Type: "object", XPreserveUnknownFields: new(true)},
		}}}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"ConvRemediationTemplate", "ConvRemediation"} {
		plural := lowerPlural(kind)
		c := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + "." + convGroup},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: convGroup, Scope: apiextensionsv1.NamespaceScoped, Conversion: conversion,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural}},
		}
		for _, v := range []string{"v1alpha1", "v1"} {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: v == "v1", Schema: open,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}})
		}
		out = append(out, c)
	}
	return out
}

// installConvCRDs creates the CRDs and waits until both versions of both kinds are served.
func installConvCRDs(ctx context.Context, k8s client.Client, w *testutil.ConversionWebhook) error {
	for _, crd := range convCRDs(w) {
		if err := k8s.Create(ctx, crd); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, gv := range []string{convReadVersion, convStoreVersion} {
		for _, kind := range []string{"ConvRemediationTemplateList", "ConvRemediationList"} {
			for {
				u := &unstructured.UnstructuredList{}
				u.SetAPIVersion(gv)
				u.SetKind(kind)
				err := k8s.List(ctx, u)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s %s is not served: %w", gv, kind, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return nil
}

func lowerPlural(kind string) string {
	out := []rune{}
	for _, r := range kind {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		out = append(out, r)
	}
	return string(out) + "s"
}

// writeStored patches an object of the remediator's kinds in the stored version, as the remediator
// writes them (its status, an annotation): no conversion is needed, and the API server's cache of
// the version the operator reads can no longer serve it while the webhook is down.
func (w *world) writeStored(ctx context.Context, kind, namespace, name string) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(convStoreVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"chaos.medik8s.io/written":"%d"}}}`, time.Now().UnixNano())
	if err := w.k8s.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("writing %s %s/%s in %s: %w", kind, namespace, name, convStoreVersion, err)
	}
	return nil
}

// conversionOff stops conv-1's conversion webhook; the remediator writes its template, its marker
// and its CRs in the stored version. The model records the node leases their owners hold.
func (w *world) conversionOff(ctx context.Context) (string, error) {
	if err := w.conv.Stop(); err != nil {
		return "", err
	}
	crs, err := w.listCRs(ctx)
	if err != nil {
		return "", err
	}
	leases, err := w.leases(ctx)
	if err != nil {
		return "", err
	}
	held := map[string]leaseInfo{}
	written := []string{"template conv-1"}
	if err := w.writeStored(ctx, "ConvRemediationTemplate", templateNamespace, "conv-1"); err != nil {
		return "", err
	}
	if err := w.writeStored(ctx, convKind, markerNS, "marker"); err != nil {
		return "", err
	}
	for i := range crs {
		cr := &crs[i]
		if cr.GetKind() != convKind || cr.GetDeletionTimestamp() != nil {
			continue
		}
		if err := w.writeStored(ctx, convKind, cr.GetNamespace(), cr.GetName()); err != nil {
			return "", err
		}
		written = append(written, "CR "+cr.GetName())
		owner, _, _ := remediationcr.ControllerNHC(cr)
		for _, l := range leases {
			if l.Node == crNode(cr) && l.Holder == leaseHolderPrefix+owner {
				held[l.Node] = l
			}
		}
	}
	w.cur.ConvDown, w.cur.ConvLeases = true, held
	return fmt.Sprintf("conv-1's conversion webhook down; its remediator writes %s in %s: the kind cannot be read in %s (leases held: %d)",
		strings.Join(written, ", "), convStoreVersion, convReadVersion, len(held)), nil
}

// convCatchUp bounds the wait for the leader to read conv-1's kinds again once the webhook is
// back: a failing informer lists again after client-go's backoff (at most 30s, jittered).
const convCatchUp = time.Minute

// conversionOn starts the webhook again and waits until the leader's cache reads both kinds again,
// up to the marker's write after it, then pokes: the controllers act on what they could not read.
func (w *world) conversionOn(ctx context.Context) (string, error) {
	if err := w.conv.Start(); err != nil {
		return "", err
	}
	w.cur.ConvDown, w.cur.ConvBlind, w.cur.ConvLeases = false, false, nil
	began := time.Now()
	marker := &unstructured.Unstructured{}
	marker.SetAPIVersion(convStoreVersion)
	marker.SetKind(convKind)
	marker.SetNamespace(markerNS)
	marker.SetName("marker")
	if err := w.k8s.Patch(ctx, marker, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"chaos.medik8s.io/written":"%d"}}}`, time.Now().UnixNano()))); err != nil {
		return "", err
	}
	rv := resourceVersion(marker)
	desc := "conv-1's conversion webhook back"
	deadline := began.Add(convCatchUp)
	for _, kind := range []string{"ConvRemediationTemplate", convKind} {
		for {
			leader := w.managers.leader()
			if leader != nil && readsAgain(ctx, leader, kind, rv) {
				break
			}
			if time.Now().After(deadline) {
				return desc + fmt.Sprintf("; the leader did not read %s again within %s", kind, convCatchUp), w.poke(ctx)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return desc + fmt.Sprintf("; the leader reads the kind again after %s, poke", time.Since(began).Round(100*time.Millisecond)), w.poke(ctx)
}

// readsAgain reports whether the manager's cache lists the kind in the version the operator reads,
// and for the CR kind holds the marker at least at rv.
func readsAgain(ctx context.Context, m *instance, kind string, rv uint64) bool {
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(convReadVersion)
	list.SetKind(kind + "List")
	if err := m.mgr.GetCache().List(lctx, list); err != nil {
		return false
	}
	if kind != convKind {
		return true
	}
	for _, item := range list.Items {
		if item.GetNamespace() == markerNS && item.GetName() == "marker" {
			return resourceVersion(&item) >= rv
		}
	}
	return false
}

package targets

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

func names(reqs []reconcile.Request) []string {
	var out []string
	for _, r := range reqs {
		if !slices.Contains(out, r.Name) {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestAffected(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := remediationv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	nhc := func(name string, sel metav1.LabelSelector) *remediationv1alpha1.NodeHealthCheck {
		h := selecting(name, sel)
		h.UID, h.Generation = types.UID("uid-"+name), 1
		return &h
	}
	pool := func(p string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{"pool": p}}
	}
	workerB := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-b", Labels: map[string]string{"pool": "b"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		nhc("pool-a", pool("a")), nhc("pool-b", pool("b")), nhc("everything", metav1.LabelSelector{}),
		nhc("invalid", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}),
		workerB,
	).Build()
	a := NewAffected(c)
	all := []string{"everything", "invalid", "pool-a", "pool-b"}
	expect := func(what string, got []reconcile.Request, want ...string) {
		t.Helper()
		if !slices.Equal(names(got), want) {
			t.Errorf("%s: %v, want %v", what, names(got), want)
		}
	}

	expect("a pool-a worker", a.ByNode(ctx, map[string]string{"pool": "a"}), "everything", "invalid", "pool-a")
	expect("an unlabelled node", a.ByNode(ctx, nil), "everything", "invalid")
	expect("a control-plane node in no pool", a.ByNode(ctx, map[string]string{remediationcr.ControlPlaneRoleLabel: ""}), all...)
	expect("a master node", a.ByNode(ctx, map[string]string{remediationcr.MasterRoleLabel: "", "pool": "a"}), all...)

	// A new spec (generation) is parsed again.
	moved := &remediationv1alpha1.NodeHealthCheck{}
	if err := c.Get(ctx, client.ObjectKey{Name: "pool-a"}, moved); err != nil {
		t.Fatal(err)
	}
	moved.Spec.Selector, moved.Generation = pool("c"), 2
	if err := c.Update(ctx, moved); err != nil {
		t.Fatal(err)
	}
	expect("a pool-a worker after pool-a moved to pool c", a.ByNode(ctx, map[string]string{"pool": "a"}), "everything", "invalid")
	expect("a pool-c worker", a.ByNode(ctx, map[string]string{"pool": "c"}), "everything", "invalid", "pool-a")

	// The selectors of deleted NodeHealthChecks are forgotten.
	if err := c.Delete(ctx, nhc("invalid", metav1.LabelSelector{})); err != nil {
		t.Fatal(err)
	}
	expect("after invalid was deleted", a.ByNode(ctx, nil), "everything")
	if _, kept := a.selectors["uid-invalid"]; kept || len(a.selectors) != 3 {
		t.Errorf("selectors kept: %v, want the 3 NodeHealthChecks left", a.selectors)
	}

	cr := func(node, owner string, labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("test.medik8s.io/v1alpha1")
		u.SetKind("TestRemediation")
		u.SetName(node)
		u.SetLabels(labels)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: remediationv1alpha1.GroupVersion.String(), Kind: "NodeHealthCheck", Name: owner, UID: types.UID("uid-" + owner)}})
		return u
	}
	all = []string{"everything", "pool-a", "pool-b"}
	expect("a CR of a pool-b worker, owned by pool-a", a.ByCR(ctx, cr("worker-b", "pool-a", nil)), all...)
	expect("a CR of a pool-b worker, owned by everything", a.ByCR(ctx, cr("worker-b", "everything", nil)), "everything", "pool-b")
	expect("a CR of a node that is gone", a.ByCR(ctx, cr("gone", "everything", nil)), all...)
	expect("a control-plane node's CR", a.ByCR(ctx, cr("worker-b", "everything", map[string]string{remediationv1alpha1.ControlPlaneCRLabel: ""})), all...)
}

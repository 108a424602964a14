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
	toolscache "k8s.io/client-go/tools/cache"
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
	a := NewAffected(fake.NewClientBuilder().WithScheme(scheme).WithObjects(workerB).Build())
	informer := a.handler()
	for _, h := range []*remediationv1alpha1.NodeHealthCheck{nhc("pool-a", pool("a")), nhc("pool-b", pool("b")), nhc("everything", metav1.LabelSelector{}),
		nhc("invalid", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}})} {
		informer.OnAdd(h, true)
	}
	all := []string{"everything", "invalid", "pool-a", "pool-b"}
	expect := func(what string, got []reconcile.Request, want ...string) {
		t.Helper()
		if !slices.Equal(names(got), want) {
			t.Errorf("%s: %v, want %v", what, names(got), want)
		}
	}

	expect("a pool-a worker", a.ByNode(map[string]string{"pool": "a"}), "everything", "invalid", "pool-a")
	expect("an unlabelled node", a.ByNode(nil), "everything", "invalid")
	expect("a control-plane node in no pool", a.ByNode(map[string]string{remediationcr.ControlPlaneRoleLabel: ""}), all...)
	expect("a master node", a.ByNode(map[string]string{remediationcr.MasterRoleLabel: "", "pool": "a"}), all...)
	expect("a node event", a.NodeMap(ctx, workerB), "everything", "invalid", "pool-b")

	// A new spec (generation) is parsed again; a status update (same generation) is not.
	moved := nhc("pool-a", pool("c"))
	moved.Generation = 2
	informer.OnUpdate(nhc("pool-a", pool("a")), moved)
	expect("a pool-a worker after pool-a moved to pool c", a.ByNode(map[string]string{"pool": "a"}), "everything", "invalid")
	expect("a pool-c worker", a.ByNode(map[string]string{"pool": "c"}), "everything", "invalid", "pool-a")
	sameGeneration := nhc("pool-a", pool("d"))
	sameGeneration.Generation = 2
	informer.OnUpdate(moved, sameGeneration)
	expect("a pool-c worker after a status update", a.ByNode(map[string]string{"pool": "c"}), "everything", "invalid", "pool-a")

	// Deleted NodeHealthChecks are forgotten, also when the informer missed the deletion.
	informer.OnDelete(nhc("pool-b", pool("b")))
	informer.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "invalid", Obj: nhc("invalid", metav1.LabelSelector{})})
	expect("after pool-b and invalid were deleted", a.ByNode(map[string]string{"pool": "b"}), "everything")
	informer.OnAdd(nhc("pool-b", pool("b")), false)

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

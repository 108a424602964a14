package targets

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// TestRead reads one NodeHealthCheck's world from a real API server, with a client that reads
// around any cache, and checks what read hands to assemble: the selected nodes, the CRs by owner,
// the control-plane node another NodeHealthCheck remediates, the template problem; and a selector
// that does not parse, for which no node is read.
func TestRead(t *testing.T) {
	cfg := testutil.StartControlPlane(t)
	scheme := testutil.Scheme()
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(obj client.Object) {
		t.Helper()
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	ours := testutil.NewNHC("ours")
	controlPlane := testutil.NewNHC("control-plane")
	controlPlane.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: remediationcr.ControlPlaneRoleLabel, Operator: metav1.LabelSelectorOpExists}}}
	create(ours)
	create(controlPlane)
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "w2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cp1", Labels: map[string]string{remediationcr.ControlPlaneRoleLabel: ""}}},
	} {
		create(n)
	}
	for _, cr := range []struct {
		owner *remediationv1alpha1.NodeHealthCheck
		node  string
	}{{ours, "w1"}, {controlPlane, "cp1"}} {
		obj := testCR(t, cr.owner, cr.node)
		create(&obj)
	}

	g := &Gatherer{Reader: k8s}
	now := time.Now()
	r, err := g.read(ctx, ours, now, k8s)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, n := range r.nodes {
		nodes = append(nodes, n.Name)
	}
	switch {
	case len(nodes) != 2 || nodes[0] != "w1" || nodes[1] != "w2":
		t.Errorf("selected nodes %v: want w1, w2", nodes)
	case len(r.crs.ours) != 1 || len(r.crs.ours["w1"]) != 1:
		t.Errorf("our CRs %v: want one of w1", r.crs.ours)
	case r.crs.elsewhere["cp1"] != "control-plane" || len(r.crs.orphans) != 0:
		t.Errorf("elsewhere %v, orphans %v: want cp1 by control-plane, none", r.crs.elsewhere, r.crs.orphans)
	case r.controlPlaneElsewhere != "cp1":
		t.Errorf("control plane elsewhere %q: want cp1 (its role label, read for it)", r.controlPlaneElsewhere)
	case r.controlPlane["w1"] || r.controlPlane["w2"]:
		t.Errorf("control plane %v: want no selected control-plane node", r.controlPlane)
	case len(r.nhcs) != 2 || !r.verdict.Known || r.skew != nil || r.selectorErr != nil:
		t.Errorf("%d NodeHealthChecks, verdict known %v, skew %v, selector error %v: want 2, true (no gate), nil, nil", len(r.nhcs), r.verdict.Known, r.skew, r.selectorErr)
	case r.templateProblem == nil || r.templateProblem.Reason != remediationv1alpha1.ConditionReasonDisabledTemplateNotFound:
		t.Errorf("template problem %+v: want the missing template", r.templateProblem)
	case r.nhc.Spec.UnhealthyConditions == nil || r.stored != ours || !r.now.Equal(now):
		t.Errorf("the NodeHealthCheck read: defaults %v, stored %p (want %p), now %s", r.nhc.Spec.UnhealthyConditions, r.stored, ours, r.now)
	}

	// The nodes status lists with CRs that are not selected are read for their outcomes: one that
	// exists (cp1), one that is gone; not the selected ones, nor those listed without CRs.
	listed := ours.DeepCopy()
	rem := []remediationv1alpha1.Remediation{{Started: metav1.NewTime(now)}}
	listed.Status.UnhealthyNodes = []remediationv1alpha1.UnhealthyNode{{Name: "cp1", Remediations: rem}, {Name: "gone", Remediations: rem},
		{Name: "w1", Remediations: rem}, {Name: "nothing"}}
	if r, err = g.read(ctx, listed, now, nil); err != nil {
		t.Fatal(err)
	}
	if n, gone := r.unselected["cp1"], r.unselected["gone"]; len(r.unselected) != 2 || n == nil || n.Name != "cp1" || gone != nil {
		t.Errorf("unselected listed nodes %v: want cp1 as read and gone as nil", r.unselected)
	}
	if _, read := r.unselected["gone"]; !read {
		t.Errorf("the node that is gone was not looked up")
	}

	bad := ours.DeepCopy()
	bad.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"not a key!": "x"}}
	if r, err = g.read(ctx, bad, now, nil); err != nil {
		t.Fatal(err)
	}
	if r.selectorErr == nil || len(r.nodes) != 0 || len(r.crs.orphans) != 1 || r.templateProblem != nil {
		t.Errorf("selector error %v, %d nodes, orphans %v, template problem %v: want an error, none, w1 (its CR is kept, not selected), none (not read)",
			r.selectorErr, len(r.nodes), r.crs.orphans, r.templateProblem)
	}
}

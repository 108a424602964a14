package targets

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
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

	// With TemplatesIf, the templates are read only when the decision made without them asks for
	// it, and the decision is made again from the same reading: the nodes are listed once either way.
	// w2 fails, so the decision starts its remediation.
	w2 := &corev1.Node{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "w2"}, w2); err != nil {
		t.Fatal(err)
	}
	w2.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	if err := k8s.Status().Update(ctx, w2); err != nil {
		t.Fatal(err)
	}
	counting := &countingReader{Reader: k8s}
	lazy := &Gatherer{Reader: counting}
	zero := intstr.FromInt32(0)
	ours = ours.DeepCopy()
	ours.Spec.MinHealthy = &zero // w1 is under remediation already
	if _, err := lazy.Gather(ctx, ours, now, Options{Mode: Acting}); err != nil {
		t.Fatal(err)
	}
	lists := counting.nodeLists // the node lists of one gather without templates
	starts := func(s *Snapshot) bool {
		d, ok := s.Node("w2")
		return ok && d.Action == health.StartRemediation
	}
	ref := ours.Spec.TemplateRefs()[0]
	for _, ask := range []bool{false, true} {
		counting.nodeLists = 0
		templates := &countingTemplates{TemplateGetter: &strategyTemplates{strategy: "reboot"}}
		s, err := lazy.Gather(ctx, ours, now, Options{Mode: Acting, Templates: templates, TemplatesIf: func(s *Snapshot) bool { return ask && starts(s) }})
		if err != nil {
			t.Fatal(err)
		}
		_, read := s.Template(ref)
		want := 0
		if ask {
			want = 1
		}
		if counting.nodeLists != lists || templates.gets != want || read != ask || !starts(s) || s.Problem != nil {
			t.Errorf("templates asked for %v: %d node lists, %d template reads, template in the snapshot %v, w2 started %v, problem %v; want %d, %d, %v, true, none",
				ask, counting.nodeLists, templates.gets, read, starts(s), s.Problem, lists, want, ask)
		}
	}
	// A CR this process created that the cache does not show yet counts from its record (a start
	// does not wait for the cache, Gatherer.Created): the next decision starts no second
	// remediation of w2, and lists the recorded CR as the node's.
	recorded := testCR(t, ours, "w2")
	recorded.SetUID("recorded")
	recorded.SetCreationTimestamp(metav1.NewTime(now))
	lazy.Created(&recorded)
	s, err := lazy.Gather(ctx, ours, now, Options{Mode: Acting, Templates: &strategyTemplates{strategy: "reboot"}, TemplatesIf: starts})
	if err != nil {
		t.Fatal(err)
	}
	if crs := s.CRs["w2"]; starts(s) || len(crs) != 1 || crs[0].GetUID() != "recorded" {
		t.Errorf("with w2's CR recorded, not in the cache: w2 started %v, its CRs %v; want no start, the recorded CR", starts(s), crs)
	}
	lazy.Forget("recorded")

	counting.nodeLists = 0
	s, err = lazy.Gather(ctx, ours, now, Options{Mode: Acting, Templates: k8s, TemplatesIf: starts}) // the template does not exist
	if err != nil {
		t.Fatal(err)
	}
	if counting.nodeLists != lists || s.Problem == nil || starts(s) {
		t.Errorf("a missing template: %d node lists, problem %v, w2 started %v; want %d, the missing template, false (decided again with it)", counting.nodeLists, s.Problem, starts(s), lists)
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

// countingReader counts the node lists read through it.
type countingReader struct {
	client.Reader
	nodeLists int
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.NodeList); ok {
		c.nodeLists++
	}
	return c.Reader.List(ctx, list, opts...)
}

// countingTemplates counts the templates read through it.
type countingTemplates struct {
	TemplateGetter
	gets int
}

func (c *countingTemplates) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.TemplateGetter.Get(ctx, key, obj, opts...)
}

// TestRecheck: a control-plane start is decided again at its moment with the remediation CRs read
// again, and nothing else: a control-plane remediation another NodeHealthCheck started since the
// snapshot holds it back, without a node list or a template read.
func TestRecheck(t *testing.T) {
	cfg := testutil.StartControlPlane(t)
	k8s, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	zero := intstr.FromInt32(0)
	pool := func(name, group string) *remediationv1alpha1.NodeHealthCheck {
		n := testutil.NewNHC(name)
		n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"group": group}}
		n.Spec.MinHealthy = &zero
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	mine, theirs := pool("mine", "a"), pool("theirs", "b")
	for name, group := range map[string]string{"cp-a": "a", "cp-b": "b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"group": group, remediationcr.ControlPlaneRoleLabel: ""}}}
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
		if err := k8s.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	counting := &countingReader{Reader: k8s}
	g := &Gatherer{Reader: counting}
	templates := &countingTemplates{TemplateGetter: &strategyTemplates{strategy: "reboot"}}
	action := func(s *Snapshot) health.NodeDecision {
		d, _ := s.Node("cp-a")
		return d
	}
	s, err := g.Gather(ctx, mine, now, Options{Mode: Acting, Templates: templates})
	if err != nil {
		t.Fatal(err)
	}
	if d := action(s); d.Action != health.StartRemediation {
		t.Fatalf("cp-a: %v (%s), want its remediation to start", d.Action, d.SkipMessage)
	}
	again, err := g.Recheck(ctx, s, Acting)
	if err != nil {
		t.Fatal(err)
	}
	if d := action(again); d.Action != health.StartRemediation {
		t.Fatalf("rechecked with nothing new: cp-a %v (%s), want its remediation to start", d.Action, d.SkipMessage)
	}

	cr := testCR(t, theirs, "cp-b") // another NodeHealthCheck started cp-b meanwhile
	if err := k8s.Create(ctx, &cr); err != nil {
		t.Fatal(err)
	}
	counting.nodeLists, templates.gets = 0, 0
	again, err = g.Recheck(ctx, s, Acting)
	if err != nil {
		t.Fatal(err)
	}
	if d := action(again); d.Action != health.Skip || d.SkipReason != health.SkipControlPlane {
		t.Errorf("rechecked after cp-b started elsewhere: cp-a %v (%s: %s), want held back, one control-plane node at a time", d.Action, d.SkipReason, d.SkipMessage)
	}
	rechecked := counting.nodeLists
	counting.nodeLists = 0
	if _, err := g.Gather(ctx, mine, now, Options{Mode: Acting, Templates: templates}); err != nil {
		t.Fatal(err)
	}
	// Without a node store the rule lists the control-plane nodes by role (two lists), in a gather
	// as in a recheck; a gather lists the selected nodes too, a recheck does not.
	if rechecked != counting.nodeLists-1 || templates.gets != 1 {
		t.Errorf("the recheck read %d node lists, a gather %d, and the two %d templates: want one list less (the selected nodes) and the gather's template read only",
			rechecked, counting.nodeLists, templates.gets)
	}
	if d := action(s); d.Action != health.StartRemediation {
		t.Errorf("the first snapshot changed: cp-a %v", d.Action)
	}
}

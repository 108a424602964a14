package targets

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/outcome"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

var assembleNow = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// testReading is what a Gather of NodeHealthCheck "nhc" (the testutil builder's) read: nodes w1
// and w2, healthy, nothing else; mutate changes it.
func testReading(t *testing.T, mutate func(r *reading)) *reading {
	t.Helper()
	stored := testutil.NewNHC("nhc")
	stored.UID = "nhc-uid"
	r := &reading{stored: stored, nhc: stored.DeepCopy(), now: assembleNow, verdict: upgrade.Verdict{Known: true},
		crs: sortByOwner(nil, stored.UID, nil), controlPlane: map[string]bool{}}
	remediationv1alpha1.SetDefaults(r.nhc)
	for _, name := range []string{"w1", "w2"} {
		r.nodes = append(r.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(assembleNow.Add(-time.Hour))},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	r.nhcs = []*remediationv1alpha1.NodeHealthCheck{stored}
	if mutate != nil {
		mutate(r)
	}
	return r
}

// testCR builds the CR the NodeHealthCheck's template makes for the node, with the production
// builder.
func testCR(t *testing.T, owner *remediationv1alpha1.NodeHealthCheck, node string) unstructured.Unstructured {
	t.Helper()
	template := &unstructured.Unstructured{}
	template.SetAPIVersion("test.medik8s.io/v1alpha1")
	template.SetKind("TestRemediationTemplate")
	template.SetNamespace(testutil.TemplateNamespace)
	template.SetName("test-template")
	if err := unstructured.SetNestedMap(template.Object, map[string]any{"spec": map[string]any{}}, "spec", "template"); err != nil {
		t.Fatal(err)
	}
	cr, err := remediationcr.Build(template, owner, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, remediationcr.Machine{})
	if err != nil {
		t.Fatal(err)
	}
	return *cr
}

func blockers(in health.Input) []health.SkipReason {
	var out []health.SkipReason
	for _, b := range in.Blockers {
		out = append(out, b.Reason)
	}
	return out
}

func inputNode(t *testing.T, in health.Input, name string) health.Node {
	t.Helper()
	for _, n := range in.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("node %s is not in the input", name)
	return health.Node{}
}

func TestAssemble(t *testing.T) {
	other := testutil.NewNHC("other")
	other.UID = "other-uid"
	for _, tc := range []struct {
		name   string
		mode   Mode
		mutate func(r *reading)
		check  func(t *testing.T, s *Snapshot, in health.Input)
	}{
		{"nothing holds a NodeHealthCheck that reads well", Reporting, nil, func(t *testing.T, s *Snapshot, in health.Input) {
			if s.Problem != nil || len(in.Blockers) > 0 || len(in.Nodes) != 2 {
				t.Errorf("problem %v, blockers %v, %d nodes; want none, none, 2", s.Problem, in.Blockers, len(in.Nodes))
			}
			if len(in.Steps) != 1 || in.Steps[0].Template != *testutil.TestTemplateRef("test-template") {
				t.Errorf("steps %+v: want the template's one step, the template with it", in.Steps)
			}
		}},
		{"pauseRequests hold with a Paused blocker naming them", Reporting, func(r *reading) { r.nhc.Spec.PauseRequests = []string{"maintenance"} },
			func(t *testing.T, s *Snapshot, in health.Input) {
				if !slices.Equal(blockers(in), []health.SkipReason{health.SkipPaused}) || !strings.Contains(in.Blockers[0].Message, `"maintenance"`) {
					t.Errorf("blockers %+v: want one Paused naming the request", in.Blockers)
				}
			}},
		{"a selector that does not parse disables: InvalidConfiguration, and nothing is selected", Reporting,
			func(r *reading) { r.selectorErr, r.nodes = errors.New("bad key"), nil }, func(t *testing.T, s *Snapshot, in health.Input) {
				if s.Problem == nil || s.Problem.Reason != remediationv1alpha1.ConditionReasonDisabledInvalidConfig || !strings.Contains(s.Problem.Message, "spec.selector is invalid: bad key") {
					t.Errorf("problem %+v: want InvalidConfiguration naming the parse error", s.Problem)
				}
				if !s.KeepsOrphans() || !slices.Equal(blockers(in), []health.SkipReason{health.SkipDisabled}) {
					t.Errorf("keeps orphans %v, blockers %v: want true, Disabled", s.KeepsOrphans(), blockers(in))
				}
			}},
		{"a conflicting MachineHealthCheck disables, before a template problem", Reporting, func(r *reading) {
			r.templateProblem = &Problem{remediationv1alpha1.ConditionReasonDisabledTemplateNotFound, "no template"}
			r.verdict.MachineHealthChecks.Conflict = "MachineHealthCheck x remediates"
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			if s.Problem == nil || s.Problem.Reason != remediationv1alpha1.ConditionReasonDisabledMHC {
				t.Errorf("problem %+v: want the MachineHealthCheck conflict", s.Problem)
			}
		}},
		{"a template problem comes before a remediation kind's", Reporting, func(r *reading) {
			r.templateProblem = &Problem{remediationv1alpha1.ConditionReasonDisabledTemplateNotFound, "no template"}
			r.kinds.problem = &Problem{remediationv1alpha1.ConditionReasonDisabledRemediationUnavailable, "kind down"}
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			if s.Problem == nil || s.Problem.Message != "no template" || !s.Unwatchable {
				t.Errorf("problem %+v, unwatchable %v: want the template's, true", s.Problem, s.Unwatchable)
			}
		}},
		{"a remediation kind never listed holds control-plane starts, naming the kind", Reporting, func(r *reading) { r.kinds.unlisted = "BrokenRemediation" },
			func(t *testing.T, s *Snapshot, in health.Input) {
				if !strings.Contains(in.ControlPlaneUnknown, "BrokenRemediation") {
					t.Errorf("control plane unknown %q: want it to name the kind", in.ControlPlaneUnknown)
				}
			}},
		{"a node another NodeHealthCheck's status lists with CRs of a kind that cannot be read is remediated elsewhere, unknown: no start, its lease unknown", Acting, func(r *reading) {
			o := other.DeepCopy()
			o.Status.UnhealthyNodes = []remediationv1alpha1.UnhealthyNode{{Name: "w1", Remediations: []remediationv1alpha1.Remediation{
				{Resource: corev1.ObjectReference{APIVersion: "broken.medik8s.io/v1alpha1", Kind: "BrokenRemediation", Name: "w1"}}}}}
			r.nhcs = append(r.nhcs, o)
			r.kinds.unknown = []schema.GroupVersionKind{{Group: "broken.medik8s.io", Version: "v1alpha1", Kind: "BrokenRemediation"}}
			r.nodes[0].Status.Conditions[0].Status = corev1.ConditionUnknown
			r.nodes[0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(assembleNow.Add(-time.Hour))
			one := intstr.FromInt32(1)
			r.nhc.Spec.MinHealthy, r.nhc.Spec.MaxUnhealthy = &one, nil
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			w1 := inputNode(t, in, "w1")
			if !strings.Contains(w1.ElsewhereUnknown, "NodeHealthCheck other") || !strings.Contains(w1.ElsewhereUnknown, "BrokenRemediation.broken.medik8s.io") {
				t.Errorf("w1 elsewhere unknown %q: want it to name the other NodeHealthCheck and the kind", w1.ElsewhereUnknown)
			}
			if why := s.LeaseUnknown("w1"); !strings.Contains(why, "NodeHealthCheck other") {
				t.Errorf("w1's lease unknown %q: want it to name the other NodeHealthCheck", why)
			}
			if s.LeaseUnknown("w2") != "" || inputNode(t, in, "w2").ElsewhereUnknown != "" || s.Problem != nil {
				t.Errorf("w2's lease unknown %q, problem %v: want neither (the kind is not ours)", s.LeaseUnknown("w2"), s.Problem)
			}
			if !s.Unreadable(schema.GroupVersionKind{Group: "broken.medik8s.io", Version: "v1alpha1", Kind: "BrokenRemediation"}) {
				t.Errorf("the kind is not reported unreadable")
			}
			d := health.Decide(in)
			if len(d.Nodes) != 1 || d.Nodes[0].Action != health.Skip || d.Nodes[0].SkipReason != health.SkipRemediatedElsewhere {
				t.Errorf("decision %+v: want w1 skipped, remediated elsewhere", d.Nodes)
			}
		}},
		{"a kind a NodeHealthCheck uses that cannot be read makes every lease of its own unknown", Acting, func(r *reading) {
			r.kinds.unknown = []schema.GroupVersionKind{{Group: "test.medik8s.io", Version: "v1alpha1", Kind: "TestRemediation"}}
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			if why := s.LeaseUnknown("w2"); !strings.Contains(why, "TestRemediation.test.medik8s.io") {
				t.Errorf("w2's lease unknown %q: want it to name the kind", why)
			}
		}},
		{"a node whose Machine cannot be read holds control-plane starts, naming why", Reporting, func(r *reading) {
			r.controlPlane["w1"], r.controlPlaneUnknown = true, "whether node w1 is a control-plane node is unknown"
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			if !inputNode(t, in, "w1").ControlPlane || in.ControlPlaneUnknown != "whether node w1 is a control-plane node is unknown" {
				t.Errorf("w1 control plane %v, control plane unknown %q: want true, the reason", inputNode(t, in, "w1").ControlPlane, in.ControlPlaneUnknown)
			}
		}},
		{"reporting gathers the overlaps", Reporting, func(r *reading) { r.nhcs = append(r.nhcs, other) },
			func(t *testing.T, s *Snapshot, in health.Input) {
				if len(s.Overlaps) != 1 {
					t.Errorf("overlaps %+v: want the other NodeHealthCheck", s.Overlaps)
				}
			}},
		{"acting does not gather the overlaps", Acting, func(r *reading) { r.nhcs = append(r.nhcs, other) },
			func(t *testing.T, s *Snapshot, in health.Input) {
				if s.Overlaps != nil {
					t.Errorf("overlaps %+v: want none", s.Overlaps)
				}
			}},
		{"acting holds new remediations while storm recovery's state is not reported yet", Acting,
			func(r *reading) { r.nhc.Spec.StormCooldownDuration = &metav1.Duration{Duration: time.Minute} },
			func(t *testing.T, s *Snapshot, in health.Input) {
				if !slices.Equal(blockers(in), []health.SkipReason{health.SkipStorm}) {
					t.Errorf("blockers %v: want Storm", blockers(in))
				}
			}},
		{"reporting does not wait for its own report of storm recovery", Reporting,
			func(r *reading) { r.nhc.Spec.StormCooldownDuration = &metav1.Duration{Duration: time.Minute} },
			func(t *testing.T, s *Snapshot, in health.Input) {
				if len(in.Blockers) > 0 || in.StormCooldown == nil {
					t.Errorf("blockers %v, cooldown %v: want none, set", blockers(in), in.StormCooldown)
				}
			}},
		{"explaining takes the upgrade hold from the operator's report in status", Explaining, func(r *reading) {
			r.stored.Status.Conditions = []metav1.Condition{{Type: remediationv1alpha1.ConditionTypeUpgradeInProgress, Status: metav1.ConditionTrue, Message: "ClusterVersion is progressing"}}
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			if s.Upgrade.Blocked != "ClusterVersion is progressing" || !slices.Equal(blockers(in), []health.SkipReason{health.SkipUpgrade}) {
				t.Errorf("upgrade %+v, blockers %v: want the reported hold", s.Upgrade, blockers(in))
			}
		}},
		{"reporting ignores the upgrade hold in status: the gate tells", Reporting, func(r *reading) {
			r.stored.Status.Conditions = []metav1.Condition{{Type: remediationv1alpha1.ConditionTypeUpgradeInProgress, Status: metav1.ConditionTrue, Message: "ClusterVersion is progressing"}}
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			if len(in.Blockers) > 0 {
				t.Errorf("blockers %v: want none", blockers(in))
			}
		}},
		{"a clock skew not measured yet holds", Reporting, func(r *reading) { r.skew = &clockskew.Verdict{} },
			func(t *testing.T, s *Snapshot, in health.Input) {
				if !slices.Equal(blockers(in), []health.SkipReason{health.SkipClockSkew}) {
					t.Errorf("blockers %v: want ClockSkew", blockers(in))
				}
			}},
		{"a clock skew within its bound holds nothing", Reporting, func(r *reading) { r.skew = &clockskew.Verdict{Known: true, Bound: 10 * time.Second} },
			func(t *testing.T, s *Snapshot, in health.Input) {
				if len(in.Blockers) > 0 {
					t.Errorf("blockers %v: want none", blockers(in))
				}
			}},
		{"a node another NodeHealthCheck remediates says which, unless it has CRs of ours", Reporting, func(r *reading) {
			r.crs = sortByOwner([]unstructured.Unstructured{testCR(t, other, "w1"), testCR(t, other, "w2"), testCR(t, r.stored, "w2")}, r.stored.UID, r.nodes)
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			w1, w2 := inputNode(t, in, "w1"), inputNode(t, in, "w2")
			if w1.RemediatedElsewhere != "other" || w1.Remediating {
				t.Errorf("w1: remediated elsewhere %q, remediating %v: want other, false", w1.RemediatedElsewhere, w1.Remediating)
			}
			if w2.RemediatedElsewhere != "" || !w2.Remediating || len(w2.CRs) != 1 {
				t.Errorf("w2: remediated elsewhere %q, remediating %v, %d CRs: want none, true, 1", w2.RemediatedElsewhere, w2.Remediating, len(w2.CRs))
			}
		}},
		{"a node's own marks: control plane as read, the exclusion label, the manual confirmation, healthy since as reported", Reporting, func(r *reading) {
			r.controlPlane["w1"] = true
			w2 := r.nodes[1].DeepCopy()
			w2.Labels = map[string]string{remediationv1alpha1.ExcludeFromRemediationLabel: "true"}
			w2.Annotations = map[string]string{remediationv1alpha1.ManuallyConfirmedHealthyAnnotation: ""}
			r.nodes[1] = w2
			r.stored.Status.UnhealthyNodes = []remediationv1alpha1.UnhealthyNode{{Name: "w2", ConditionsHealthyTimestamp: &metav1.Time{Time: assembleNow.Add(-time.Minute)}}}
		}, func(t *testing.T, s *Snapshot, in health.Input) {
			w1, w2 := inputNode(t, in, "w1"), inputNode(t, in, "w2")
			if !w1.ControlPlane || w1.Excluded || w2.ControlPlane || !w2.Excluded || !w2.ConfirmedHealthy || !w2.HealthySince.Equal(assembleNow.Add(-time.Minute)) {
				t.Errorf("w1 %+v, w2 %+v", w1, w2)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, in := assemble(testReading(t, tc.mutate), tc.mode, time.Minute)
			if in.ReturnGrace != time.Minute || !in.Now.Equal(assembleNow) {
				t.Errorf("return grace %s, now %s: want the Gatherer's and the reading's", in.ReturnGrace, in.Now)
			}
			tc.check(t, s, in)
		})
	}
}

func TestSortByOwner(t *testing.T) {
	ours, other := testutil.NewNHC("ours"), testutil.NewNHC("other")
	ours.UID, other.UID = types.UID("ours-uid"), types.UID("other-uid")
	controlPlane := testCR(t, other, "cp")
	controlPlane.SetLabels(map[string]string{remediationv1alpha1.ControlPlaneCRLabel: ""})
	crs := []unstructured.Unstructured{testCR(t, ours, "w1"), testCR(t, ours, "gone"), testCR(t, other, "w2"), controlPlane}
	o := sortByOwner(crs, ours.UID, []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "w2"}}})
	if len(o.ours["w1"]) != 1 || len(o.ours["gone"]) != 1 || len(o.ours) != 2 {
		t.Errorf("ours %v: want w1 and gone", o.ours)
	}
	if o.elsewhere["w2"] != "other" || o.elsewhere["cp"] != "other" || len(o.elsewhere) != 2 {
		t.Errorf("elsewhere %v: want w2 and cp by other", o.elsewhere)
	}
	if !slices.Equal(o.orphans, []string{"gone"}) || !o.labelledControlPlane["cp"] || len(o.labelledControlPlane) != 1 {
		t.Errorf("orphans %v, labelled control-plane %v: want gone, cp", o.orphans, o.labelledControlPlane)
	}
}

// TestSortByOwnerPrevious checks that a CR created before its node was (the Node deleted and
// created again under the same name, whether or not the watch showed it) is not the node's
// remediation but Previous, and that one created with or after the node is.
func TestSortByOwnerPrevious(t *testing.T) {
	ours := testutil.NewNHC("ours")
	ours.UID = types.UID("ours-uid")
	recreated := assembleNow.Add(-time.Minute)
	at := func(node string, created time.Time) unstructured.Unstructured {
		cr := testCR(t, ours, node)
		cr.SetCreationTimestamp(metav1.NewTime(created))
		return cr
	}
	crs := []unstructured.Unstructured{
		at("w1", recreated.Add(-time.Hour)),                      // made for the earlier w1
		at("w2", recreated.Add(-time.Hour)),                      // w2 was not recreated: created before both
		at("w3", recreated.Add(-time.Hour)), at("w3", recreated), // one of each; same second counts as current
		at("w4", recreated.Add(-time.Hour)), // its remediator replaces the machine: the new w4 is what it makes
	}
	if err := unstructured.SetNestedSlice(crs[4].Object, []any{map[string]any{"type": remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected, "status": "True"}}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	node := func(name string, created time.Time) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	}
	o := sortByOwner(crs, ours.UID, []*corev1.Node{node("w1", recreated), node("w2", recreated.Add(-2*time.Hour)), node("w3", recreated), node("w4", recreated)})
	if _, ok := o.ours["w1"]; ok || len(o.previous["w1"]) != 1 {
		t.Errorf("w1: ours %v, previous %v: want the CR as previous only", o.ours["w1"], o.previous["w1"])
	}
	if len(o.ours["w2"]) != 1 || len(o.previous["w2"]) != 0 {
		t.Errorf("w2: ours %v, previous %v: want the CR as the node's", o.ours["w2"], o.previous["w2"])
	}
	if len(o.ours["w3"]) != 1 || len(o.previous["w3"]) != 1 || !o.ours["w3"][0].GetCreationTimestamp().Time.Equal(recreated) {
		t.Errorf("w3: ours %v, previous %v: want one of each", o.ours["w3"], o.previous["w3"])
	}
	if len(o.ours["w4"]) != 1 || len(o.previous["w4"]) != 0 {
		t.Errorf("w4: ours %v, previous %v: want the machine's replacement as the node's remediation", o.ours["w4"], o.previous["w4"])
	}
	if len(o.orphans) != 0 {
		t.Errorf("orphans %v: want none, every node is selected", o.orphans)
	}
}

// TestOutcomeNode checks what the outcome of a node's remediation is derived from: selected nodes
// with the decision (healthy: nothing to decide), the unselected ones read for status, any other
// as gone.
func TestOutcomeNode(t *testing.T) {
	created := assembleNow.Add(-time.Hour)
	r := testReading(t, func(r *reading) {
		r.nodes[1].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
			LastTransitionTime: metav1.NewTime(assembleNow.Add(-time.Minute))}}
		r.unselected = map[string]*corev1.Node{"relabelled": {ObjectMeta: metav1.ObjectMeta{Name: "relabelled", CreationTimestamp: metav1.NewTime(created)}}, "gone": nil}
	})
	s, in := assemble(r, Reporting, time.Minute)
	s.decide(in)
	for _, tc := range []struct {
		node string
		want outcome.Node
	}{
		{"w1", outcome.Node{Exists: true, Created: created, Selected: true, Healthy: true}},
		{"w2", outcome.Node{Exists: true, Created: created, Selected: true}}, // soon unhealthy: not simply healthy
		{"relabelled", outcome.Node{Exists: true, Created: created}},
		{"gone", outcome.Node{}},
		{"never-listed", outcome.Node{}},
	} {
		if got := s.OutcomeNode(tc.node); got != tc.want {
			t.Errorf("OutcomeNode(%s) = %+v, want %+v", tc.node, got, tc.want)
		}
	}
}

// The decision's node inputs are allocated once, at their size: grown by append they were a fifth
// of the manager's allocations at 5,000 nodes.
func TestAssembleSizesTheNodeInputsOnce(t *testing.T) {
	_, in := assemble(testReading(t, func(r *reading) {
		for i := range 98 {
			r.nodes = append(r.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}})
		}
	}), Acting, 0)
	if len(in.Nodes) != 100 || cap(in.Nodes) != 100 {
		t.Errorf("the node inputs: length %d, capacity %d; want 100 and 100", len(in.Nodes), cap(in.Nodes))
	}
}

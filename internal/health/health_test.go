package health

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/lease"
)

var (
	now      = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	defaults = remediationv1alpha1.DefaultUnhealthyConditions() // Ready False/Unknown for 300s
)

func ready(status corev1.ConditionStatus, since time.Duration) corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-since))}
}

func cond(t corev1.NodeConditionType, status corev1.ConditionStatus, since time.Duration) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-since))}
}

func rule(t corev1.NodeConditionType, status corev1.ConditionStatus, d time.Duration) remediationv1alpha1.UnhealthyCondition {
	return remediationv1alpha1.UnhealthyCondition{Type: t, Status: status, Duration: metav1.Duration{Duration: d}}
}

func TestEvaluateNode(t *testing.T) {
	tests := []struct {
		name       string
		rules      []remediationv1alpha1.UnhealthyCondition
		conditions []corev1.NodeCondition
		want       State
		since      time.Time // UnhealthySince
		next       time.Time
	}{
		{name: "no conditions yet", rules: defaults, want: Healthy},
		{name: "Ready=True", rules: defaults, conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue, time.Hour)}, want: Healthy},
		{name: "Ready=False for exactly the duration", rules: defaults, conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, 5*time.Minute)},
			want: Unhealthy, since: now},
		{name: "Ready=Unknown for longer than the duration", rules: defaults, conditions: []corev1.NodeCondition{ready(corev1.ConditionUnknown, 8*time.Minute)},
			want: Unhealthy, since: now.Add(-3 * time.Minute)},
		{name: "Ready=False for less than the duration", rules: defaults, conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, 2*time.Minute)},
			want: SoonUnhealthy, next: now.Add(3 * time.Minute)},
		{name: "rebooting: Ready went Unknown -> False a minute ago", rules: defaults, conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, time.Minute)},
			want: SoonUnhealthy, next: now.Add(4 * time.Minute)},
		{name: "a condition type no rule names", rules: defaults, conditions: []corev1.NodeCondition{cond(corev1.NodeDiskPressure, corev1.ConditionTrue, time.Hour), ready(corev1.ConditionTrue, time.Hour)},
			want: Healthy},
		{name: "rules are OR-ed: the custom one matches",
			rules:      append(defaults, rule(corev1.NodeDiskPressure, corev1.ConditionTrue, time.Minute)),
			conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue, time.Hour), cond(corev1.NodeDiskPressure, corev1.ConditionTrue, 2*time.Minute)},
			want:       Unhealthy, since: now.Add(-time.Minute)},
		{name: "the earliest expired rule gives the unhealthy time",
			rules:      []remediationv1alpha1.UnhealthyCondition{rule(corev1.NodeReady, corev1.ConditionFalse, 10*time.Minute), rule(corev1.NodeMemoryPressure, corev1.ConditionTrue, time.Minute)},
			conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, 20*time.Minute), cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, 5*time.Minute)},
			want:       Unhealthy, since: now.Add(-10 * time.Minute)},
		{name: "the earliest pending rule gives the next check",
			rules:      []remediationv1alpha1.UnhealthyCondition{rule(corev1.NodeReady, corev1.ConditionFalse, 10*time.Minute), rule(corev1.NodeMemoryPressure, corev1.ConditionTrue, 3*time.Minute)},
			conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, time.Minute), cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, time.Minute)},
			want:       SoonUnhealthy, next: now.Add(2 * time.Minute)},
		{name: "zero duration is unhealthy at once", rules: []remediationv1alpha1.UnhealthyCondition{rule(corev1.NodeReady, corev1.ConditionFalse, 0)},
			conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, 0)}, want: Unhealthy, since: now},
		{name: "a transition time in the future counts as now", rules: defaults, conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, -time.Hour)},
			want: SoonUnhealthy, next: now.Add(5 * time.Minute)},
		{name: "no rules: always healthy", conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, time.Hour)}, want: Healthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EvaluateNode(tt.rules, tt.conditions, now)
			if got.State != tt.want || !got.UnhealthySince.Equal(tt.since) || !got.Next.Equal(tt.next) {
				t.Errorf("got %v since %v next %v (%q), want %v since %v next %v", got.State, got.UnhealthySince, got.Next, got.Reason, tt.want, tt.since, tt.next)
			}
			if (got.State == Healthy) != (got.Reason == "") {
				t.Errorf("reason %q does not fit state %v", got.Reason, got.State)
			}
		})
	}
}

func TestMinHealthy(t *testing.T) {
	i := func(v int32) *intstr.IntOrString { x := intstr.FromInt32(v); return &x }
	s := func(v string) *intstr.IntOrString { x := intstr.FromString(v); return &x }
	tests := []struct {
		name     string
		total    int
		min, max *intstr.IntOrString
		want     int
		wantErr  bool
	}{
		// The table of the issue, for 10 nodes.
		{name: "minHealthy 8", total: 10, min: i(8), want: 8},
		{name: "minHealthy 80%", total: 10, min: s("80%"), want: 8},
		{name: "minHealthy 75% rounds up", total: 10, min: s("75%"), want: 8},
		{name: "minHealthy 0%", total: 10, min: s("0%"), want: 0},
		{name: "minHealthy 100%", total: 10, min: s("100%"), want: 10},
		{name: "maxUnhealthy 8", total: 10, max: i(8), want: 2},
		{name: "maxUnhealthy 75% rounds up", total: 10, max: s("75%"), want: 2},
		{name: "maxUnhealthy 100%", total: 10, max: s("100%"), want: 0},
		{name: "maxUnhealthy 12 of 10", total: 10, max: i(12), wantErr: true},
		// Numeric strings are integers.
		{name: `minHealthy "3"`, total: 10, min: s("3"), want: 3},
		{name: `maxUnhealthy "3"`, total: 10, max: s("3"), want: 7},
		// More cases.
		{name: "maxUnhealthy 0 needs every node healthy", total: 10, max: i(0), want: 10},
		{name: "default is 51%", total: 10, want: 6},
		{name: "default on 3 nodes", total: 3, want: 2},
		{name: "minHealthy above total blocks without error", total: 3, min: i(5), want: 5},
		{name: "no nodes", total: 0, min: s("51%"), want: 0},
		{name: "both set", total: 10, min: i(1), max: i(1), wantErr: true},
		{name: "garbage", total: 10, min: s("half"), wantErr: true},
		{name: "negative", total: 10, min: i(-1), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MinHealthy(tt.total, tt.min, tt.max)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func node(name string, remediating bool, conditions ...corev1.NodeCondition) Node {
	return Node{Name: name, Conditions: conditions, Remediating: remediating}
}

func TestDecide(t *testing.T) {
	healthy := ready(corev1.ConditionTrue, time.Hour)
	sick := ready(corev1.ConditionUnknown, 10*time.Minute)
	soon := ready(corev1.ConditionFalse, time.Minute)
	minHealthy := func(s string) *intstr.IntOrString { x := intstr.Parse(s); return &x }

	tests := []struct {
		name    string
		in      Input
		healthy int
		actions map[string]Action
		skip    SkipReason
		next    time.Time
	}{
		{
			name:    "an unhealthy node among healthy ones is remediated",
			in:      Input{Nodes: []Node{node("a", false, healthy), node("b", false, sick), node("c", false, healthy)}},
			healthy: 2, actions: map[string]Action{"b": StartRemediation},
		},
		{
			name:    "a soon-unhealthy node waits, and the decision says when to look again",
			in:      Input{Nodes: []Node{node("a", false, healthy), node("b", false, soon)}},
			healthy: 1, actions: map[string]Action{"b": Wait}, next: now.Add(4 * time.Minute),
		},
		{
			name:    "a node with a CR that is soon unhealthy keeps it (not healthy, not remediated anew)",
			in:      Input{Nodes: []Node{node("a", false, healthy), node("b", true, soon)}},
			healthy: 1, actions: map[string]Action{"b": ContinueRemediation}, next: now.Add(4 * time.Minute),
		},
		{
			name:    "a healthy node with a CR recovered and does not count healthy yet",
			in:      Input{Nodes: []Node{node("a", false, healthy), node("b", true, healthy)}},
			healthy: 1, actions: map[string]Action{"b": Recovered},
		},
		{
			name: "below the threshold no new remediation starts; running ones continue",
			in: Input{MinHealthy: minHealthy("3"), Nodes: []Node{
				node("a", false, healthy), node("b", false, healthy), node("c", true, sick), node("d", false, sick)}},
			healthy: 2, actions: map[string]Action{"c": ContinueRemediation, "d": Skip}, skip: SkipThreshold,
		},
		{
			name: "exactly at the threshold every unhealthy node starts",
			in: Input{MinHealthy: minHealthy("2"), Nodes: []Node{
				node("a", false, healthy), node("b", false, healthy), node("c", false, sick), node("d", false, sick)}},
			healthy: 2, actions: map[string]Action{"c": StartRemediation, "d": StartRemediation},
		},
		{
			name: "maxUnhealthy is converted to a threshold",
			in: Input{MaxUnhealthy: minHealthy("1"), Nodes: []Node{
				node("a", false, healthy), node("b", false, sick), node("c", false, sick)}},
			healthy: 1, actions: map[string]Action{"b": Skip, "c": Skip}, skip: SkipThreshold,
		},
		{
			name: "a blocker skips new remediations with its reason, before the threshold",
			in: Input{Blockers: []Blocker{{Reason: SkipPaused, Message: "paused by admin"}}, Nodes: []Node{
				node("a", false, healthy), node("b", false, sick), node("c", true, sick)}},
			healthy: 1, actions: map[string]Action{"b": Skip, "c": ContinueRemediation}, skip: SkipPaused,
		},
		{
			name:    "an invalid budget starts nothing",
			in:      Input{MaxUnhealthy: minHealthy("5"), Nodes: []Node{node("a", false, healthy), node("b", false, sick)}},
			healthy: 1, actions: map[string]Action{"b": Skip}, skip: SkipInvalidBudget,
		},
		{
			name: "a terminating node left to the termination-handler MachineHealthCheck counts healthy, even when paused",
			in: Input{Blockers: []Blocker{{Reason: SkipPaused, Message: "paused"}}, MinHealthy: minHealthy("2"), Nodes: []Node{
				node("a", false, healthy), {Name: "b", Conditions: []corev1.NodeCondition{sick}, LeftToMachineHealthCheck: true}}},
			healthy: 2, actions: map[string]Action{"b": Skip}, skip: SkipMachineHealthCheck,
		},
		{
			name:    "no nodes selected",
			in:      Input{},
			actions: map[string]Action{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			if tt.in.UnhealthyConditions == nil {
				tt.in.UnhealthyConditions = defaults
			}
			d := Decide(tt.in)
			if d.Observed != len(tt.in.Nodes) || d.Healthy != tt.healthy {
				t.Errorf("observed %d healthy %d, want %d and %d", d.Observed, d.Healthy, len(tt.in.Nodes), tt.healthy)
			}
			got := map[string]Action{}
			for _, n := range d.Nodes {
				got[n.Name] = n.Action
				if n.Action == Skip && (n.SkipReason != tt.skip || n.SkipMessage == "") {
					t.Errorf("%s skipped for %q (%q), want %q with a message", n.Name, n.SkipReason, n.SkipMessage, tt.skip)
				}
			}
			if len(got) != len(tt.actions) {
				t.Errorf("actions %v, want %v", got, tt.actions)
			}
			for name, want := range tt.actions {
				if got[name] != want {
					t.Errorf("%s: %v, want %v", name, got[name], want)
				}
			}
			if !d.Next.Equal(tt.next) {
				t.Errorf("next %v, want %v", d.Next, tt.next)
			}
		})
	}
}

// TestListed: status lists every node that matches an unhealthy condition, whatever holds its
// remediation back, and nodes with CRs; not soon-unhealthy nodes without CRs, nor nodes left to the
// termination-handler MachineHealthCheck.
func TestListed(t *testing.T) {
	for _, tt := range []struct {
		d    NodeDecision
		want bool
	}{
		{NodeDecision{Action: StartRemediation}, true},
		{NodeDecision{Action: ContinueRemediation}, true},
		{NodeDecision{Action: Recovered}, true},
		{NodeDecision{Action: HealthyDelayed}, true},
		{NodeDecision{Action: Skip, SkipReason: SkipThreshold}, true},
		{NodeDecision{Action: Skip, SkipReason: SkipExcluded}, true},
		{NodeDecision{Action: Skip, SkipReason: SkipRemediatedElsewhere}, true},
		{NodeDecision{Action: Skip, SkipReason: SkipPaused}, true},
		{NodeDecision{Action: Skip, SkipReason: SkipMachineHealthCheck}, false},
		{NodeDecision{Action: Wait}, false},
		{NodeDecision{Action: NoAction}, false},
	} {
		if got := tt.d.Listed(); got != tt.want {
			t.Errorf("%v %s: listed %v, want %v", tt.d.Action, tt.d.SkipReason, got, tt.want)
		}
	}
}

func TestDecideBudgetError(t *testing.T) {
	x := intstr.FromInt32(3)
	d := Decide(Input{Now: now, UnhealthyConditions: defaults, MaxUnhealthy: &x, Nodes: []Node{node("a", false, ready(corev1.ConditionFalse, time.Hour))}})
	if d.BudgetErr == nil || len(d.Started()) != 0 {
		t.Fatalf("want a budget error and nothing started, got %v and %v", d.BudgetErr, d.Started())
	}
}

// simulation is a cluster whose nodes' Ready condition flips at random while the operator applies
// Decide's actions: started remediations create a CR, recovered nodes lose theirs.
type simulation struct {
	rng      *rand.Rand
	now      time.Time
	nodes    []Node
	rules    []remediationv1alpha1.UnhealthyCondition
	min, max *intstr.IntOrString
	blockers []Blocker
	grace    time.Duration // the returning-node hold
}

func (s *simulation) step(t *testing.T) {
	// Change the world: some nodes flip Ready, time passes.
	for i := range s.nodes {
		if s.rng.IntN(6) == 0 {
			status := []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}[s.rng.IntN(3)]
			if len(s.nodes[i].Conditions) == 0 || s.nodes[i].Conditions[0].Status != status {
				s.nodes[i].Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(s.now)}}
			}
		}
	}
	s.now = s.now.Add(time.Duration(s.rng.IntN(600)) * time.Second)
	// Remediation requests: some nodes without a remediation ask for one.
	for i := range s.nodes {
		if n := &s.nodes[i]; !n.Remediating && n.Requested.IsZero() && s.rng.IntN(20) == 0 {
			n.Requested = s.now.Add(-time.Duration(s.rng.IntN(120)) * time.Second)
		}
	}

	in := Input{Now: s.now, Nodes: s.nodes, UnhealthyConditions: s.rules, MinHealthy: s.min, MaxUnhealthy: s.max, Blockers: s.blockers, ReturnGrace: s.grace,
		Steps: simulatedSteps}
	d := Decide(in)
	checkDecision(t, d, s.nodes, s.now)
	checkGate(t, in, d)
	// The returning-node hold: nothing starts unless the threshold holds without the nodes that came
	// back within the grace.
	returned := 0
	for _, n := range s.nodes {
		if _, ok := cameBack(in, n); ok && !n.Remediating && requestedHealth(in, n, EvaluateNode(s.rules, n.Conditions, s.now)).State == Healthy {
			returned++
		}
	}
	if len(d.Started()) > 0 && d.Healthy-returned < d.MinHealthy {
		t.Fatalf("started %v with %d healthy, %d of them back within %s, %d required", d.Started(), d.Healthy, returned, s.grace, d.MinHealthy)
	}
	for _, n := range d.Nodes {
		if n.Action == ContinueRemediation && n.Escalation.Due() && d.Healthy-returned < d.MinHealthy {
			t.Fatalf("escalated %s with %d healthy, %d of them back within %s, %d required", n.Name, d.Healthy, returned, s.grace, d.MinHealthy)
		}
	}

	started := map[string]bool{}
	for _, name := range d.Started() {
		started[name] = true
	}
	recovered := map[string]bool{}
	for _, n := range d.Nodes {
		if n.Action == Recovered {
			recovered[n.Name] = true
		}
	}
	escalated := map[string]Escalation{}
	for _, n := range d.Nodes {
		if n.Action == ContinueRemediation {
			escalated[n.Name] = n.Escalation
		}
	}
	remediating, controlPlane := 0, 0
	for i := range s.nodes {
		n := &s.nodes[i]
		if started[n.Name] {
			n.Remediating = true
			n.CRs = []StepCR{{StepKey: simulatedSteps[0].StepKey, Created: s.now}}
			n.RunningRequest, n.Requested = n.Requested, time.Time{} // the request is answered by this remediation
		}
		if e, ok := escalated[n.Name]; ok {
			// The remediation controller acts on the escalation: marks, then the next step's CR.
			n.CRs = slices.Clone(n.CRs)
			for _, j := range e.TimeOut {
				n.CRs[j].TimedOut, n.CRs[j].TimedOutAt = true, s.now
			}
			if e.Next != nil {
				n.CRs = append(n.CRs, StepCR{StepKey: e.Next.StepKey, Created: s.now})
			}
		}
		if recovered[n.Name] {
			if !n.RunningRequest.IsZero() && !requestAnswered(in, *n) {
				t.Fatalf("%s recovered while the remediation answering its request at %v runs unanswered", n.Name, n.RunningRequest)
			}
			n.Remediating, n.CRs, n.RunningRequest = false, nil, time.Time{}
		}
		if s.nodes[i].Remediating {
			remediating++
			if s.nodes[i].ControlPlane {
				controlPlane++
			}
		}
	}
	if controlPlane > 1 {
		t.Fatalf("%d control-plane nodes remediating at once", controlPlane)
	}
	// The budget: a step that starts remediations leaves at most total - MinHealthy nodes remediating.
	if len(started) > 0 && remediating > len(s.nodes)-d.MinHealthy {
		t.Fatalf("%d nodes remediating after starting %v, the budget allows %d of %d", remediating, d.Started(), len(s.nodes)-d.MinHealthy, len(s.nodes))
	}
}

// simulatedSteps are the escalation steps of the simulated histories.
var simulatedSteps = []Step{
	{StepKey: StepKey{"RebootTemplate", "reboot"}, Order: 0, Timeout: 3 * time.Minute},
	{StepKey: StepKey{"FenceTemplate", "fence"}, Order: 1, Timeout: 10 * time.Minute},
	{StepKey: StepKey{"ReprovisionTemplate", "reprovision"}, Order: 2, Timeout: 30 * time.Minute},
}

// checkDecision asserts the safety rules that hold for every decision.
func checkDecision(t *testing.T, d Decision, nodes []Node, now time.Time) {
	t.Helper()
	byName := map[string]Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	if d.Observed != len(nodes) || d.Healthy > d.Observed {
		t.Fatalf("counts observed %d healthy %d for %d nodes", d.Observed, d.Healthy, len(nodes))
	}
	if len(d.Started()) > 0 && (d.BudgetErr != nil || d.Healthy < d.MinHealthy) {
		t.Fatalf("started %v with %d healthy of %d required (budget error %v)", d.Started(), d.Healthy, d.MinHealthy, d.BudgetErr)
	}
	for _, nd := range d.Nodes {
		n := byName[nd.Name]
		switch nd.Action {
		case StartRemediation, Skip:
			if nd.Health.State != Unhealthy || n.Remediating {
				t.Fatalf("%v for %s which is %v (remediating %v)", nd.Action, nd.Name, nd.Health.State, n.Remediating)
			}
			if nd.Action == StartRemediation && n.Excluded {
				t.Fatalf("started excluded node %s", nd.Name)
			}
		case Recovered:
			if nd.Health.State != Healthy || !n.Remediating {
				t.Fatalf("recovered %s which is %v (remediating %v)", nd.Name, nd.Health.State, n.Remediating)
			}
		case ContinueRemediation:
			if nd.Health.State == Healthy || !n.Remediating {
				t.Fatalf("continue %s which is %v (remediating %v)", nd.Name, nd.Health.State, n.Remediating)
			}
		case HealthyDelayed:
			if nd.Health.State != Healthy || !n.Remediating {
				t.Fatalf("delayed %s which is %v (remediating %v)", nd.Name, nd.Health.State, n.Remediating)
			}
		case Wait:
			if nd.Health.State != SoonUnhealthy {
				t.Fatalf("wait on %s which is %v", nd.Name, nd.Health.State)
			}
		}
	}
	if !d.Next.IsZero() && !d.Next.After(now) {
		t.Fatalf("next check %v is not after now %v", d.Next, now)
	}
	controlPlane := 0
	for _, n := range nodes {
		if n.ControlPlane && n.Remediating {
			controlPlane++
		}
	}
	for _, name := range d.Started() {
		if byName[name].ControlPlane {
			controlPlane++
		}
	}
	if controlPlane > 1 && len(d.Started()) > 0 {
		for _, name := range d.Started() {
			if byName[name].ControlPlane {
				t.Fatalf("started control-plane node %s while %d control-plane remediations run or start", name, controlPlane)
			}
		}
	}
}

// TestBudgetHoldsOverRandomHistories is the property test: over random node histories and budgets,
// no decision starts a remediation beyond what the budget allows, and every decision obeys the
// safety rules.
func TestBudgetHoldsOverRandomHistories(t *testing.T) {
	budgets := []string{"51%", "0%", "100%", "3", "80%", "1"}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7919))
		s := &simulation{rng: rng, now: now, rules: defaults}
		if rng.IntN(2) == 0 {
			s.grace = time.Duration(rng.IntN(900)) * time.Second
		}
		for i := range 1 + rng.IntN(15) {
			s.nodes = append(s.nodes, Node{Name: string(rune('a' + i)), Conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue, time.Hour)},
				ControlPlane: rng.IntN(3) == 0, Excluded: rng.IntN(8) == 0, Created: now.Add(-time.Duration(rng.IntN(7200)) * time.Second)})
		}
		b := intstr.Parse(budgets[rng.IntN(len(budgets))])
		if rng.IntN(2) == 0 {
			s.min = &b
		} else if b.Type == intstr.Int && b.IntVal <= int32(len(s.nodes)) || b.Type == intstr.String {
			s.max = &b
		}
		if rng.IntN(5) == 0 {
			s.blockers = []Blocker{{Reason: SkipPaused, Message: "paused"}}
		}
		for range 200 {
			s.step(t)
			if t.Failed() {
				t.Fatalf("seed %d", seed)
			}
		}
		if s.blockers != nil {
			for _, n := range s.nodes {
				if n.Remediating {
					t.Fatalf("seed %d: %s remediated although every step was blocked", seed, n.Name)
				}
			}
		}
	}
}

// FuzzDecide: arbitrary node sets, conditions and budgets never make Decide panic or break a safety
// rule.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{3, 1, 2, 0, 1, 5, 200, 17}, "51%", int64(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0}, "3", int64(600))
	f.Add([]byte{9, 9, 9, 2, 1, 1, 1}, "100%", int64(-5))
	f.Fuzz(func(t *testing.T, data []byte, budget string, skewSeconds int64) {
		statuses := []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown, ""}
		var nodes []Node
		for i := 0; i+2 < len(data) && len(nodes) < 64; i += 3 {
			n := Node{Name: string(rune('a'+len(nodes)%26)) + string(rune('0'+len(nodes)/26)), Remediating: data[i]&1 == 1,
				ControlPlane: data[i]&8 == 8, Excluded: data[i]&16 == 16}
			if data[i]&2 == 0 {
				n.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: statuses[int(data[i+1])%len(statuses)],
					LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(data[i+2]) * 5 * time.Second).Add(time.Duration(skewSeconds%100000) * time.Second))}}
			}
			if n.Remediating {
				n.CRs = []StepCR{{StepKey: simulatedSteps[int(data[i+1])%len(simulatedSteps)].StepKey, Created: now.Add(-time.Duration(data[i+2]) * 10 * time.Second)}}
			}
			if data[i]&32 == 32 {
				n.LeasedBy, n.LeasedUntil = "node-maintenance", now.Add(time.Duration(data[i+2])*time.Second)
			}
			if data[i]&64 == 64 {
				n.EtcdGuard = "the etcd guard pod is Ready=True"
			}
			nodes = append(nodes, n)
		}
		b := intstr.Parse(budget)
		in := Input{Now: now, Nodes: nodes, UnhealthyConditions: defaults, Steps: simulatedSteps}
		if len(data) > 0 && data[0]&4 == 4 {
			in.MaxUnhealthy = &b
		} else {
			in.MinHealthy = &b
		}
		if len(data) > 0 && data[0]&128 == 128 {
			in.Blockers = []Blocker{{Reason: SkipUpgrade, Message: "upgrading"}}
		}
		d := Decide(in)
		checkDecision(t, d, nodes, now)
		checkGate(t, in, d)
	})
}

func TestHealthyDelay(t *testing.T) {
	healthy := ready(corev1.ConditionTrue, time.Minute)
	d := func(v time.Duration) *time.Duration { return &v }
	tests := []struct {
		name  string
		delay *time.Duration
		node  Node
		want  Action
		next  time.Time
	}{
		{name: "no delay", node: node("a", true, healthy), want: Recovered},
		{name: "zero delay releases", delay: d(0), node: Node{Name: "a", Remediating: true, Conditions: []corev1.NodeCondition{healthy}, HealthySince: now.Add(-time.Second)}, want: Recovered},
		{name: "positive delay holds, and says until when", delay: d(10 * time.Minute),
			node: Node{Name: "a", Remediating: true, Conditions: []corev1.NodeCondition{healthy}, HealthySince: now.Add(-4 * time.Minute)}, want: HealthyDelayed, next: now.Add(6 * time.Minute)},
		{name: "a node that just turned healthy starts its delay now", delay: d(10 * time.Minute), node: node("a", true, healthy), want: HealthyDelayed, next: now.Add(10 * time.Minute)},
		{name: "positive delay passed", delay: d(10 * time.Minute),
			node: Node{Name: "a", Remediating: true, Conditions: []corev1.NodeCondition{healthy}, HealthySince: now.Add(-10 * time.Minute)}, want: Recovered},
		{name: "negative delay holds forever", delay: d(-time.Second),
			node: Node{Name: "a", Remediating: true, Conditions: []corev1.NodeCondition{healthy}, HealthySince: now.Add(-240 * time.Hour)}, want: HealthyDelayed},
		{name: "manual confirmation releases a negative delay", delay: d(-time.Second),
			node: Node{Name: "a", Remediating: true, Conditions: []corev1.NodeCondition{healthy}, ConfirmedHealthy: true}, want: Recovered},
		{name: "manual confirmation releases a positive delay", delay: d(time.Hour),
			node: Node{Name: "a", Remediating: true, Conditions: []corev1.NodeCondition{healthy}, ConfirmedHealthy: true}, want: Recovered},
		{name: "a delayed node that fails again continues its remediation", delay: d(time.Hour),
			node: Node{Name: "a", Remediating: true, Conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, time.Hour)}, HealthySince: now.Add(-time.Minute)}, want: ContinueRemediation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := Decide(Input{Now: now, UnhealthyConditions: defaults, HealthyDelay: tt.delay, Nodes: []Node{tt.node}})
			if len(dec.Nodes) != 1 || dec.Nodes[0].Action != tt.want || !dec.Next.Equal(tt.next) {
				t.Fatalf("got %+v next %v, want %v next %v", dec.Nodes, dec.Next, tt.want, tt.next)
			}
			if dec.Healthy != 0 {
				t.Errorf("a node with CRs counted healthy")
			}
		})
	}
}

func TestExclusionAndControlPlane(t *testing.T) {
	healthy := ready(corev1.ConditionTrue, time.Hour)
	sick := ready(corev1.ConditionUnknown, time.Hour)
	one := intstr.FromInt32(1)
	tests := []struct {
		name    string
		nodes   []Node
		actions map[string]Action
		skips   map[string]SkipReason
	}{
		{
			name:    "an excluded node is skipped but counted unhealthy",
			nodes:   []Node{node("a", false, healthy), node("b", false, healthy), {Name: "x", Conditions: []corev1.NodeCondition{sick}, Excluded: true}},
			actions: map[string]Action{"x": Skip}, skips: map[string]SkipReason{"x": SkipExcluded},
		},
		{
			name:    "an excluded node's running remediation continues",
			nodes:   []Node{node("a", false, healthy), {Name: "x", Conditions: []corev1.NodeCondition{sick}, Excluded: true, Remediating: true}},
			actions: map[string]Action{"x": ContinueRemediation},
		},
		{
			name: "of two unhealthy control-plane nodes, one starts",
			nodes: []Node{node("a", false, healthy), node("w", false, sick),
				{Name: "cp1", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true}, {Name: "cp2", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true}},
			actions: map[string]Action{"w": StartRemediation, "cp1": StartRemediation, "cp2": Skip}, skips: map[string]SkipReason{"cp2": SkipControlPlane},
		},
		{
			name: "a control-plane node waits for another's running remediation",
			nodes: []Node{node("a", false, healthy),
				{Name: "cp1", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true, Remediating: true}, {Name: "cp2", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true}},
			actions: map[string]Action{"cp1": ContinueRemediation, "cp2": Skip}, skips: map[string]SkipReason{"cp2": SkipControlPlane},
		},
		{
			name: "a control-plane node whose remediation is only delayed still blocks the next",
			nodes: []Node{node("a", false, healthy),
				{Name: "cp1", Conditions: []corev1.NodeCondition{healthy}, ControlPlane: true, Remediating: true}, {Name: "cp2", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true}},
			actions: map[string]Action{"cp1": Recovered, "cp2": Skip}, skips: map[string]SkipReason{"cp2": SkipControlPlane},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(Input{Now: now, UnhealthyConditions: defaults, MinHealthy: &one, Nodes: tt.nodes})
			got := map[string]Action{}
			for _, n := range d.Nodes {
				got[n.Name] = n.Action
				if n.Action == Skip && n.SkipReason != tt.skips[n.Name] {
					t.Errorf("%s skipped for %s, want %s", n.Name, n.SkipReason, tt.skips[n.Name])
				}
			}
			if len(got) != len(tt.actions) {
				t.Fatalf("actions %v, want %v", got, tt.actions)
			}
			for k, v := range tt.actions {
				if got[k] != v {
					t.Errorf("%s: %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestStorm(t *testing.T) {
	const cooldown = 10 * time.Minute
	steps := []struct {
		name     string
		violated bool
		at       time.Duration
		want     StormState
		blocked  bool
		end      time.Duration // zero: none
	}{
		{name: "calm", violated: false, at: 0, want: StormState{}},
		{name: "violation starts a storm", violated: true, at: time.Minute, want: StormState{Active: true}, blocked: true},
		{name: "still violated", violated: true, at: 2 * time.Minute, want: StormState{Active: true}, blocked: true},
		{name: "threshold holds: cooldown starts", at: 3 * time.Minute, want: StormState{Active: true, CooldownSince: now.Add(3 * time.Minute)}, blocked: true, end: 13 * time.Minute},
		{name: "cooling", at: 8 * time.Minute, want: StormState{Active: true, CooldownSince: now.Add(3 * time.Minute)}, blocked: true, end: 13 * time.Minute},
		{name: "a new violation interrupts the cooldown", violated: true, at: 9 * time.Minute, want: StormState{Active: true}, blocked: true},
		{name: "holds again: a fresh cooldown", at: 10 * time.Minute, want: StormState{Active: true, CooldownSince: now.Add(10 * time.Minute)}, blocked: true, end: 20 * time.Minute},
		{name: "cooldown passed: the storm ends and remediation resumes", at: 20 * time.Minute, want: StormState{}},
	}
	var state StormState
	for _, s := range steps {
		got, blocked, end := NextStorm(state, s.violated, cooldown, now.Add(s.at))
		wantEnd := time.Time{}
		if s.end != 0 {
			wantEnd = now.Add(s.end)
		}
		if got != s.want || blocked != s.blocked || !end.Equal(wantEnd) {
			t.Fatalf("%s: got %+v blocked %v end %v; want %+v %v %v", s.name, got, blocked, end, s.want, s.blocked, wantEnd)
		}
		state = got
	}
}

func TestDecideStorm(t *testing.T) {
	cooldown := 10 * time.Minute
	two := intstr.FromInt32(2)
	in := Input{Now: now, UnhealthyConditions: defaults, MinHealthy: &two, StormCooldown: &cooldown,
		Nodes: []Node{node("a", false, ready(corev1.ConditionTrue, time.Hour)), node("b", false, ready(corev1.ConditionTrue, time.Hour)), node("c", false, ready(corev1.ConditionUnknown, time.Hour))}}
	// The threshold holds (2 healthy), but a storm is cooling: c waits.
	in.Storm = StormState{Active: true, CooldownSince: now.Add(-time.Minute)}
	d := Decide(in)
	if len(d.Started()) != 0 || d.Skipped()[0].SkipReason != SkipStorm || !d.Next.Equal(now.Add(9*time.Minute)) {
		t.Fatalf("cooling storm: started %v skipped %+v next %v", d.Started(), d.Skipped(), d.Next)
	}
	// The cooldown has passed: the storm ends and c starts in the same decision.
	in.Storm = StormState{Active: true, CooldownSince: now.Add(-cooldown)}
	d = Decide(in)
	if d.Storm.Active || len(d.Started()) != 1 {
		t.Fatalf("ended storm: state %+v started %v", d.Storm, d.Started())
	}
}

// TestOtherNodeHealthChecks: a node another NodeHealthCheck remediates gets no second remediation,
// and a control-plane node another NodeHealthCheck remediates holds this one's control-plane nodes.
func TestOtherNodeHealthChecks(t *testing.T) {
	healthy := ready(corev1.ConditionTrue, time.Hour)
	sick := ready(corev1.ConditionUnknown, time.Hour)
	one := intstr.FromInt32(1)
	d := Decide(Input{Now: now, UnhealthyConditions: defaults, MinHealthy: &one, Nodes: []Node{
		node("a", false, healthy),
		{Name: "w", Conditions: []corev1.NodeCondition{sick}, RemediatedElsewhere: "other"},
		{Name: "x", Conditions: []corev1.NodeCondition{sick}},
	}})
	if got := d.Started(); len(got) != 1 || got[0] != "x" {
		t.Fatalf("started %v, want [x]", got)
	}
	if s := d.Skipped(); len(s) != 1 || s[0].Name != "w" || s[0].SkipReason != SkipRemediatedElsewhere || !strings.Contains(s[0].SkipMessage, "other") {
		t.Fatalf("skipped %+v", s)
	}

	d = Decide(Input{Now: now, UnhealthyConditions: defaults, MinHealthy: &one, ControlPlaneElsewhere: "cp0", Nodes: []Node{
		node("a", false, healthy),
		{Name: "cp1", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true},
		{Name: "w", Conditions: []corev1.NodeCondition{sick}},
	}})
	if got := d.Started(); len(got) != 1 || got[0] != "w" {
		t.Fatalf("started %v, want [w]", got)
	}
	if s := d.Skipped(); len(s) != 1 || s[0].SkipReason != SkipControlPlane || !strings.Contains(s[0].SkipMessage, "cp0") {
		t.Fatalf("skipped %+v", s)
	}

	// Unknown is not free: a node another NodeHealthCheck may remediate unseen gets none here
	// either, with its own message; a control-plane start held because a remediation elsewhere
	// cannot be ruled out looks again a minute later (the kind may sync without an event).
	d = Decide(Input{Now: now, UnhealthyConditions: defaults, MinHealthy: &one, ControlPlaneUnknown: "kind X cannot be listed", Nodes: []Node{
		node("a", false, healthy),
		{Name: "w", Conditions: []corev1.NodeCondition{sick}, ElsewhereUnknown: "node w may be remediated by NodeHealthCheck other"},
		{Name: "cp1", Conditions: []corev1.NodeCondition{sick}, ControlPlane: true},
	}})
	if got := d.Started(); len(got) != 0 {
		t.Fatalf("started %v, want none", got)
	}
	if s := d.Skipped(); len(s) != 2 || s[1].Name != "w" || s[1].SkipReason != SkipRemediatedElsewhere || s[1].SkipMessage != "node w may be remediated by NodeHealthCheck other" ||
		s[0].SkipReason != SkipControlPlane || !strings.Contains(s[0].SkipMessage, "kind X cannot be listed") {
		t.Fatalf("skipped %+v", s)
	}
	if !d.Next.Equal(now.Add(lease.Recheck)) {
		t.Fatalf("next %s, want a minute later", d.Next)
	}
}

// TestReturningNodes: while the healthy-node threshold holds only by counting nodes that came back
// less than ReturnGrace ago, no new remediation starts, until enough of them have been back that
// long; a pool whose threshold holds without them, or an isolated failure, starts at once.
func TestReturningNodes(t *testing.T) {
	const grace = time.Minute
	old := now.Add(-24 * time.Hour)
	back := func(name string, ago time.Duration) Node { // healthy again since ago, created long before
		return Node{Name: name, Conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue, ago)}, Created: old}
	}
	steady := func(name string) Node { return back(name, time.Hour) }
	sick := func(name string) Node {
		return Node{Name: name, Conditions: []corev1.NodeCondition{ready(corev1.ConditionUnknown, 10*time.Minute)}, Created: old}
	}
	pool := func(nodes ...[]Node) []Node {
		var out []Node
		for _, n := range nodes {
			out = append(out, n...)
		}
		return out
	}
	many := func(n int, f func(string) Node, prefix string) []Node {
		var out []Node
		for i := range n {
			out = append(out, f(prefix+string(rune('a'+i))))
		}
		return out
	}
	returnedAgo := func(ago time.Duration) func(string) Node { return func(name string) Node { return back(name, ago) } }
	// seenBack: Ready since the node was created, as its condition says, but this process's watch saw
	// it change ago.
	seenBack := func(ago time.Duration) func(string) Node {
		return func(name string) Node {
			n := back(name, now.Sub(old))
			n.SeenChanging = map[corev1.NodeConditionType]time.Time{corev1.NodeReady: now.Add(-ago)}
			return n
		}
	}
	minHealthy := intstr.Parse("51%") // 6 of 10
	tests := []struct {
		name    string
		nodes   []Node
		grace   time.Duration
		started int
		next    time.Time // zero: no hold pending
	}{
		{name: "an outage ends: the threshold holds only with the nodes back for 10s",
			nodes: pool(many(1, steady, "s"), many(5, returnedAgo(10*time.Second), "r"), many(4, sick, "x")), grace: grace,
			// 5 must have been back a minute: the last of them came back 10s ago.
			next: now.Add(50 * time.Second)},
		{name: "returns spread out: the hold ends when enough of them have been back a minute",
			nodes: pool(many(1, steady, "s"), many(3, returnedAgo(50*time.Second), "r"), many(2, returnedAgo(5*time.Second), "q"), many(4, sick, "x")), grace: grace,
			// 6 healthy, 1 settled: 5 must settle, the 5th oldest came back 5s ago.
			next: now.Add(55 * time.Second)},
		{name: "the threshold holds without the returned nodes", grace: grace,
			nodes: pool(many(6, steady, "s"), many(2, returnedAgo(10*time.Second), "r"), many(2, sick, "x")), started: 2},
		{name: "an isolated failure in a steady pool", grace: grace,
			nodes: pool(many(9, steady, "s"), many(1, sick, "x")), started: 1},
		{name: "returned more than the grace ago", grace: grace,
			nodes: pool(many(1, steady, "s"), many(5, returnedAgo(61*time.Second), "r"), many(4, sick, "x")), started: 4},
		{name: "nodes that just joined did not come back", grace: grace,
			nodes: pool(many(1, steady, "s"), many(5, func(name string) Node {
				n := back(name, 10*time.Second)
				n.Created = now.Add(-40 * time.Second) // Ready 30s after it registered
				return n
			}, "j"), many(4, sick, "x")), started: 4},
		// kwok's stock stages keep the creation time as the condition's lastTransitionTime when a node
		// turns Ready again; the watch saw it change.
		{name: "seen coming back by the watch, the condition's time kept from its creation", grace: grace,
			nodes: pool(many(1, steady, "s"), many(5, seenBack(10*time.Second), "r"), many(4, sick, "x")),
			next:  now.Add(50 * time.Second)},
		{name: "seen changing by the watch more than the grace ago", grace: grace,
			nodes: pool(many(1, steady, "s"), many(5, seenBack(61*time.Second), "r"), many(4, sick, "x")), started: 4},
		{name: "seen changing, but the condition's own time is later", grace: grace,
			nodes: pool(many(1, steady, "s"), many(5, func(name string) Node {
				n := back(name, 10*time.Second)
				n.SeenChanging = map[corev1.NodeConditionType]time.Time{corev1.NodeReady: now.Add(-2 * time.Minute)}
				return n
			}, "r"), many(4, sick, "x")),
			next: now.Add(50 * time.Second)},
		{name: "seen changing: a condition no unhealthy condition names does not count", grace: grace,
			nodes: pool(many(1, steady, "s"), many(5, func(name string) Node {
				n := steady(name)
				n.SeenChanging = map[corev1.NodeConditionType]time.Time{corev1.NodeMemoryPressure: now.Add(-10 * time.Second)}
				return n
			}, "r"), many(4, sick, "x")), started: 4},
		{name: "seen coming back by the watch, but it just joined", grace: grace,
			nodes: pool(many(1, steady, "s"), many(5, func(name string) Node {
				n := seenBack(10 * time.Second)(name)
				n.Created = now.Add(-40 * time.Second)
				n.Conditions[0].LastTransitionTime = metav1.NewTime(n.Created)
				return n
			}, "j"), many(4, sick, "x")), started: 4},
		{name: "off", nodes: pool(many(1, steady, "s"), many(5, returnedAgo(10*time.Second), "r"), many(4, sick, "x")), started: 4},
		{name: "nothing to start: nothing pending", grace: grace,
			nodes: pool(many(1, steady, "s"), many(9, returnedAgo(10*time.Second), "r"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: now, Nodes: tc.nodes, UnhealthyConditions: defaults, MinHealthy: &minHealthy, ReturnGrace: tc.grace}
			d := Decide(in)
			checkDecision(t, d, tc.nodes, now)
			if got := len(d.Started()); got != tc.started {
				t.Fatalf("started %v, want %d", d.Started(), tc.started)
			}
			if !d.Next.Equal(tc.next) {
				t.Fatalf("next %v, want %v", d.Next, tc.next)
			}
			if tc.next.IsZero() {
				return
			}
			for _, n := range d.Skipped() {
				if n.SkipReason != SkipNodesReturning || !strings.Contains(n.SkipMessage, "came back less than 1m0s ago") {
					t.Fatalf("skipped %s: %s (%s)", n.Name, n.SkipReason, n.SkipMessage)
				}
			}
			// At Next, they start.
			in.Now = tc.next
			if d := Decide(in); len(d.Started()) != len(d.Skipped())+len(d.Started()) || len(d.Started()) == 0 {
				t.Fatalf("at %v started %v, skipped %v", in.Now, d.Started(), d.Skipped())
			}
		})
	}
}

func TestRepairBudget(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	b := RepairBudget{Max: 2, Window: time.Hour}
	starts := []time.Time{now.Add(-90 * time.Minute), now.Add(-50 * time.Minute), now.Add(-10 * time.Minute)}
	if got := b.Counted(starts, now); len(got) != 2 {
		t.Fatalf("Counted = %v, want the two within the hour", got)
	}
	exhausted, until := b.Exhausted(starts, now)
	if !exhausted || !until.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("Exhausted = %v, %v; want true until the older counted start leaves the window (%v)", exhausted, until, now.Add(10*time.Minute))
	}
	if exhausted, _ := (RepairBudget{Max: 3, Window: time.Hour}).Exhausted(starts, now); exhausted {
		t.Fatal("3 allowed, 2 counted: not exhausted")
	}

	sick := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	healthy := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Hour))}}
	in := Input{Now: now, UnhealthyConditions: []remediationv1alpha1.UnhealthyCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Duration: metav1.Duration{Duration: time.Minute}}},
		Nodes: []Node{
			{Name: "again", Conditions: sick, Repairs: starts},
			{Name: "first", Conditions: sick},
			{Name: "h1", Conditions: healthy}, {Name: "h2", Conditions: healthy}, {Name: "h3", Conditions: healthy},
		},
		RepairBudget: &b}
	d := Decide(in)
	byName := map[string]NodeDecision{}
	for _, n := range d.Nodes {
		byName[n.Name] = n
	}
	if n := byName["again"]; n.Action != Skip || n.SkipReason != SkipRepairBudget || !strings.Contains(n.SkipMessage, "2 time(s) within 1h0m0s") {
		t.Fatalf("a node remediated twice within the hour: %+v, want skipped for the repair budget", n)
	}
	if n := byName["first"]; n.Action != StartRemediation {
		t.Fatalf("a node never remediated: %v, want StartRemediation", n.Action)
	}
	if !d.Next.Equal(now.Add(10 * time.Minute)) {
		t.Fatalf("Next = %v, want when the budget has room again (%v)", d.Next, now.Add(10*time.Minute))
	}
	in.RepairBudget = nil
	if d := Decide(in); d.Nodes[0].Action != StartRemediation {
		t.Fatal("without a repair budget, no limit (as upstream)")
	}
}

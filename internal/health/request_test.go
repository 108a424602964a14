package health

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestRemediationRequests: a node's remediation request (spec.allowRemediationRequests) makes it
// unhealthy as if its condition had matched for its duration, under every rule that holds a new
// remediation; the remediation that answers it is not removed as recovered before its remediator
// reports, the node's conditions change or its steps are exhausted.
func TestRemediationRequests(t *testing.T) {
	healthy := func(name string) Node { return node(name, false, ready(corev1.ConditionTrue, time.Hour)) }
	requested := func(name string, ago time.Duration) Node {
		n := healthy(name)
		n.Requested = now.Add(-ago)
		return n
	}
	// answering is a node whose remediation answers a request made 10 minutes ago, its first CR
	// created 9 minutes ago.
	answering := func(name string, crs ...StepCR) Node {
		n := node(name, true, ready(corev1.ConditionTrue, time.Hour))
		n.RunningRequest = now.Add(-10 * time.Minute)
		if len(crs) == 0 {
			crs = []StepCR{{StepKey: simulatedSteps[0].StepKey, Created: now.Add(-9 * time.Minute)}}
		}
		n.CRs = crs
		return n
	}
	pool := func(extra ...Node) []Node {
		out := []Node{healthy("h1"), healthy("h2"), healthy("h3")}
		return append(out, extra...)
	}
	three, four, one := intstr.FromInt32(3), intstr.FromInt32(4), intstr.FromInt32(1)
	tests := []struct {
		name     string
		nodes    []Node
		min      *intstr.IntOrString
		blockers []Blocker
		want     map[string]Action
		reason   SkipReason // of the skipped nodes
	}{
		{name: "a healthy node with a request is remediated", nodes: pool(requested("r", time.Minute)),
			want: map[string]Action{"r": StartRemediation}},
		{name: "three of four healthy, three required: the request starts", nodes: pool(requested("r", time.Minute)), min: &three,
			want: map[string]Action{"r": StartRemediation}},
		{name: "a request starts only within the threshold's headroom", nodes: pool(requested("r", time.Minute)), min: &four,
			want: map[string]Action{"r": Skip}, reason: SkipRequestThreshold},
		{name: "requests take the headroom in their order", nodes: pool(requested("r", time.Minute), requested("s", 2*time.Minute)), min: &four,
			want: map[string]Action{"s": StartRemediation, "r": Skip}, reason: SkipRequestThreshold},
		{name: "a request does not count as unhealthy: a failure still starts", nodes: pool(requested("r", time.Minute), node("f", false, ready(corev1.ConditionUnknown, time.Hour))),
			min: &three, want: map[string]Action{"f": StartRemediation, "r": StartRemediation}},
		{name: "a request does not hold a failure back at the threshold", nodes: pool(requested("r", time.Minute), node("f", false, ready(corev1.ConditionUnknown, time.Hour))),
			min: &four, want: map[string]Action{"f": StartRemediation, "r": Skip}, reason: SkipRequestThreshold},
		{name: "a pause holds a request", nodes: pool(requested("r", time.Minute)), blockers: []Blocker{{Reason: SkipPaused, Message: "paused"}},
			want: map[string]Action{"r": Skip}, reason: SkipPaused},
		{name: "a request dated in the future counts from now", nodes: pool(requested("r", -time.Hour)),
			want: map[string]Action{"r": StartRemediation}},
		{name: "the answering remediation runs while its remediator has not reported", nodes: pool(answering("r")),
			want: map[string]Action{"r": ContinueRemediation}},
		{name: "it ends when the CR reports Succeeded=True", nodes: pool(answering("r", StepCR{StepKey: simulatedSteps[0].StepKey, Created: now.Add(-9 * time.Minute), Succeeded: metav1.ConditionTrue})),
			want: map[string]Action{"r": Recovered}},
		{name: "it ends when every step is exhausted", nodes: pool(answering("r",
			StepCR{StepKey: simulatedSteps[0].StepKey, Created: now.Add(-50 * time.Minute), TimedOut: true, TimedOutAt: now.Add(-47 * time.Minute)},
			StepCR{StepKey: simulatedSteps[1].StepKey, Created: now.Add(-47 * time.Minute), TimedOut: true, TimedOutAt: now.Add(-37 * time.Minute)},
			StepCR{StepKey: simulatedSteps[2].StepKey, Created: now.Add(-37 * time.Minute), TimedOut: true, TimedOutAt: now.Add(-5 * time.Minute)})),
			want: map[string]Action{"r": Recovered}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: now, Nodes: tc.nodes, UnhealthyConditions: defaults, MinHealthy: tc.min, Blockers: tc.blockers, Steps: simulatedSteps}
			if tc.min == nil {
				in.MinHealthy = &one
			}
			d := Decide(in)
			checkDecision(t, d, tc.nodes, now)
			got := map[string]Action{}
			for _, nd := range d.Nodes {
				got[nd.Name] = nd.Action
				if nd.Action == Skip && nd.SkipReason != tc.reason {
					t.Fatalf("%s skipped for %s, want %s: %s", nd.Name, nd.SkipReason, tc.reason, nd.SkipMessage)
				}
				if nd.Name == "r" && nd.Action != Recovered {
					if nd.Health.Requested.IsZero() || !strings.Contains(nd.Health.Reason, "remediation requested at") {
						t.Fatalf("r's verdict does not name the request: %+v", nd.Health)
					}
					if nd.Health.UnhealthySince.After(now) {
						t.Fatalf("unhealthy since %v, after now", nd.Health.UnhealthySince)
					}
				}
			}
			for name, a := range tc.want {
				if got[name] != a {
					t.Fatalf("%s: %v, want %v (all: %v)", name, got[name], a, got)
				}
			}
			if a := tc.want["r"]; (a == StartRemediation || a == Skip) && !slices.Contains(in.MayAct(), "r") {
				t.Fatalf("MayAct %v for r, which is %v", in.MayAct(), a)
			}
		})
	}
}

// TestRequestedRemediationEndsWhenTheNodeChanges: the node going down during the answering
// remediation (its Ready changes after the first CR) hands the decision back to its conditions:
// soon unhealthy while it reboots, recovered once it is back.
func TestRequestedRemediationEndsWhenTheNodeChanges(t *testing.T) {
	one := intstr.FromInt32(1)
	base := Node{Name: "r", Remediating: true, RunningRequest: now.Add(-10 * time.Minute),
		CRs: []StepCR{{StepKey: simulatedSteps[0].StepKey, Created: now.Add(-9 * time.Minute)}}}
	for _, tc := range []struct {
		name  string
		ready corev1.NodeCondition
		seen  map[corev1.NodeConditionType]time.Time
		want  Action
	}{
		{name: "rebooting: Ready Unknown since the CR", ready: ready(corev1.ConditionUnknown, time.Minute), want: ContinueRemediation},
		{name: "back: Ready True since the CR", ready: ready(corev1.ConditionTrue, time.Minute), want: Recovered},
		{name: "back, seen by the watch although its lastTransitionTime did not move", ready: ready(corev1.ConditionTrue, time.Hour),
			seen: map[corev1.NodeConditionType]time.Time{corev1.NodeReady: now.Add(-time.Minute)}, want: Recovered},
		{name: "unchanged", ready: ready(corev1.ConditionTrue, time.Hour), want: ContinueRemediation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := base
			n.Conditions, n.SeenChanging = []corev1.NodeCondition{tc.ready}, tc.seen
			nodes := []Node{n, node("h", false, ready(corev1.ConditionTrue, time.Hour))}
			d := Decide(Input{Now: now, Nodes: nodes, UnhealthyConditions: defaults, MinHealthy: &one, Steps: simulatedSteps})
			checkDecision(t, d, nodes, now)
			nd, _ := findDecision(d, "r")
			if nd.Action != tc.want {
				t.Fatalf("%v (%s), want %v", nd.Action, nd.Health.Reason, tc.want)
			}
			if tc.name == "rebooting: Ready Unknown since the CR" && (nd.Health.State != SoonUnhealthy || !nd.Health.Requested.IsZero()) {
				t.Fatalf("while it reboots its conditions decide: %+v", nd.Health)
			}
		})
	}
}

// TestRequestsWaitBehindFailuresInFlight: under spec.maxInFlight a node that is really down starts
// before requested nodes (a node can write its own request), which go in the order of their requests.
func TestRequestsWaitBehindFailuresInFlight(t *testing.T) {
	one, minHealthy := intstr.FromInt32(1), intstr.FromInt32(1)
	sick := node("z-sick", false, ready(corev1.ConditionUnknown, 10*time.Minute)) // unhealthy 5 minutes ago
	later := node("b-requested-later", false, ready(corev1.ConditionTrue, time.Hour))
	later.Requested = now.Add(-time.Minute)
	first := node("c-requested-first", false, ready(corev1.ConditionTrue, time.Hour))
	first.Requested = now.Add(-2 * time.Hour)
	healthy := func() []Node {
		var out []Node
		for i := range 5 {
			out = append(out, node(string(rune('h'+i)), false, ready(corev1.ConditionTrue, time.Hour)))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		nodes   []Node
		started string
		waiting []string
	}{
		{name: "a failure first, however late", nodes: append([]Node{sick, later, first}, healthy()...), started: "z-sick",
			waiting: []string{"b-requested-later", "c-requested-first"}},
		{name: "requests in their order", nodes: append([]Node{later, first}, healthy()...), started: "c-requested-first",
			waiting: []string{"b-requested-later"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{Now: now, Nodes: tc.nodes, UnhealthyConditions: defaults, MinHealthy: &minHealthy, MaxInFlight: &one, Steps: simulatedSteps})
			checkDecision(t, d, tc.nodes, now)
			if got := d.Started(); !slices.Equal(got, []string{tc.started}) {
				t.Fatalf("started %v, want %s", got, tc.started)
			}
			for _, name := range tc.waiting {
				if nd, _ := findDecision(d, name); nd.SkipReason != SkipInFlight {
					t.Fatalf("%s: %v %s", name, nd.Action, nd.SkipReason)
				}
			}
		})
	}
}

func findDecision(d Decision, name string) (NodeDecision, bool) {
	for _, nd := range d.Nodes {
		if nd.Name == name {
			return nd, true
		}
	}
	return NodeDecision{}, false
}

// TestRequestBaseline: with the node's baseline recorded when the remediation started, a change is
// the node's conditions differing from it, judged with the node's own timestamps: a node whose clock
// runs ahead (its lastTransitionTime after the CR's creation) has not changed for that.
func TestRequestBaseline(t *testing.T) {
	one := intstr.FromInt32(1)
	ahead := ready(corev1.ConditionTrue, -2*time.Hour) // written by a kubelet whose clock is two hours ahead
	base := Baseline(defaults, []corev1.NodeCondition{ahead, cond("Custom", corev1.ConditionTrue, time.Hour)}, now.Add(-9*time.Minute))
	if len(base.Conditions) != 1 || base.Conditions[0].Type != corev1.NodeReady {
		t.Fatalf("baseline %+v: want Ready alone (the type the unhealthy conditions name)", base)
	}
	for _, tc := range []struct {
		name  string
		ready corev1.NodeCondition
		seen  time.Time
		want  Action
	}{
		{name: "unchanged, its timestamp after the CR's creation", ready: ahead, want: ContinueRemediation},
		{name: "Ready went Unknown", ready: ready(corev1.ConditionUnknown, -2*time.Hour+time.Second), want: ContinueRemediation},
		{name: "Ready True again, a new timestamp", ready: ready(corev1.ConditionTrue, -3*time.Hour), want: Recovered},
		{name: "the watch saw Ready change after the baseline", ready: ahead, seen: now.Add(-time.Minute), want: Recovered},
		{name: "the watch saw Ready change before the baseline", ready: ahead, seen: now.Add(-10 * time.Minute), want: ContinueRemediation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := Node{Name: "r", Remediating: true, RunningRequest: now.Add(-10 * time.Minute), RequestBaseline: &base,
				CRs:        []StepCR{{StepKey: simulatedSteps[0].StepKey, Created: now.Add(-9 * time.Minute)}},
				Conditions: []corev1.NodeCondition{tc.ready}}
			if !tc.seen.IsZero() {
				n.SeenChanging = map[corev1.NodeConditionType]time.Time{corev1.NodeReady: tc.seen}
			}
			// The first step's timeout is far off: only a change ends the requested remediation.
			steps := []Step{{StepKey: simulatedSteps[0].StepKey, Timeout: time.Hour}}
			nodes := []Node{n, node("h", false, ready(corev1.ConditionTrue, time.Hour))}
			d := Decide(Input{Now: now, Nodes: nodes, UnhealthyConditions: defaults, MinHealthy: &one, Steps: steps})
			checkDecision(t, d, nodes, now)
			if nd, _ := findDecision(d, "r"); nd.Action != tc.want {
				t.Fatalf("%v (%s), want %v", nd.Action, nd.Health.Reason, tc.want)
			}
		})
	}
}

// TestCountFrom: a condition whose time is not trusted (Node.CountFrom) counts from when the
// manager saw it change, not from its lastTransitionTime: a blip backdated by a slow clock is soon
// unhealthy, not unhealthy at once.
func TestCountFrom(t *testing.T) {
	one := intstr.FromInt32(1)
	blip := node("blip", false, ready(corev1.ConditionUnknown, time.Hour))
	healthy := node("h", false, ready(corev1.ConditionTrue, time.Hour))
	d := Decide(Input{Now: now, Nodes: []Node{blip, healthy}, UnhealthyConditions: defaults, MinHealthy: &one, Steps: simulatedSteps})
	if nd, _ := findDecision(d, "blip"); nd.Action != StartRemediation {
		t.Fatalf("trusted: %v, want a start", nd.Action)
	}
	blip.CountFrom = map[corev1.NodeConditionType]time.Time{corev1.NodeReady: now.Add(-time.Minute)}
	d = Decide(Input{Now: now, Nodes: []Node{blip, healthy}, UnhealthyConditions: defaults, MinHealthy: &one, Steps: simulatedSteps})
	nd, _ := findDecision(d, "blip")
	if nd.Action != Wait || !nd.Health.Next.Equal(now.Add(4*time.Minute)) {
		t.Fatalf("untrusted: %v until %v, want Wait until 4 minutes from now", nd.Action, nd.Health.Next)
	}
	if blip.Conditions[0].LastTransitionTime.Time.Equal(now.Add(-time.Minute)) {
		t.Fatal("the node's conditions were changed")
	}
}

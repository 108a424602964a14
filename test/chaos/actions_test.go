package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// A step is one move. A random run chooses each move from the model and the seeded generator only,
// never from what the API shows, so a seed replays the same history; what the controllers make of
// it is what is under test. Every move prints as a line of a script (move.String), and
// CHAOS_SCRIPT="fail w01 False; clock 45s; ..." replays a history, so a failing one can be cut
// down by hand.
type move struct {
	Kind   string
	Nodes  []string
	NHC    string
	Status corev1.ConditionStatus
	D      time.Duration
	Pool   string
	// Machine is, for relink, the Machine the node claims next ("": none).
	Machine string
	Config  int
	Rate    float64
	On      bool
	// Count is, for a burst, how many moves it makes.
	Count int
	// Chosen is the kind that chose a random move (relapse makes a fail move); not part of a script.
	Chosen string
}

// A step is one move, or a burst: several moves without settling in between (script syntax: the
// moves joined by " + "), so that later moves land while the controllers still work on the first.

// Move kinds, their script syntax, and how often a random run picks them (weights). A kind whose
// precondition the model does not meet is not picked.
type moveKind struct {
	kind, syntax string
	weight       int
	choose       func(w *world) (move, bool)
}

var kinds = []moveKind{
	{"fail", "fail <node> False|Unknown", 18, func(w *world) (move, bool) {
		if w.crowded() {
			return move{}, false
		}
		return w.nodeMove("fail", isHealthy, unhealthyStatus(w))
	}},
	{"recover", "recover <node>", 4, func(w *world) (move, bool) { return w.nodeMove("recover", isUnhealthy, "") }},
	// The remediator acts on nodes that have been unhealthy for 30s, which likely have a CR.
	{"fix", "fix <node>", 8, func(w *world) (move, bool) { return w.nodeMove("fix", w.unhealthyFor(30*time.Second), "") }},
	{"flap", "flap <node>", 5, func(w *world) (move, bool) { return w.nodeMove("flap", exists, "") }},
	{"cr-fails", "cr-fails <node>", 5, func(w *world) (move, bool) {
		return w.nodeMove("cr-fails", w.unhealthyFor(30*time.Second), "")
	}},
	{"clock", "clock <duration>", 26, func(w *world) (move, bool) { return move{Kind: "clock", D: pick(w, clockSteps)}, true }},
	{"pool", "pool <node> a|b|none", 5, func(w *world) (move, bool) {
		m, ok := w.nodeMove("pool", exists, "")
		if ok {
			m.Pool = pick(w, slices.DeleteFunc([]string{"a", "b", ""}, func(p string) bool { return p == w.cur.Nodes[m.Nodes[0]].Pool }))
		}
		return m, ok
	}},
	{"exclude", "exclude <node> | include <node>", 4, func(w *world) (move, bool) {
		m, ok := w.nodeMove("exclude", exists, "")
		if ok && w.cur.Nodes[m.Nodes[0]].Excluded {
			m.Kind = "include"
		} else if ok && !w.oneIn(3) {
			return move{}, false
		}
		return m, ok
	}},
	{"template", "template <nhc> <config>", 4, func(w *world) (move, bool) {
		h := w.cur.NHCs[pick(w, w.cur.nhcNames())]
		var others []int
		for i := range templateConfigs {
			if i != h.Config {
				others = append(others, i)
			}
		}
		return move{Kind: "template", NHC: h.Name, Config: pick(w, others)}, true
	}},
	{"pause", "pause <nhc> | resume <nhc>", 4, func(w *world) (move, bool) {
		if paused := w.nhcs((*nhc).paused); len(paused) > 0 {
			return move{Kind: "resume", NHC: pick(w, paused)}, true
		}
		return move{Kind: "pause", NHC: pick(w, w.cur.nhcNames())}, w.oneIn(3)
	}},
	{"forge", "forge <nhc> <node>", 3, func(w *world) (move, bool) {
		h := pick(w, w.cur.nhcNames())
		m, ok := w.nodeMove("forge", exists, "")
		m.NHC = h
		return m, ok
	}},
	{"faults", "faults <rate>|off", 4, func(w *world) (move, bool) {
		if w.faultRate > 0 {
			return move{Kind: "faults"}, true
		}
		return move{Kind: "faults", Rate: pick(w, faultRates)}, true
	}},
	{"poison", "poison <node> | unpoison", 2, func(w *world) (move, bool) {
		if w.cur.Poisoned != "" {
			return move{Kind: "unpoison"}, true
		}
		return w.nodeMove("poison", isWorker, "")
	}},
	{"restart", "restart", 2, func(w *world) (move, bool) { return move{Kind: "restart"}, true }},
	{"leader-change", "leader-change", 2, func(w *world) (move, bool) { return move{Kind: "leader-change"}, true }},
	{"delete", "delete <node>", 2, func(w *world) (move, bool) { return w.nodeMove("delete", isWorker, "") }},
	{"recreate", "recreate <node> [False|Unknown]", 3, func(w *world) (move, bool) {
		return w.nodeMove("recreate", func(n node) bool { return !n.Exists }, "")
	}},
	// Issue 33: a Node deleted and created again under the same name at once (a machine replaced,
	// the new one registering healthy or not ready) while the managers' watches are cut: a burst of
	// drop-watches, delete and recreate, so that the controllers never see the node gone (their
	// informers list again once the new one is there). Without the cut, a watch shows the deletion.
	{"replace", "drop-watches + delete <node> + recreate <node> [False|Unknown]", 3, func(w *world) (move, bool) {
		m, ok := w.nodeMove("replace", isWorker, pick(w, []corev1.ConditionStatus{"", corev1.ConditionUnknown, corev1.ConditionFalse}))
		return m, ok
	}},
	// Moves of issue 24: the same node failing again and again (the repair budget), its reset, dry-run,
	// clock skew, a maintenance operator's lease, watches dropped, the API server restarted, the leader
	// killed, and bursts.
	{"relapse", "fail <node> False|Unknown (a node that failed before, one of those that failed most)", 8, func(w *world) (move, bool) {
		most := 0
		if w.crowded() {
			return move{}, false
		}
		for _, name := range w.nodes(isHealthy) {
			most = max(most, w.cur.Nodes[name].Failures)
		}
		if most == 0 {
			return move{}, false
		}
		return w.nodeMove("fail", func(n node) bool { return isHealthy(n) && n.Failures == most }, unhealthyStatus(w))
	}},
	{"reset-budget", "reset-budget <node>", 3, func(w *world) (move, bool) {
		return w.nodeMove("reset-budget", func(n node) bool { return n.Exists && n.Failures >= 2 }, "")
	}},
	{"dry-run", "dry-run <nhc> on|off", 4, func(w *world) (move, bool) {
		if dry := w.nhcs(func(h *nhc) bool { return h.Spec.DryRun }); len(dry) > 0 {
			return move{Kind: "dry-run", NHC: pick(w, dry), On: false}, true
		}
		return move{Kind: "dry-run", NHC: pick(w, w.cur.nhcNames()), On: true}, w.oneIn(3)
	}},
	// Issue 28: a bound on the remediations in flight, set and removed.
	{"in-flight", "in-flight <nhc> <n>|off", 3, func(w *world) (move, bool) {
		if limited := w.nhcs(func(h *nhc) bool { return h.Spec.MaxInFlight != nil }); len(limited) > 0 && w.rng.IntN(2) == 0 {
			return move{Kind: "in-flight", NHC: pick(w, limited)}, true
		}
		return move{Kind: "in-flight", NHC: pick(w, w.cur.nhcNames()), Count: pick(w, []int{1, 2})}, true
	}},
	{"domain", "domain <nhc> <n>|off (failure domains by pool)", 3, func(w *world) (move, bool) {
		if bounded := w.nhcs(func(h *nhc) bool { return h.Spec.FailureDomain != nil }); len(bounded) > 0 && w.rng.IntN(2) == 0 {
			return move{Kind: "domain", NHC: pick(w, bounded)}, true
		}
		return move{Kind: "domain", NHC: pick(w, w.cur.nhcNames()), Count: pick(w, []int{1, 2})}, true
	}},
	{"skew", "skew <offset>", 4, func(w *world) (move, bool) {
		if w.cur.skewed() {
			return move{Kind: "skew", D: pick(w, []time.Duration{0, 3 * time.Second, -3 * time.Second})}, true
		}
		return move{Kind: "skew", D: pick(w, []time.Duration{5 * time.Minute, -5 * time.Minute, 20 * time.Second, -20 * time.Second})}, w.oneIn(4)
	}},
	{"maintain", "maintain <node> | unmaintain <node>", 3, func(w *world) (move, bool) {
		if maintained := w.nodes(func(n node) bool { return n.Maintained }); len(maintained) > 0 && w.rng.IntN(2) == 0 {
			return move{Kind: "unmaintain", Nodes: []string{pick(w, maintained)}}, true
		}
		return w.nodeMove("maintain", func(n node) bool { return n.Exists && !n.Maintained }, "")
	}},
	{"drop-watches", "drop-watches", 3, func(w *world) (move, bool) { return move{Kind: "drop-watches"}, true }},
	{"apiserver-restart", "apiserver-restart", 2, func(w *world) (move, bool) { return move{Kind: "apiserver-restart"}, true }},
	{"kill", "kill", 3, func(w *world) (move, bool) { return move{Kind: "kill"}, true }},
	// A kubelet writes its node's Machine claim: another node's Machine (a control-plane one, one
	// of a node that is down) or none; and back to its own, more often.
	{"relink", "relink <node> <machine>|none", 3, func(w *world) (move, bool) {
		if forged := w.nodes(func(n node) bool { return n.Exists && n.Machine != machineOf(n.Name) }); len(forged) > 0 && w.rng.IntN(2) == 0 {
			name := pick(w, forged)
			return move{Kind: "relink", Nodes: []string{name}, Machine: machineOf(name)}, true
		}
		m, ok := w.nodeMove("relink", exists, "")
		if ok {
			own := machineOf(m.Nodes[0])
			m.Machine = pick(w, slices.DeleteFunc(append(w.cur.machines(), ""), func(machine string) bool { return machine == own }))
		}
		return m, ok && w.oneIn(2)
	}},
	// Issue 33: a slow condition writer (its clock runs behind) dates a healthy node's failure back.
	{"slow", "slow <node> False|Unknown <lag>", 3, func(w *world) (move, bool) {
		if w.crowded() {
			return move{}, false
		}
		m, ok := w.nodeMove("slow", isHealthy, unhealthyStatus(w))
		m.D = pick(w, []time.Duration{20 * time.Second, 45 * time.Second, 2 * time.Minute})
		return m, ok
	}},
	// Nodes being removed: the cluster autoscaler's taint dated now or 40 minutes ago (its hold
	// over), Karpenter's (no time), or a deletion a finalizer keeps; and the removal given up (the
	// taint lifted) or done (the finalizer released: the node goes).
	{"remove", "remove <node> autoscaler|autoscaler-old|karpenter|deletion | unremove <node>", 3, func(w *world) (move, bool) {
		if removed := w.nodes(func(n node) bool { return n.Exists && n.RemovedBy != "" }); len(removed) > 0 && w.rng.IntN(2) == 0 {
			return move{Kind: "unremove", Nodes: []string{pick(w, removed)}}, true
		}
		m, ok := w.nodeMove("remove", func(n node) bool { return n.Exists && n.RemovedBy == "" }, "")
		m.Pool = pick(w, removals)
		return m, ok
	}},
	// Remediation requests: dated now, a moment ahead (within the bound), far ahead, expired, not a
	// time; and a kubelet that forges its node's handled record an hour ahead.
	{"request", "request <node> now|ahead|future|old|junk", 4, func(w *world) (move, bool) {
		m, ok := w.nodeMove("request", exists, "")
		m.Pool = pick(w, []string{"now", "now", "now", "ahead", "future", "old", "junk"})
		return m, ok
	}},
	{"forge-handled", "forge-handled <node>", 1, func(w *world) (move, bool) {
		return w.nodeMove("forge-handled", func(n node) bool { return n.Exists && !n.HandledForged }, "")
	}},
	// conv-1's conversion webhook goes down (its kind unreadable: unknown is not free) and back.
	{"conversion", "conversion off|on", 3, func(w *world) (move, bool) {
		if w.cur.ConvDown {
			return move{Kind: "conversion", On: true}, true
		}
		return move{Kind: "conversion"}, w.oneIn(3)
	}},
	{"burst", "<move> + <move> + ...", 8, func(w *world) (move, bool) { return move{Kind: "burst", Count: 2 + w.rng.IntN(3)}, true }},
	{"mass-failure", "mass-failure False|Unknown <node>,<node>,...", 2, func(w *world) (move, bool) {
		healthy := w.nodes(isHealthy)
		if len(healthy) == 0 || w.crowded() {
			return move{}, false
		}
		w.rng.Shuffle(len(healthy), func(i, j int) { healthy[i], healthy[j] = healthy[j], healthy[i] })
		chosen := healthy[:min(len(healthy), 2+w.rng.IntN(3))]
		slices.Sort(chosen)
		return move{Kind: "mass-failure", Nodes: chosen, Status: unhealthyStatus(w)}, true
	}},
}

var (
	removals   = []string{"autoscaler", "autoscaler-old", "karpenter", "deletion"}
	clockSteps = []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, 30 * time.Second, 45 * time.Second, time.Minute, 90 * time.Second}
	faultRates = []float64{0.05, 0.1, 0.2}
)

func exists(n node) bool      { return n.Exists }
func isHealthy(n node) bool   { return n.Exists && n.Ready == corev1.ConditionTrue }
func isUnhealthy(n node) bool { return n.Exists && n.Ready != corev1.ConditionTrue }
func isWorker(n node) bool    { return n.Exists && !n.ControlPlane }

func pick[T any](w *world, from []T) T { return from[w.rng.IntN(len(from))] }

// oneIn is true one time in n: the moves that hold remediations back (pause, dry-run, skew beyond
// the bound, the exclusion label) are made less often than their reverse, so that a long history
// spends most of its time with remediations possible, not with every hold on at once.
func (w *world) oneIn(n int) bool { return w.rng.IntN(n) == 0 }

// undoing is how much more often a kind of move is drawn while it has something to undo: a hold
// (a pause, dry-run, the skew beyond the bound, a maintenance, API faults, a poisoned node) lasts a
// few steps, not the rest of a short run.
func (w *world) undoing(kind string) int {
	switch {
	case kind == "skew" && w.cur.skewed():
		return 6
	case kind == "conversion" && w.cur.ConvDown:
		return 4
	case kind == "pause" && len(w.nhcs((*nhc).paused)) > 0,
		kind == "dry-run" && len(w.nhcs(func(h *nhc) bool { return h.Spec.DryRun })) > 0:
		return 4
	case kind == "maintain" && len(w.nodes(func(n node) bool { return n.Maintained })) > 0,
		kind == "remove" && len(w.nodes(func(n node) bool { return n.Exists && n.RemovedBy != "" })) > 0,
		kind == "faults" && w.faultRate > 0, kind == "poison" && w.cur.Poisoned != "":
		return 2
	}
	return 1
}

// crowded reports whether so many nodes are unhealthy that no more fail: a long history keeps
// around the NodeHealthChecks' thresholds instead of drifting to every node down.
func (w *world) crowded() bool { return len(w.nodes(isUnhealthy)) >= 5 }

// unhealthyFor matches nodes whose Ready condition has not been True for at least d.
func (w *world) unhealthyFor(d time.Duration) func(node) bool {
	return func(n node) bool { return isUnhealthy(n) && !w.cur.Now.Before(n.Since.Add(d)) }
}

// nodes returns the names of the model's nodes that match, sorted.
func (w *world) nodes(match func(node) bool) []string {
	var out []string
	for _, name := range w.cur.nodeNames() {
		if match(w.cur.Nodes[name]) {
			out = append(out, name)
		}
	}
	return out
}

// nhcs returns the names of the model's NodeHealthChecks that match, sorted.
func (w *world) nhcs(match func(*nhc) bool) []string {
	var out []string
	for _, name := range w.cur.nhcNames() {
		if match(w.cur.NHCs[name]) {
			out = append(out, name)
		}
	}
	return out
}

// nodeMove is a move about a random node that matches; false when none does.
func (w *world) nodeMove(kind string, match func(node) bool, status corev1.ConditionStatus) (move, bool) {
	names := w.nodes(match)
	if len(names) == 0 {
		return move{}, false
	}
	return move{Kind: kind, Nodes: []string{pick(w, names)}, Status: status}, true
}

func unhealthyStatus(w *world) corev1.ConditionStatus {
	return pick(w, []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionUnknown})
}

// randomMove chooses the next move by weight among the kinds the model allows; within a burst
// (inBurst), never another burst.
func (w *world) randomMove(inBurst bool) move {
	weight := func(kind string) int {
		for _, k := range kinds {
			if k.kind == kind && !slices.Contains(w.skip, kind) && (!inBurst || (kind != "burst" && kind != "replace")) {
				return k.weight * w.undoing(kind)
			}
		}
		return 0
	}
	for {
		total := 0
		for _, k := range kinds {
			total += weight(k.kind)
		}
		r := w.rng.IntN(total)
		for _, k := range kinds {
			if r < weight(k.kind) {
				if m, ok := k.choose(w); ok {
					m.Chosen = k.kind
					return m
				}
				break
			}
			r -= weight(k.kind)
		}
	}
}

// String is the move in script syntax.
func (m move) String() string {
	switch m.Kind {
	case "fail":
		return fmt.Sprintf("fail %s %s", m.Nodes[0], m.Status)
	case "slow":
		return fmt.Sprintf("slow %s %s %s", m.Nodes[0], m.Status, m.D)
	case "remove", "request":
		return fmt.Sprintf("%s %s %s", m.Kind, m.Nodes[0], m.Pool)
	case "recreate":
		if m.Status != "" {
			return fmt.Sprintf("recreate %s %s", m.Nodes[0], m.Status)
		}
	case "mass-failure":
		return fmt.Sprintf("mass-failure %s %s", m.Status, strings.Join(m.Nodes, ","))
	case "clock":
		return "clock " + m.D.String()
	case "pool":
		pool := m.Pool
		if pool == "" {
			pool = "none"
		}
		return fmt.Sprintf("pool %s %s", m.Nodes[0], pool)
	case "template":
		return fmt.Sprintf("template %s %d", m.NHC, m.Config)
	case "pause", "resume":
		return m.Kind + " " + m.NHC
	case "forge":
		return fmt.Sprintf("forge %s %s", m.NHC, m.Nodes[0])
	case "relink":
		return fmt.Sprintf("relink %s %s", m.Nodes[0], cmp.Or(m.Machine, "none"))
	case "faults":
		if m.Rate == 0 {
			return "faults off"
		}
		return fmt.Sprintf("faults %g", m.Rate)
	case "unpoison", "restart", "leader-change", "drop-watches", "apiserver-restart", "kill":
		return m.Kind
	case "conversion":
		if m.On {
			return "conversion on"
		}
		return "conversion off"
	case "dry-run":
		if m.On {
			return "dry-run " + m.NHC + " on"
		}
		return "dry-run " + m.NHC + " off"
	case "skew":
		return "skew " + m.D.String()
	case "in-flight":
		if m.Count == 0 {
			return "in-flight " + m.NHC + " off"
		}
		return fmt.Sprintf("in-flight %s %d", m.NHC, m.Count)
	case "domain":
		if m.Count == 0 {
			return "domain " + m.NHC + " off"
		}
		return fmt.Sprintf("domain %s %d", m.NHC, m.Count)
	}
	return m.Kind + " " + strings.Join(m.Nodes, ",")
}

// stepString is a step in script syntax.
func stepString(moves []move) string {
	var out []string
	for _, m := range moves {
		out = append(out, m.String())
	}
	return strings.Join(out, " + ")
}

// parseScript reads steps separated by ";" or newlines; a step of several moves joined by "+" is a
// burst.
func parseScript(script string) ([][]move, error) {
	var out [][]move
	for _, line := range strings.FieldsFunc(script, func(r rune) bool { return r == ';' || r == '\n' }) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var step []move
		for part := range strings.SplitSeq(line, "+") {
			f := strings.Fields(part)
			if len(f) == 0 {
				return nil, fmt.Errorf("%q: an empty move", strings.TrimSpace(line))
			}
			m, err := parseMove(f)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", strings.TrimSpace(part), err)
			}
			step = append(step, m)
		}
		out = append(out, step)
	}
	return out, nil
}

func parseMove(f []string) (move, error) {
	m := move{Kind: f[0]}
	args := f[1:]
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("want %d argument(s)", n)
		}
		return nil
	}
	var err error
	switch m.Kind {
	case "fail":
		if err = want(2); err == nil {
			m.Nodes, m.Status = []string{args[0]}, corev1.ConditionStatus(args[1])
		}
	case "slow":
		if err = want(3); err == nil {
			m.Nodes, m.Status = []string{args[0]}, corev1.ConditionStatus(args[1])
			m.D, err = time.ParseDuration(args[2])
		}
	case "mass-failure":
		if err = want(2); err == nil {
			m.Status, m.Nodes = corev1.ConditionStatus(args[0]), strings.Split(args[1], ",")
		}
	case "remove":
		if err = want(2); err == nil {
			m.Nodes, m.Pool = []string{args[0]}, args[1]
			if !slices.Contains(removals, m.Pool) {
				err = fmt.Errorf("want one of %v", removals)
			}
		}
	case "request":
		if err = want(2); err == nil {
			m.Nodes, m.Pool = []string{args[0]}, args[1]
			if _, dated := requestTimes[m.Pool]; !dated && m.Pool != "junk" {
				err = fmt.Errorf("want now, ahead, future, old or junk")
			}
		}
	case "recreate":
		if len(args) == 2 {
			m.Nodes, m.Status = []string{args[0]}, corev1.ConditionStatus(args[1])
		} else if err = want(1); err == nil {
			m.Nodes = []string{args[0]}
		}
	case "recover", "fix", "flap", "cr-fails", "exclude", "include", "poison", "delete", "reset-budget", "maintain", "unmaintain", "unremove", "forge-handled":
		if err = want(1); err == nil {
			m.Nodes = []string{args[0]}
		}
	case "clock":
		if err = want(1); err == nil {
			m.D, err = time.ParseDuration(args[0])
		}
	case "pool":
		if err = want(2); err == nil {
			m.Nodes, m.Pool = []string{args[0]}, strings.TrimPrefix(args[1], "none")
		}
	case "template":
		if err = want(2); err == nil {
			m.NHC = args[0]
			if m.Config, err = strconv.Atoi(args[1]); err == nil && (m.Config < 0 || m.Config >= len(templateConfigs)) {
				err = fmt.Errorf("config %d: there are %d", m.Config, len(templateConfigs))
			}
		}
	case "pause", "resume":
		if err = want(1); err == nil {
			m.NHC = args[0]
		}
	case "forge":
		if err = want(2); err == nil {
			m.NHC, m.Nodes = args[0], []string{args[1]}
		}
	case "relink":
		if err = want(2); err == nil {
			m.Nodes, m.Machine = []string{args[0]}, strings.TrimPrefix(args[1], "none")
		}
	case "faults":
		if err = want(1); err == nil && args[0] != "off" {
			m.Rate, err = strconv.ParseFloat(args[0], 64)
		}
	case "unpoison", "restart", "leader-change", "drop-watches", "apiserver-restart", "kill":
		err = want(0)
	case "in-flight", "domain":
		if err = want(2); err == nil && args[1] != "off" {
			m.NHC = args[0]
			if m.Count, err = strconv.Atoi(args[1]); err == nil && m.Count < 1 {
				err = fmt.Errorf("want at least 1, or off")
			}
		} else if err == nil {
			m.NHC = args[0]
		}
	case "dry-run":
		if err = want(2); err == nil {
			m.NHC, m.On = args[0], args[1] == "on"
			if args[1] != "on" && args[1] != "off" {
				err = fmt.Errorf("want on or off")
			}
		}
	case "skew":
		if err = want(1); err == nil {
			m.D, err = time.ParseDuration(args[0])
		}
	case "conversion":
		if err = want(1); err == nil {
			m.On = args[0] == "on"
			if args[0] != "on" && args[0] != "off" {
				err = fmt.Errorf("want on or off")
			}
		}
	default:
		err = fmt.Errorf("unknown move")
	}
	return m, err
}

// apply performs the move on the API and the model and says what happened.
func (w *world) apply(ctx context.Context, m move) (string, error) {
	for _, name := range m.Nodes {
		if _, ok := w.cur.Nodes[name]; !ok {
			return "", fmt.Errorf("no node %s in this world", name)
		}
	}
	if _, ok := w.cur.NHCs[m.NHC]; m.NHC != "" && !ok {
		return "", fmt.Errorf("no NodeHealthCheck %s in this world", m.NHC)
	}
	var name string
	if len(m.Nodes) > 0 {
		name = m.Nodes[0]
	}
	switch m.Kind {
	case "fail":
		return fmt.Sprintf("%s fails: Ready=%s", name, m.Status), w.setReady(ctx, name, m.Status)
	case "mass-failure":
		for _, n := range m.Nodes {
			if err := w.setReady(ctx, n, m.Status); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("mass failure: %s Ready=%s", strings.Join(m.Nodes, ", "), m.Status), nil
	case "slow":
		return fmt.Sprintf("%s fails: Ready=%s, written by a writer whose clock is %s behind: dated %s back", name, m.Status, m.D, m.D),
			w.writeReady(ctx, name, m.Status, w.cur.Now.Add(-m.D))
	case "conversion":
		if m.On {
			return w.conversionOn(ctx)
		}
		return w.conversionOff(ctx)
	case "request":
		return w.request(ctx, name, m.Pool)
	case "forge-handled":
		return w.forgeHandled(ctx, name)
	case "remove":
		return w.remove(ctx, name, m.Pool)
	case "unremove":
		return w.unremove(ctx, name)
	case "recover":
		return fmt.Sprintf("%s recovers by itself: Ready=True", name), w.setReady(ctx, name, corev1.ConditionTrue)
	case "fix":
		return w.remediatorFixes(ctx, name)
	case "flap":
		return w.flap(ctx, name)
	case "cr-fails":
		return w.failCR(ctx, name)
	case "clock":
		w.clock.Step(m.D)
		w.cur.Now = w.clock.Now()
		return fmt.Sprintf("fake clock +%s, poke", m.D), w.poke(ctx)
	case "pool":
		n := w.cur.Nodes[name]
		from := n.Pool
		n.Pool = m.Pool
		return fmt.Sprintf("%s moves from pool %q to pool %q", name, from, n.Pool), w.setLabels(ctx, n)
	case "exclude", "include":
		n := w.cur.Nodes[name]
		n.Excluded = m.Kind == "exclude"
		if n.Excluded {
			return fmt.Sprintf("%s labelled %s=true", name, excludeLabel), w.setLabels(ctx, n)
		}
		return fmt.Sprintf("%s: exclusion label removed", name), w.setLabels(ctx, n)
	case "template":
		return w.changeTemplates(ctx, m.NHC, m.Config)
	case "pause":
		w.cur.NHCs[m.NHC].Spec.PauseRequests = []string{"chaos driver"}
		return m.NHC + " paused: pauseRequests [chaos driver]", w.patchNHC(ctx, m.NHC, map[string]any{"spec": map[string]any{"pauseRequests": []string{"chaos driver"}}})
	case "resume":
		w.cur.NHCs[m.NHC].Spec.PauseRequests = nil
		return m.NHC + " resumes: pauseRequests cleared", w.patchNHC(ctx, m.NHC, map[string]any{"spec": map[string]any{"pauseRequests": nil}})
	case "forge":
		return w.forgeStatus(ctx, m.NHC, name)
	case "relink":
		n := w.cur.Nodes[name]
		n.Machine = m.Machine
		desc := fmt.Sprintf("%s's kubelet claims Machine %s", name, cmp.Or(m.Machine, "none"))
		if m.Machine == machineOf(name) {
			desc = fmt.Sprintf("%s claims its own Machine %s again", name, m.Machine)
		}
		return desc, w.setClaim(ctx, n)
	case "faults":
		w.faultRate = m.Rate
		w.faults.set(w.faultRate, w.cur.Poisoned)
		if m.Rate == 0 {
			return "API faults off", nil
		}
		return fmt.Sprintf("API faults on: %g%% of the managers' writes fail (500, 409 Conflict, or applied but answered 500), %g%% of direct reads fail",
			m.Rate*100, m.Rate*50), nil
	case "poison":
		w.cur.Poisoned = name
		w.faults.set(w.faultRate, name)
		return fmt.Sprintf("poisoned %s: every manager write concerning it (node, lease, CRs) fails", name), nil
	case "unpoison":
		// Poke, so the controllers retry now rather than after their error backoff (up to 1000s).
		was := w.cur.Poisoned
		w.cur.Poisoned = ""
		w.faults.set(w.faultRate, "")
		return fmt.Sprintf("writes concerning %s work again, poke", was), w.poke(ctx)
	case "restart":
		return w.restartManager()
	case "leader-change":
		return w.changeLeader()
	case "delete":
		desc := fmt.Sprintf("node %s deleted (%s)", name, w.cur.Nodes[name])
		return desc, w.deleteNode(ctx, name)
	case "reset-budget":
		return w.resetBudget(ctx, name)
	case "domain":
		if m.Count == 0 {
			w.cur.NHCs[m.NHC].Spec.FailureDomain = nil
			return m.NHC + ": no spec.failureDomain", w.patchNHC(ctx, m.NHC, map[string]any{"spec": map[string]any{"failureDomain": nil}})
		}
		w.cur.NHCs[m.NHC].Spec.FailureDomain = &remediationv1alpha1.FailureDomain{TopologyKey: poolLabel, MaxUnhealthy: intstr.FromInt(m.Count)}
		return fmt.Sprintf("%s: spec.failureDomain={%s, %d}", m.NHC, poolLabel, m.Count),
			w.patchNHC(ctx, m.NHC, map[string]any{"spec": map[string]any{"failureDomain": map[string]any{"topologyKey": poolLabel, "maxUnhealthy": m.Count}}})
	case "in-flight":
		if m.Count == 0 {
			w.cur.NHCs[m.NHC].Spec.MaxInFlight = nil
			return m.NHC + ": no spec.maxInFlight", w.patchNHC(ctx, m.NHC, map[string]any{"spec": map[string]any{"maxInFlight": nil}})
		}
		limit := intstr.FromInt(m.Count)
		w.cur.NHCs[m.NHC].Spec.MaxInFlight = &limit
		return fmt.Sprintf("%s: spec.maxInFlight=%d", m.NHC, m.Count), w.patchNHC(ctx, m.NHC, map[string]any{"spec": map[string]any{"maxInFlight": m.Count}})
	case "dry-run":
		w.cur.NHCs[m.NHC].Spec.DryRun = m.On
		return fmt.Sprintf("%s: spec.dryRun=%v", m.NHC, m.On), w.patchNHC(ctx, m.NHC, map[string]any{"spec": map[string]any{"dryRun": m.On}})
	case "skew":
		return w.setSkew(m.D)
	case "maintain":
		return w.maintain(ctx, name)
	case "unmaintain":
		return w.unmaintain(ctx, name)
	case "drop-watches":
		// Held until the step's moves are done (releaseWatches): in a burst, the managers miss them.
		n := w.faults.dropWatches(true)
		w.watchesHeld, w.reportLists = true, true
		return fmt.Sprintf("%d watch streams of the managers cut; their informers list again once the step's moves are done", n), nil
	case "apiserver-restart":
		w.reportLists = true
		return w.restartAPIServer()
	case "kill":
		leader := w.managers.leader()
		if leader == nil {
			return "kill: no leader", nil
		}
		leader.proc.arm()
		return fmt.Sprintf("leader %s will be killed (SIGKILL) right after its next remediation CR create (in this step or a later one), before it writes anything else", leader.name), nil
	case "recreate":
		n := w.cur.Nodes[name]
		n.Ready, n.Excluded = cmp.Or(m.Status, corev1.ConditionTrue), false
		return fmt.Sprintf("node %s joins again, Ready=%s, pool %q", name, n.Ready, n.Pool), w.createNode(ctx, n)
	}
	return "", fmt.Errorf("unknown move %q", m.Kind)
}

// remediatorFixes plays the remediator: the node comes back after its CR appeared (the note says
// whether it had one; the node recovers either way, so the history does not depend on it).
func (w *world) remediatorFixes(ctx context.Context, name string) (string, error) {
	crs, err := w.crsOf(ctx, name)
	if err != nil {
		return "", err
	}
	note := "it had no CR: a reboot by someone else"
	if len(crs) > 0 {
		note = fmt.Sprintf("%s %s", crs[len(crs)-1].GetKind(), crs[len(crs)-1].GetName())
	}
	return fmt.Sprintf("remediator brings %s back: Ready=True (%s)", name, note), w.setReady(ctx, name, corev1.ConditionTrue)
}

// flap: a healthy node blips (Unknown, then True again within the step); an unhealthy one switches
// between False and Unknown (its condition's clock restarts).
func (w *world) flap(ctx context.Context, name string) (string, error) {
	switch w.cur.Nodes[name].Ready {
	case corev1.ConditionTrue:
		if err := w.setReady(ctx, name, corev1.ConditionUnknown); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s flaps: Ready=Unknown, then True", name), w.setReady(ctx, name, corev1.ConditionTrue)
	case corev1.ConditionFalse:
		return fmt.Sprintf("%s flaps: Ready False -> Unknown", name), w.setReady(ctx, name, corev1.ConditionUnknown)
	default:
		return fmt.Sprintf("%s flaps: Ready Unknown -> False", name), w.setReady(ctx, name, corev1.ConditionFalse)
	}
}

// failCR plays a remediator that gives up: the node's newest running CR reports Succeeded=False.
func (w *world) failCR(ctx context.Context, name string) (string, error) {
	crs, err := w.crsOf(ctx, name)
	if err != nil {
		return "", err
	}
	for i := len(crs) - 1; i >= 0; i-- {
		cr := &crs[i]
		if _, timedOut := cr.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]; timedOut || crCondition(cr, remediationv1alpha1.RemediationConditionSucceeded) != "" {
			continue
		}
		cond := map[string]any{"type": remediationv1alpha1.RemediationConditionSucceeded, "status": "False", "reason": "ChaosFailed",
			"message": "the chaos driver's remediator gave up", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}
		if err := unstructured.SetNestedSlice(cr.Object, []any{cond}, "status", "conditions"); err != nil {
			return "", err
		}
		if err := w.k8s.Status().Update(ctx, cr); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return fmt.Sprintf("remediator of %s would report Succeeded=False on %s %s, which changed meanwhile (%v)", name, cr.GetKind(), cr.GetName(), err), nil
			}
			return "", err
		}
		w.wrote(cr, false)
		return fmt.Sprintf("remediator gives up on %s: %s %s reports Succeeded=False", name, cr.GetKind(), cr.GetName()), nil
	}
	return fmt.Sprintf("remediator of %s would give up, but no CR runs for it", name), nil
}

// changeTemplates gives a NodeHealthCheck other templates, whatever it is remediating; only the
// CRD's CEL rules judge it (no webhook here), and a refusal is part of the history.
func (w *world) changeTemplates(ctx context.Context, name string, config int) (string, error) {
	h := w.cur.NHCs[name]
	c := templateConfigs[config]
	spec := h.Spec.DeepCopy()
	c.apply(spec)
	patch := map[string]any{"spec": map[string]any{"remediationTemplate": spec.RemediationTemplate, "escalatingRemediations": spec.EscalatingRemediations}}
	desc := fmt.Sprintf("%s templates: %s -> %s", name, templateConfigs[h.Config].Name, c.Name)
	if err := w.patchNHC(ctx, name, patch); err != nil {
		if apierrors.IsInvalid(err) {
			return desc + ": refused by the API server: " + firstLine(err.Error()), nil
		}
		return "", err
	}
	h.Spec, h.Config = *spec, config
	return desc, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// forgeStatus writes an entry without remediations (unhealthy, maybe held back) into a NodeHealthCheck's status
// for a node, as a stray status writer could: status is a report, not a command, so it must never
// start a remediation the model does not warrant.
func (w *world) forgeStatus(ctx context.Context, name, nodeName string) (string, error) {
	desc := fmt.Sprintf("forged status: %s lists %s as unhealthy (%s)", name, nodeName, w.cur.Nodes[nodeName])
	for range 5 {
		h := &remediationv1alpha1.NodeHealthCheck{}
		if err := w.k8s.Get(ctx, client.ObjectKey{Name: name}, h); err != nil {
			return "", err
		}
		if slices.ContainsFunc(h.Status.UnhealthyNodes, func(e remediationv1alpha1.UnhealthyNode) bool { return e.Name == nodeName }) {
			return desc + ": already listed, nothing forged", nil
		}
		h.Status.UnhealthyNodes = append(h.Status.UnhealthyNodes, remediationv1alpha1.UnhealthyNode{Name: nodeName})
		err := w.k8s.Status().Update(ctx, h)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		w.wrote(h, false)
		return desc, nil
	}
	return desc + ": gave up after 5 conflicts", nil
}

// restartManager stops the leader and starts a new manager (a crash and a restart of the pod).
func (w *world) restartManager() (string, error) {
	leader := w.managers.leader()
	if leader == nil {
		return "restart: no leader to stop", nil
	}
	if err := w.managers.stop(leader); err != nil {
		return "", err
	}
	if len(w.managers.list) == 0 {
		// Nothing runs: whatever the shared workqueue gauges still hold was left by the stopped one.
		w.depthBaseline = gauges("workqueue_depth")
	}
	m, err := w.managers.start()
	if err != nil {
		return "", err
	}
	w.leaderChanged()
	return fmt.Sprintf("manager %s stopped, %s started", leader.name, m.name), nil
}

// changeLeader makes sure a standby runs, then stops the leader: the standby takes over.
func (w *world) changeLeader() (string, error) {
	leader := w.managers.leader()
	if leader == nil {
		return "leader change: no leader", nil
	}
	standby := w.managers.standby()
	if standby == nil {
		var err error
		if standby, err = w.managers.start(); err != nil {
			return "", err
		}
		if !standby.mgr.GetCache().WaitForCacheSync(context.Background()) {
			return "", fmt.Errorf("the cache of standby %s did not sync", standby.name)
		}
	}
	if err := w.managers.stop(leader); err != nil {
		return "", err
	}
	w.leaderChanged()
	return fmt.Sprintf("leader %s stopped, standby %s takes over", leader.name, standby.name), nil
}

// resetBudget plays an administrator who repaired the node: the NodeHealthChecks' repair-budget-reset
// annotation gets an entry for it at now (the API server's clock: the host's), so its earlier
// remediations no longer count. (The node's own annotation is not trusted: its kubelet may write it.)
func (w *world) resetBudget(ctx context.Context, name string) (string, error) {
	at := time.Now().UTC().Truncate(time.Second)
	n := w.cur.Nodes[name]
	n.ResetAt = at
	w.cur.Nodes[name] = n
	var entries []string
	for _, node := range slices.Sorted(maps.Keys(w.cur.Nodes)) {
		if r := w.cur.Nodes[node].ResetAt; !r.IsZero() {
			entries = append(entries, node+"="+r.Format(time.RFC3339))
		}
	}
	value := strings.Join(entries, ",")
	for _, h := range w.cur.nhcNames() {
		if err := w.patchNHC(ctx, h, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			remediationv1alpha1.RepairBudgetResetAnnotation: value}}}); err != nil {
			return "", fmt.Errorf("resetting %s's budget on %s: %w", name, h, err)
		}
	}
	return fmt.Sprintf("NodeHealthChecks annotated %s=%s=%s", remediationv1alpha1.RepairBudgetResetAnnotation, name, at.Format(time.RFC3339)), nil
}

// setSkew shifts the clock of the managers' skew monitors by d from the API server's and waits
// (at most skewWait) until every running manager has measured it.
func (w *world) setSkew(d time.Duration) (string, error) {
	w.managers.skew.Store(int64(d))
	w.cur.Skew = d
	verdict := "within"
	if w.cur.skewed() {
		verdict = "beyond"
	}
	desc := fmt.Sprintf("the managers' clocks are %s off the API server's (skew monitors), %s the bound of %s", d, verdict, maxClockSkew)
	deadline := time.Now().Add(skewWait)
	for !w.managers.skewAgrees() {
		if time.Now().After(deadline) {
			return desc + fmt.Sprintf("; not measured by every manager within %s", skewWait), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return desc, nil
}

// skewWait bounds the wait for the managers to measure a new skew: the leader renews its lease
// (and a standby polls it) every retryPeriod, and every response is measured.
const skewWait = 10 * time.Second

// maintenanceHolder is the maintenance operator's holder identity, and maintenanceLease how long
// it takes a node's lease for (fake time, never renewed).
const (
	maintenanceHolder = "node-maintenance"
	maintenanceLease  = 3 * time.Minute
)

// maintain plays a maintenance operator (medik8s' node-maintenance-operator) that asks for the
// node's lease: it takes it when nobody holds it, or the holder's lease expired (fake time, the
// clock the managers read); a NodeHealthCheck's lease that runs makes it wait. The model records
// what it got.
func (w *world) maintain(ctx context.Context, name string) (string, error) {
	n := w.cur.Nodes[name]
	n.Maintained, n.LeasedUntil = true, time.Time{}
	defer func() { w.cur.Nodes[name] = n }()
	now := metav1.NewMicroTime(w.cur.Now)
	spec := coordinationv1.LeaseSpec{HolderIdentity: new(maintenanceHolder), LeaseDurationSeconds: new(int32(maintenanceLease / time.Second)),
		AcquireTime: &now, RenewTime: &now}
	for range 5 {
		l := &coordinationv1.Lease{}
		err := w.k8s.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: "node-" + name}, l)
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: "node-" + name}, Spec: spec}
			err = w.k8s.Create(ctx, l)
		case err != nil:
			return "", err
		default:
			holder := ""
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			if holder != "" && holder != maintenanceHolder && l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
				if expires := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second); w.cur.Now.Before(expires) {
					return fmt.Sprintf("maintenance asks for node %s: its lease is held by %s until %s, maintenance waits", name, holder, expires.Format(time.TimeOnly)), nil
				}
			}
			l.Spec = spec
			err = w.k8s.Update(ctx, l)
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		n.LeasedUntil = w.cur.Now.Add(maintenanceLease)
		return fmt.Sprintf("maintenance takes node %s's lease until %s", name, n.LeasedUntil.Format(time.TimeOnly)), nil
	}
	return fmt.Sprintf("maintenance asks for node %s: gave up after 5 conflicts", name), nil
}

// unmaintain ends the maintenance: the operator deletes the node's lease if it still holds it.
func (w *world) unmaintain(ctx context.Context, name string) (string, error) {
	n := w.cur.Nodes[name]
	n.Maintained, n.LeasedUntil = false, time.Time{}
	w.cur.Nodes[name] = n
	l := &coordinationv1.Lease{}
	err := w.k8s.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: "node-" + name}, l)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("maintenance of node %s ends; it held no lease", name), nil
	}
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != maintenanceHolder {
		return fmt.Sprintf("maintenance of node %s ends; its lease is %v's now", name, ptrString(l.Spec.HolderIdentity)), nil
	}
	err = w.k8s.Delete(ctx, l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return fmt.Sprintf("maintenance of node %s ends; its lease changed meanwhile (%v)", name, err), nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("maintenance of node %s ends: its lease is deleted", name), nil
}

func ptrString(s *string) string {
	if s == nil {
		return "nobody"
	}
	return *s
}

// apiServerDown is how long the API server stays down in a restart, after it stopped.
const apiServerDown = time.Second

// restartAPIServer stops the API server (SIGTERM: it finishes the requests in flight and ends the
// watches), keeps it down for apiServerDown and starts it again on the same port, certificates and
// etcd, as test/localcluster's RestartAPIServer does for the e2e suite.
func (w *world) restartAPIServer() (string, error) {
	api := w.env.ControlPlane.APIServer
	w.faults.awaitWatches()
	began := time.Now()
	stopErr := api.Stop() // on a timeout the process was killed: start it anyway
	time.Sleep(apiServerDown)
	if err := api.Start(); err != nil {
		return "", errors.Join(stopErr, fmt.Errorf("starting the API server again: %w", err))
	}
	if stopErr != nil {
		return "", fmt.Errorf("stopping the API server: %w", stopErr)
	}
	return fmt.Sprintf("API server restarted: unavailable for %s", time.Since(began).Round(100*time.Millisecond)), nil
}

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	Config int
	Rate   float64
}

// Move kinds, their script syntax, and how often a random run picks them (weights). A kind whose
// precondition the model does not meet is not picked.
type moveKind struct {
	kind, syntax string
	weight       int
	choose       func(w *world) (move, bool)
}

var kinds = []moveKind{
	{"fail", "fail <node> False|Unknown", 14, func(w *world) (move, bool) {
		return w.nodeMove("fail", isHealthy, unhealthyStatus(w))
	}},
	{"recover", "recover <node>", 4, func(w *world) (move, bool) { return w.nodeMove("recover", isUnhealthy, "") }},
	// The remediator acts on nodes that have been unhealthy for 30s, which likely have a CR.
	{"fix", "fix <node>", 8, func(w *world) (move, bool) { return w.nodeMove("fix", w.unhealthyFor(30*time.Second), "") }},
	{"flap", "flap <node>", 5, func(w *world) (move, bool) { return w.nodeMove("flap", exists, "") }},
	{"cr-fails", "cr-fails <node>", 5, func(w *world) (move, bool) {
		return w.nodeMove("cr-fails", w.unhealthyFor(30*time.Second), "")
	}},
	{"clock", "clock <duration>", 22, func(w *world) (move, bool) { return move{Kind: "clock", D: pick(w, clockSteps)}, true }},
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
		}
		return m, ok
	}},
	{"template", "template <nhc> <config>", 4, func(w *world) (move, bool) {
		h := w.cur.NHCs[pick(w, w.cur.nhcNames())]
		return move{Kind: "template", NHC: h.Name, Config: pick(w, slices.DeleteFunc([]int{0, 1, 2, 3, 4, 5, 6, 7}, func(i int) bool { return i == h.Config }))}, true
	}},
	{"pause", "pause <nhc> | resume <nhc>", 4, func(w *world) (move, bool) {
		h := w.cur.NHCs[pick(w, w.cur.nhcNames())]
		if h.paused() {
			return move{Kind: "resume", NHC: h.Name}, true
		}
		return move{Kind: "pause", NHC: h.Name}, true
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
	{"recreate", "recreate <node>", 3, func(w *world) (move, bool) {
		return w.nodeMove("recreate", func(n node) bool { return !n.Exists }, "")
	}},
	{"mass-failure", "mass-failure False|Unknown <node>,<node>,...", 2, func(w *world) (move, bool) {
		healthy := w.nodes(isHealthy)
		if len(healthy) == 0 {
			return move{}, false
		}
		w.rng.Shuffle(len(healthy), func(i, j int) { healthy[i], healthy[j] = healthy[j], healthy[i] })
		chosen := healthy[:min(len(healthy), 2+w.rng.IntN(3))]
		slices.Sort(chosen)
		return move{Kind: "mass-failure", Nodes: chosen, Status: unhealthyStatus(w)}, true
	}},
}

var (
	clockSteps = []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, 30 * time.Second, 45 * time.Second, time.Minute, 90 * time.Second}
	faultRates = []float64{0.05, 0.1, 0.2}
)

func exists(n node) bool      { return n.Exists }
func isHealthy(n node) bool   { return n.Exists && n.Ready == corev1.ConditionTrue }
func isUnhealthy(n node) bool { return n.Exists && n.Ready != corev1.ConditionTrue }
func isWorker(n node) bool    { return n.Exists && !n.ControlPlane }

func pick[T any](w *world, from []T) T { return from[w.rng.IntN(len(from))] }

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

// randomMove chooses the next move by weight among the kinds the model allows.
func (w *world) randomMove() move {
	weight := func(kind string) int {
		for _, k := range kinds {
			if k.kind == kind && !slices.Contains(w.skip, kind) {
				return k.weight
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
	case "faults":
		if m.Rate == 0 {
			return "faults off"
		}
		return fmt.Sprintf("faults %g", m.Rate)
	case "unpoison", "restart", "leader-change":
		return m.Kind
	}
	return m.Kind + " " + strings.Join(m.Nodes, ",")
}

// parseScript reads moves separated by ";" or newlines.
func parseScript(script string) ([]move, error) {
	var out []move
	for _, line := range strings.FieldsFunc(script, func(r rune) bool { return r == ';' || r == '\n' }) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m, err := parseMove(f)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", strings.TrimSpace(line), err)
		}
		out = append(out, m)
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
	case "mass-failure":
		if err = want(2); err == nil {
			m.Status, m.Nodes = corev1.ConditionStatus(args[0]), strings.Split(args[1], ",")
		}
	case "recover", "fix", "flap", "cr-fails", "exclude", "include", "poison", "delete", "recreate":
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
	case "faults":
		if err = want(1); err == nil && args[0] != "off" {
			m.Rate, err = strconv.ParseFloat(args[0], 64)
		}
	case "unpoison", "restart", "leader-change":
		err = want(0)
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
	case "recreate":
		n := w.cur.Nodes[name]
		n.Ready, n.Excluded = corev1.ConditionTrue, false
		return fmt.Sprintf("node %s joins again, healthy, pool %q", name, n.Pool), w.createNode(ctx, n)
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

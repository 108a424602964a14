package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// Settings, from the environment (make chaos passes them):
//
//	CHAOS_SEED      the seed; "random" picks one from the time; unset: defaultSeed
//	CHAOS_STEPS     how many steps; unset: defaultSteps (the short run of `go test ./...`)
//	CHAOS_SCRIPT    moves to play instead of random ones, separated by ";" (see kinds in actions_test.go),
//	                for example a failing history printed by a run, cut down by hand
//	CHAOS_SKIP      kinds of moves a random run does not make, separated by commas (for example
//	                "forge,template" to look past known holes); part of the history like the seed
//	CHAOS_CONTINUE  "1": keep going after a step that broke an invariant, and report all at the end
//	CHAOS_LOG       a file for the managers' logs (otherwise they are discarded)
//
// The short run's seed: its first 60 steps make every kind of move (see kinds in actions_test.go).
const (
	defaultSeed  = 2159
	defaultSteps = 60
)

func settings(t *testing.T) (seed uint64, steps int, script []move, skip []string, keepGoing bool) {
	seed, steps = defaultSeed, defaultSteps
	switch s := os.Getenv("CHAOS_SEED"); s {
	case "":
	case "random":
		seed = uint64(time.Now().UnixNano() % 1_000_000)
	default:
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
	}
	if s := os.Getenv("CHAOS_STEPS"); s != "" {
		var err error
		if steps, err = strconv.Atoi(s); err != nil || steps < 1 {
			t.Fatalf("CHAOS_STEPS=%q: want a positive number", s)
		}
	}
	if s := os.Getenv("CHAOS_SCRIPT"); s != "" {
		var err error
		if script, err = parseScript(s); err != nil {
			t.Fatalf("CHAOS_SCRIPT: %v", err)
		}
		steps = len(script)
	}
	if s := os.Getenv("CHAOS_SKIP"); s != "" {
		skip = strings.Split(s, ",")
		for _, kind := range skip {
			if !slices.ContainsFunc(kinds[:], func(k moveKind) bool { return k.kind == kind }) {
				t.Fatalf("CHAOS_SKIP: no kind of move %q", kind)
			}
		}
	}
	return seed, steps, script, skip, os.Getenv("CHAOS_CONTINUE") == "1"
}

// TestChaos runs the operator's controllers through a random history and checks the invariants
// (invariants_test.go) after every step.
func TestChaos(t *testing.T) {
	seed, steps, script, skip, keepGoing := settings(t)
	var history []string
	replay := func(step int) string {
		if script != nil {
			return fmt.Sprintf("make chaos CHAOS_SEED=%d CHAOS_SCRIPT='%s'", seed, strings.Join(history[:step], "; "))
		}
		if skip != nil {
			return fmt.Sprintf("make chaos CHAOS_SEED=%d CHAOS_STEPS=%d CHAOS_SKIP=%s", seed, step, strings.Join(skip, ","))
		}
		return fmt.Sprintf("make chaos CHAOS_SEED=%d CHAOS_STEPS=%d", seed, step)
	}
	if script != nil {
		t.Logf("chaos: seed %d (API faults only), a script of %d steps", seed, steps)
	} else {
		t.Logf("chaos: seed %d, %d steps (replay: %s)", seed, steps, replay(steps))
	}
	if err := testutil.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	setLogger(t)

	ctx, cancel := context.WithCancel(context.Background())
	env := testutil.NewEnvironment(nil, false)
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	// Stop in order: the managers, the recorder's informers (ctx), the control plane.
	defer func() {
		cancel()
		if err := env.Stop(); err != nil {
			t.Log(err)
		}
	}()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, remediationv1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	// API timestamps have second precision, and so does the fake clock.
	clock := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	w := &world{
		t: t, k8s: k8s, clock: clock, start: clock.Now(),
		rng:     rand.New(rand.NewPCG(seed, 0xc4a05)),
		cur:     initialState(clock.Now()),
		skip:    skip,
		faults:  newFaults(seed),
		nhcUIDs: map[string]types.UID{},
	}
	w.managers = &managers{cfg: cfg, scheme: scheme, clock: clock, faults: w.faults}
	defer w.managers.stopAll()
	if err := w.build(ctx); err != nil {
		t.Fatal(err)
	}
	if w.rec, err = startRecorder(ctx, cfg, scheme); err != nil {
		t.Fatal(err)
	}
	if _, err := w.managers.start(); err != nil {
		t.Fatal(err)
	}
	if settled, why := w.settle(ctx); !settled {
		t.Fatalf("the world did not settle at the start: %s", why)
	}
	snap, err := w.snapshot(ctx, true, false)
	if err != nil {
		t.Fatal(err)
	}
	w.checker = newChecker(w.cur, snap.RV)

	var broken []violation
	began := time.Now()
	for s := 1; s <= steps; s++ {
		w.cur = w.cur.clone()
		w.cur.Step = s
		var m move
		if script != nil {
			m = script[s-1]
		} else {
			m = w.randomMove()
		}
		history = append(history, m.String())
		desc, err := w.apply(ctx, m)
		if err != nil {
			t.Fatalf("seed %d, step %d (%s): the driver failed: %v\nreplay: %s", seed, s, m, err, replay(s))
		}
		w.logf("step %d [%s, %s] %s: %s", s, w.fakeElapsed(), time.Now().Format("15:04:05.000"), m, desc)
		settleStart := time.Now()
		settled, why := w.settle(ctx)
		took := time.Since(settleStart)
		w.settleTotal += took
		w.settleLongest = max(w.settleLongest, took)
		if !settled {
			w.unsettled++
			w.logf("    did not settle: %s (only the safety invariants are checked)", why)
		}
		counts := w.faults.takeCounts()
		faulty := false
		for how := range counts {
			faulty = faulty || how != failPoisoned
		}
		if len(counts) > 0 {
			w.logf("    faults injected: %v", counts)
		}
		snap, err := w.snapshot(ctx, settled, faulty)
		if err != nil {
			t.Fatalf("seed %d, step %d: reading the API: %v", seed, s, err)
		}
		vs := w.checker.check(w.cur, snap)
		if len(vs) == 0 {
			continue
		}
		for _, v := range vs {
			w.logf("    VIOLATION %s", v)
		}
		w.logf("    state of the world after step %d:\n%s", s, w.describe(ctx))
		broken = append(broken, vs...)
		if !keepGoing {
			break
		}
	}
	st := w.checker.stats
	w.logf("chaos: %d steps in %s (settling: mean %s, longest %s, %d unsettled); %d CRs created, %d of them starting a remediation; owed remediations seen at %d node-checks, at most %d in a row",
		w.cur.Step, time.Since(began).Round(time.Millisecond), (w.settleTotal / time.Duration(max(w.cur.Step, 1))).Round(time.Millisecond),
		w.settleLongest.Round(time.Millisecond), w.unsettled, st.newCRs, st.firstCRs, st.owed, st.longestOwed)
	w.logf("chaos: the history as a script: CHAOS_SCRIPT='%s'", strings.Join(history, "; "))
	if len(broken) > 0 {
		var lines []string
		for _, v := range broken {
			lines = append(lines, v.String())
		}
		t.Fatalf("seed %d: %d invariant violation(s); the first at step %d (replay: %s):\n%s",
			seed, len(broken), broken[0].Step, replay(broken[0].Step), strings.Join(lines, "\n"))
	}
}

// build creates the world: templates, nodes, NodeHealthChecks and the recorder's markers.
func (w *world) build(ctx context.Context) error {
	if err := w.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: markerNS}}); err != nil {
		return err
	}
	for _, k := range crKinds {
		m := &unstructured.Unstructured{}
		m.SetAPIVersion(k[0])
		m.SetKind(k[1])
		m.SetNamespace(markerNS)
		m.SetName("marker")
		if err := w.k8s.Create(ctx, m); err != nil {
			return err
		}
	}
	for _, t := range templateObjects() {
		if err := w.k8s.Create(ctx, t); err != nil {
			return err
		}
	}
	for _, name := range w.cur.nodeNames() {
		if err := w.createNode(ctx, w.cur.Nodes[name]); err != nil {
			return err
		}
	}
	for _, name := range w.cur.nhcNames() {
		h := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *w.cur.NHCs[name].Spec.DeepCopy()}
		if err := w.k8s.Create(ctx, h); err != nil {
			return fmt.Errorf("creating NodeHealthCheck %s: %w", name, err)
		}
		w.nhcUIDs[name] = h.UID
	}
	return nil
}

// setLogger sends the managers' logs (controller-runtime's and client-go's) to CHAOS_LOG, or
// nowhere: the history the test prints is the story.
func setLogger(t *testing.T) {
	log := logr.Discard()
	if path := os.Getenv("CHAOS_LOG"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		log = zap.New(zap.WriteTo(f), zap.UseDevMode(true))
		t.Logf("chaos: managers log to %s", path)
	}
	ctrl.SetLogger(log)
	klog.SetLogger(log)
}

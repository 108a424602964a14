package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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
//	CHAOS_SEED      the seed; "random" picks one from the time; unset: each of defaultSeeds, as subtests
//	CHAOS_STEPS     how many steps; unset: defaultSteps (the short run of `go test ./...`)
//	CHAOS_SCRIPT    steps to play instead of random ones, separated by ";" (see kinds in actions_test.go;
//	                a burst's moves joined by "+"), for example a failing history printed by a run, cut
//	                down by hand; its API faults come from CHAOS_SEED, or the first default seed
//	CHAOS_SKIP      kinds of moves a random run does not make, separated by commas (for example
//	                "forge,template" to look past known holes); part of the history like the seed
//	CHAOS_CONTINUE  "1": keep going after a step that broke an invariant, and report all at the end
//	CHAOS_KNOWN     invariants the operator is known to break (knownBroken), separated by commas:
//	                their violations are logged, not failed; unset: knownBroken; "none": every one fails
//	CHAOS_LOG       a file for the managers' logs (otherwise they are discarded)
//
// The short run's seeds: their first 45 steps make, together, every kind of move (see kinds in
// actions_test.go) but forge-handled, which the script hostile-nodes-broken-neighbours makes; among
// them a leader killed right after a CR create, watches dropped and an API server restarted within
// bursts, a conversion webhook down, a node replaced while the watches were cut, and CRs of a node
// that claims another node's Machine.
var defaultSeeds = []uint64{1, 2, 18}

// defaultScripts are the histories the short run plays besides its seeds, for what 45 random steps
// rarely reach; each says what it must exercise (a count of the checker's), so that it keeps doing
// so as the operator and the world change.
var defaultScripts = []struct {
	name, script string
	// exercised returns "" when the run did what the script is for, otherwise what it missed.
	exercised func(st checkerStats) string
}{
	{"repair-budget", "fail w01 False; clock 30s; fix w01; clock 5s; fail w01 False; clock 30s; fix w01; clock 5s; " +
		"fail w01 Unknown; clock 30s; clock 10s; reset-budget w01; clock 5s; fix w01; clock 5s", func(st checkerStats) string {
		if st.budgetHeld == 0 {
			return "no node due was held back by its repair budget"
		}
		return ""
	}},
	{"failure-domain", "domain workers 1; pool w01 a; pool w02 a; pool w03 a; clock 5s; fail w01 False; fail w02 False; clock 30s; clock 10s; clock 10s; fix w02; clock 5s; clock 10s; domain workers off; clock 5s", func(st checkerStats) string {
		if st.domainHeld == 0 {
			return "no node due was held back by its failure domain"
		}
		return ""
	}},
	// Issue 33, hostile nodes and broken neighbours, in one history (one control plane: each costs
	// some 15s to start and stop). First a remediation of a kind whose conversion webhook goes down,
	// across a leader change: the new leader cannot read the kind; pool-b, which selects the node
	// too, must not start once workers' lease expired, and the lease stays. Then, with the kind back,
	// the node fixed and workers' templates as they were: a failure a slow writer dated back
	// (remediated only 30s after it was written), a removal whose hold ended (the autoscaler began 40
	// minutes ago) and one that holds (Karpenter's), and a request that waits for a node really down
	// under maxInFlight, then starts (its node's kubelet forged the record of requests answered an
	// hour ahead, which must not answer it).
	{"hostile-nodes-broken-neighbours", "pause pool-b; template workers 8; fail w08 False; clock 30s; resume pool-b; clock 5s; conversion off; leader-change; " +
		"clock 5s; clock 12m; clock 5s; conversion on; clock 5s; fix w08; clock 5s; template workers 3; " +
		"clock 2m; slow w01 Unknown 45s; clock 5s; clock 30s; remove w02 autoscaler-old; remove w03 karpenter; " +
		"mass-failure False w02,w03; clock 30s; clock 5s; fix w01; fix w02; fix w03; clock 1m; forge-handled w05; in-flight workers 1; fail w04 False + request w05 ahead; " +
		"clock 30s; clock 5s; fix w04; clock 5s; clock 5s", func(st checkerStats) string {
		switch {
		case st.unknownHeld == 0:
			return "no CR of an unreadable kind was seen running with its lease while the leader could not read the kind"
		case st.backdatedHeld == 0:
			return "no failure dated back waited for its duration since it was written"
		case st.removalHeld == 0 || st.removalOver == 0:
			return fmt.Sprintf("a removal held a node due at %d node-checks, %d remediations started past the hold: want both", st.removalHeld, st.removalOver)
		case st.requestWaited == 0 || st.requestStarts == 0:
			return fmt.Sprintf("a request waited at %d node-checks, %d remediations started for requests: want both", st.requestWaited, st.requestStarts)
		}
		return ""
	}},
	{"max-in-flight", "in-flight workers 1; fail w01 False; clock 5s; fail w02 False; clock 30s; clock 10s; clock 10s; fix w01; clock 5s; clock 10s; in-flight workers off; clock 5s", func(st checkerStats) string {
		if st.inFlightHeld == 0 {
			return "no node due waited for spec.maxInFlight"
		}
		return ""
	}},
}

const defaultSteps = 45

// knownBroken are the invariants the operator is known to break, and how: a run logs their
// violations (KNOWN) and goes on, unless CHAOS_KNOWN says otherwise. Each is a bug to fix in the
// operator; its entry goes with the fix. None is known now (replaced-node-is-new, the last, was
// fixed in 5d256f3).
var knownBroken = map[string]string{}

// options are a run's settings.
type options struct {
	seeds     []uint64
	steps     int
	script    [][]move
	skip      []string
	keepGoing bool
	known     map[string]bool
}

func settings(t *testing.T) options {
	o := options{seeds: defaultSeeds, steps: defaultSteps}
	switch s := os.Getenv("CHAOS_SEED"); s {
	case "":
	case "random":
		o.seeds = []uint64{uint64(time.Now().UnixNano() % 1_000_000)}
	default:
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		o.seeds = []uint64{seed}
	}
	if s := os.Getenv("CHAOS_STEPS"); s != "" {
		var err error
		if o.steps, err = strconv.Atoi(s); err != nil || o.steps < 1 {
			t.Fatalf("CHAOS_STEPS=%q: want a positive number", s)
		}
	}
	if s := os.Getenv("CHAOS_SCRIPT"); s != "" {
		var err error
		if o.script, err = parseScript(s); err != nil {
			t.Fatalf("CHAOS_SCRIPT: %v", err)
		}
		o.steps = len(o.script)
		o.seeds = o.seeds[:1]
	}
	if s := os.Getenv("CHAOS_SKIP"); s != "" {
		o.skip = strings.Split(s, ",")
		for _, kind := range o.skip {
			if !slices.ContainsFunc(kinds[:], func(k moveKind) bool { return k.kind == kind }) {
				t.Fatalf("CHAOS_SKIP: no kind of move %q", kind)
			}
		}
	}
	o.keepGoing = os.Getenv("CHAOS_CONTINUE") == "1"
	o.known = map[string]bool{}
	switch s, set := os.LookupEnv("CHAOS_KNOWN"); {
	case !set:
		for inv := range knownBroken {
			o.known[inv] = true
		}
	case s != "none" && s != "":
		for _, inv := range strings.Split(s, ",") {
			o.known[inv] = true
		}
	}
	return o
}

// TestChaos runs the operator's controllers through random histories, one per seed, and checks the
// invariants (invariants_test.go) after every step.
func TestChaos(t *testing.T) {
	o := settings(t)
	if err := testutil.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	setLogger(t)
	if len(o.seeds) == 1 {
		runChaos(t, o.seeds[0], o)
		return
	}
	for _, seed := range o.seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChaos(t, seed, o) })
	}
	for _, sc := range defaultScripts {
		t.Run("script="+sc.name, func(t *testing.T) {
			so := o
			var err error
			if so.script, err = parseScript(sc.script); err != nil {
				t.Fatalf("script %s: %v", sc.name, err)
			}
			so.steps = len(so.script)
			if missed := sc.exercised(runChaos(t, o.seeds[0], so)); missed != "" && !t.Failed() {
				t.Fatalf("script %s no longer exercises what it is for: %s", sc.name, missed)
			}
		})
	}
}

// runChaos plays one history on a control plane of its own and returns the checker's counts.
func runChaos(t *testing.T, seed uint64, o options) checkerStats {
	steps, script, skip := o.steps, o.script, o.skip
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
	began := time.Now()

	ctx, cancel := context.WithCancel(context.Background())
	env := testutil.NewEnvironment(nil, false)
	// The API server's certificates and keys stay in a folder of the test, so that the API server
	// restarts (apiserver-restart) with the credentials every client has; on SIGTERM it ends open
	// watches within 2s instead of waiting for them.
	api := env.ControlPlane.GetAPIServer()
	api.CertDir = t.TempDir()
	api.Configure().Set("shutdown-watch-termination-grace-period", "2s")
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
	scheme := testutil.Scheme()
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := testutil.NewConversionWebhook()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conv.Close() }()

	// API timestamps have second precision, and so does the fake clock.
	clock := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	w := &world{
		t: t, k8s: k8s, clock: clock, start: clock.Now(), env: env,
		rng:        rand.New(rand.NewPCG(seed, 0xc4a05)),
		cur:        initialState(clock.Now()),
		skip:       skip,
		faults:     newFaults(seed),
		conv:       conv,
		nhcUIDs:    map[string]types.UID{},
		moveCounts: map[string]int{},
	}
	w.managers = &managers{cfg: cfg, scheme: scheme, clock: clock, faults: w.faults}
	defer w.managers.stopAll()
	if err := w.build(ctx); err != nil {
		t.Fatal(err)
	}
	if w.rec, err = startRecorder(ctx, cfg); err != nil {
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
	knownSeen := 0
	played := time.Now()
	for s := 1; s <= steps; s++ {
		w.cur = w.cur.clone()
		w.cur.Step = s
		desc, err := w.step(ctx, s, script)
		if err != nil {
			t.Fatalf("seed %d, step %d (%s): the driver failed: %v\nreplay: %s", seed, s, desc, err, replay(s))
		}
		history = append(history, desc)
		settleStart := time.Now()
		settled, why := w.settle(ctx)
		w.cur.Managers = w.managers.seq
		if settled {
			w.seen()
		}
		w.faults.forgetExpired()
		if n := w.faults.relists.Swap(0); w.reportLists {
			w.logf("    the managers' informers listed %d times", n)
			w.reportLists = false
		}
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
		var vs []violation
		for _, v := range w.checker.check(w.cur, snap) {
			if o.known[v.Invariant] {
				w.logf("    KNOWN %s (%s)", v, knownBroken[v.Invariant])
				knownSeen++
				continue
			}
			vs = append(vs, v)
		}
		if len(vs) == 0 {
			continue
		}
		for _, v := range vs {
			w.logf("    VIOLATION %s", v)
		}
		w.logf("    state of the world after step %d:\n%s", s, w.describe(ctx))
		broken = append(broken, vs...)
		if !o.keepGoing {
			break
		}
	}
	st := w.checker.stats
	w.logf("chaos: seed %d: %d steps in %s (the whole run with the control plane: %s; settling: mean %s, longest %s, %d unsettled); %d CRs created, %d of them starting a remediation; "+
		"%d escalations (next steps, timed-out marks), a CR running while the gate was closed at %d node-checks, %d CRs deleted, a repair budget possibly exhausted at %d node-checks, a node waiting for spec.maxInFlight at %d node-checks, for its failure domain at %d, %d CRs owned by a Machine, %d of a node claiming another Machine or none; "+
		"%d remediations started for requests (%d for a request refused or not due), a request owed at %d node-checks, waiting at %d; a node held by its removal at %d node-checks, %d remediations of nodes being removed (past the hold); a failure dated back at %d node-checks; a CR of an unreadable kind kept at %d node-checks, a node waiting for it at %d; "+
		"owed remediations seen at %d node-checks, at most %d in a row; %s",
		seed, w.cur.Step, time.Since(played).Round(time.Millisecond), time.Since(began).Round(time.Millisecond), (w.settleTotal / time.Duration(max(w.cur.Step, 1))).Round(time.Millisecond),
		w.settleLongest.Round(time.Millisecond), w.unsettled, st.newCRs, st.firstCRs, st.escalations, st.heldRunning, st.deletions, st.budgetHeld, st.inFlightHeld, st.domainHeld, st.machineOwned, st.claimedElsewhere,
		st.requestStarts, st.requestRefusedStarts, st.requestOwed, st.requestWaited, st.removalHeld, st.removalOver, st.backdatedHeld, st.unknownHeld, st.unknownWaited, st.owed, st.longestOwed, w.kindCounts())
	w.logf("chaos: the history as a script: CHAOS_SCRIPT='%s'", strings.Join(history, "; "))
	if knownSeen > 0 {
		w.logf("chaos: %d violation(s) of invariants the operator is known to break (CHAOS_KNOWN=none fails them)", knownSeen)
	}
	if len(broken) > 0 {
		var lines []string
		for _, v := range broken {
			lines = append(lines, v.String())
		}
		t.Fatalf("seed %d: %d invariant violation(s); the first at step %d (replay: %s):\n%s",
			seed, len(broken), broken[0].Step, replay(broken[0].Step), strings.Join(lines, "\n"))
	}
	return st
}

// step plays step s: the script's, or a random one (a move, or a burst of moves chosen one after
// the other from the model as it goes). It returns the step in script syntax.
func (w *world) step(ctx context.Context, s int, script [][]move) (string, error) {
	var planned []move
	count := 1
	if script != nil {
		planned = script[s-1]
		count = len(planned)
	}
	var played []move
	var mids []*state
	defer func() {
		w.cur.Mids = mids
		if w.watchesHeld {
			w.faults.releaseWatches()
			w.watchesHeld = false
		}
	}()
	for i := 0; i < count; i++ {
		var m move
		if planned != nil {
			m = planned[i]
		} else {
			m = w.randomMove(i > 0 || count > 1)
			switch m.Kind {
			case "burst":
				count = m.Count
				m = w.randomMove(true)
			case "replace":
				planned = []move{{Kind: "drop-watches", Chosen: "replace"}, {Kind: "delete", Nodes: m.Nodes, Chosen: "replace"},
					{Kind: "recreate", Nodes: m.Nodes, Status: m.Status, Chosen: "replace"}}
				count, m = len(planned), planned[0]
			}
		}
		if i > 0 {
			mid := w.cur.clone()
			mids = append(mids, mid)
		}
		played = append(played, m)
		kind := m.Kind
		if m.Chosen != "" {
			kind = m.Chosen
		}
		if m.Chosen != "replace" || i == 0 {
			w.moveCounts[kind]++
		}
		desc, err := w.apply(ctx, m)
		w.cur.Managers = w.managers.seq
		if err != nil {
			return stepString(played), err
		}
		prefix := fmt.Sprintf("step %d", s)
		if count > 1 {
			prefix = fmt.Sprintf("step %d.%d", s, i+1)
		}
		w.logf("%s [%s, %s] %s: %s", prefix, w.fakeElapsed(), time.Now().Format("15:04:05.000"), m, desc)
	}
	if len(played) > 1 && played[0].Chosen != "replace" {
		w.moveCounts["burst"]++
	}
	return stepString(played), nil
}

// kindCounts says how many moves of each kind the run made.
func (w *world) kindCounts() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(w.moveCounts)) {
		out = append(out, fmt.Sprintf("%s %d", k, w.moveCounts[k]))
	}
	return "moves: " + strings.Join(out, ", ")
}

// build creates the world: templates, nodes, NodeHealthChecks and the recorder's markers.
func (w *world) build(ctx context.Context) error {
	if err := installConvCRDs(ctx, w.k8s, w.conv); err != nil {
		return err
	}
	for _, ns := range []string{markerNS, leaseNamespace} {
		if err := w.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
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
		if err := w.k8s.Create(ctx, machineObject(w.cur.Nodes[name])); err != nil {
			return fmt.Errorf("creating the Machine of node %s: %w", name, err)
		}
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

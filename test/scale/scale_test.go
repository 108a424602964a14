package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// scenario is one run of the benchmark.
type scenario struct {
	Nodes int `json:"nodes"`
	Pools int `json:"pools"`
	// Driven: the benchmark writes the nodes' conditions and heartbeats; else kwok and the node
	// lifecycle controller do.
	Driven bool `json:"driven"`
	// Duration is the NodeHealthChecks' unhealthy condition duration.
	Duration time.Duration `json:"duration"`
	// Steady is the steady-state phase's length.
	Steady time.Duration `json:"steady"`
	// HeartbeatPeriod: each driven node gets a heartbeat-only status update this often.
	HeartbeatPeriod time.Duration `json:"heartbeatPeriod"`
	// GracePeriod is the node lifecycle controller's grace period (kwok nodes); see
	// localcluster.NodeSimulationOptions.
	GracePeriod string `json:"gracePeriod,omitempty"`
	// TemplateListWatch: the test remediator's role grants list and watch on its templates too
	// (NHC_SCALE_TEMPLATE_LISTWATCH=1), not only the documented get, so the operator caches them.
	TemplateListWatch bool `json:"templateListWatch"`
	// ManagerArgs are extra manager flags: the scenario's, then $NHC_SCALE_MANAGER_ARGS (split on
	// spaces), for example --pprof-bind-address=localhost:6060.
	ManagerArgs []string `json:"managerArgs,omitempty"`
	// ManagerEnv are extra environment variables of the manager: $NHC_SCALE_MANAGER_ENV (split on
	// spaces), for example GOGC=50.
	ManagerEnv []string `json:"managerEnv,omitempty"`
}

// scaleScenario is the scenario for n nodes: 100 nodes per pool; up to 1,000 nodes through
// kwok and kube-controller-manager, more driven by the benchmark (two cores cannot keep 5,000 kwok
// nodes Ready).
func scaleScenario(n int) scenario {
	return scenario{Nodes: n, Pools: max(n/100, 1), Driven: n > 1000, Duration: 30 * time.Second,
		Steady: envDuration("NHC_SCALE_STEADY", 3*time.Minute), HeartbeatPeriod: heartbeatPeriod(n),
		// kwok renews leases every 10s: with the e2e suite's 10s grace, 1,000 nodes on a loaded 2-core
		// machine lost Ready spuriously (13 in a run); 20s tolerates a renewal late by up to 10s.
		GracePeriod: "20s"}
}

// heartbeatPeriod is how often each driven node makes a heartbeat-only status update: every minute
// up to 5,000 nodes (83 updates a second at 5,000, five times a kubelet's rate), and beyond at the
// same 83 a second, up to every 5 minutes, the kubelet's nodeStatusReportFrequency: what 25,000
// real kubelets send (the node lifecycle's Leases are another resource, which the operator does not
// watch).
func heartbeatPeriod(n int) time.Duration {
	return min(max(time.Minute, time.Duration(n)*time.Minute/5000), 5*time.Minute)
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// TestScale runs the scale benchmark when NHC_SCALE is set to a number of nodes (make bench-scale
// SCALE=1000) and writes its figures to bin/bench/scale-<nodes>-<time>.json.
func TestScale(t *testing.T) {
	v := os.Getenv("NHC_SCALE")
	if v == "" {
		t.Skip("NHC_SCALE is not set: make bench-scale SCALE=1000 (or 5000) runs the scale benchmark")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 {
		t.Fatalf("NHC_SCALE=%q: want a number of nodes, at least 10", v)
	}
	sc := scaleScenario(n)
	sc.TemplateListWatch = os.Getenv("NHC_SCALE_TEMPLATE_LISTWATCH") != ""
	sc.ManagerEnv = strings.Fields(os.Getenv("NHC_SCALE_MANAGER_ENV"))
	var res *results
	t.Cleanup(func() {
		// A run that broke (the control plane or the manager gave way) still records what it
		// measured until then, and where it stopped.
		if !t.Failed() || res == nil {
			return
		}
		res.Valid = false
		res.Stopped = res.Reached
		res.Invalid = append(res.Invalid, "the run stopped during "+res.Reached+" (the test's output says why); later figures were not measured")
		if path, err := res.write(testutil.Path("bin", "bench")); err == nil {
			t.Logf("Partial results: %s", path)
		}
	})
	res = run(t, sc, func(r *results) { res = r })
	path, err := res.write(testutil.Path("bin", "bench"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Results: %s (valid: %v)", path, res.Valid)
}

// TestScaleSmoke runs the benchmark with 100 driven nodes, 2 NodeHealthChecks and short phases, and
// asserts what must hold at any scale.
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("the scale smoke test starts a control plane")
	}
	res := run(t, scenario{Nodes: 100, Pools: 2, Driven: true, Duration: 10 * time.Second,
		Steady: 20 * time.Second, HeartbeatPeriod: 10 * time.Second,
		TemplateListWatch: os.Getenv("NHC_SCALE_TEMPLATE_LISTWATCH") != "",
		// Durations of 10s, a returning-node grace to match (the chart's 60s is for the real 50s
		// node grace period): the nodes are well over 20s old when the outage ends.
		ManagerArgs: []string{"--returning-node-grace=20s"}}, nil)
	g := NewWithT(t)
	g.Expect(res.SpuriousReadyLosses).To(BeZero(), "nodes left Ready without being failed")
	g.Expect(res.Steady.HeartbeatUpdates).To(BeNumerically(">", 100), "the benchmark made heartbeat-only updates")
	g.Expect(res.Steady.API.Requests).To(BeEmpty(), "API requests of the manager in steady state (heartbeat-only updates)")
	g.Expect(res.Steady.ReconcilesTotal).To(BeZero(), "reconciles in steady state: %v", res.Steady.Reconciles)
	g.Expect(res.OnePercent.API.Requests.total()).To(BeNumerically(">", 0), "the audit log counts the manager's requests")
	g.Expect(res.OnePercent.CRLatency.N).To(Equal(res.OnePercent.Failures), "every failed node got a CR")
	g.Expect(res.Outage.CRsInOverThresholdPools).To(BeZero(), "CRs in pools over their threshold")
	g.Expect(res.Outage.CRsCreated).To(Equal(res.Outage.Failures-res.Outage.FailuresInOverThresholdPools), "a CR for each failed node of a pool under its threshold")
	g.Expect(res.Recovery.CRsLeft).To(BeZero(), "CRs left after the recovery")
	g.Expect(res.Recovery.CRsCreated).To(BeZero(), "CRs created while the outage's nodes came back (the returning-node hold)")
	g.Expect(res.Start.ConvergedAfterCreate.N).To(Equal(2), "each NodeHealthCheck's status counted its pool")
	g.Expect(res.RawCreates.N).To(Equal(res.Outage.CRsCreated), "the plain client made as many creates as the outage's CRs")
	g.Expect(res.OnePercentRawCreates.N).To(Equal(res.OnePercent.Failures), "the plain client made as many creates as the 1% failure's CRs")
}

// bench is one run's cluster, manager and observations.
type bench struct {
	t       *testing.T
	sc      scenario
	cluster *localcluster.Cluster
	k8s     client.Client
	mgr     *localcluster.Manager
	obs     *observer
	sim     *nodes
	rss     rssSampler
	// pools[p] are the nodes of pool p.
	pools [][]string
	// all are every node.
	all []string
	// windows are the phases' time windows, for the audit log.
	windows map[string][2]time.Time
	// outageFailed are the nodes the 30% outage failed, outagePools the same by pool.
	outageFailed []string
	outagePools  map[int][]string
	// onePercentDeadlines are the 1% failure's nodes and their conditions' expiries.
	onePercentDeadlines map[string]time.Time
}

func (b *bench) logf(format string, args ...any) {
	b.t.Helper()
	b.t.Logf("%s "+format, append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

// run sets the scenario up, runs its phases and returns the figures; started, when given, gets them
// first, to record what a run that breaks measured (res.Reached names the phase under way).
func run(t *testing.T, sc scenario, started func(*results)) *results {
	RegisterTestingT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := &bench{t: t, sc: sc, obs: newObserver(), windows: map[string][2]time.Time{}}
	res := &results{Scenario: sc, Machine: machine(), Valid: true, Started: time.Now().UTC()}
	if started != nil {
		started(res)
	}
	for _, phase := range []struct {
		name string
		run  func()
	}{
		{"setup", func() { b.setup(ctx, res) }},
		{"phase 1 (steady state)", func() { b.steady(ctx, res) }},
		{"phase 2 (1% failing)", func() { b.onePercent(ctx, res) }},
		{"phase 3 (30% failing)", func() { b.outage(ctx, res) }},
		{"phase 4 (mass recovery)", func() { b.recovery(ctx, res) }},
		{"the plain client's creates", func() { b.rawCreates(ctx, res) }},
		{"the audit log's count", func() { b.audit(res) }},
	} {
		res.Reached = phase.name
		phase.run()
	}
	res.SpuriousReadyLosses = len(b.obs.spuriousLosses())
	res.SpuriousNodes = first(b.obs.spuriousLosses(), 50)
	if res.SpuriousReadyLosses > 0 {
		res.Valid = false
		res.Invalid = append(res.Invalid, fmt.Sprintf("%d nodes left Ready without being failed: %v", res.SpuriousReadyLosses, first(b.obs.spuriousLosses(), 10)))
	}
	res.targets()
	b.logf("Summary:\n%s", res.summary())
	return res
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// managerUser is the chart's ServiceAccount, the manager's identity.
func managerUser() string {
	return "system:serviceaccount:" + localcluster.ChartNamespace + ":" + localcluster.ServiceAccount
}

func (b *bench) setup(ctx context.Context, res *results) {
	t := b.t
	binary, err := localcluster.ManagerBinary(t.TempDir())
	Expect(err).NotTo(HaveOccurred())
	b.logf("Starting the control plane (%d nodes, %d pools, driven=%v)", b.sc.Nodes, b.sc.Pools, b.sc.Driven)
	b.cluster, err = localcluster.StartWith(localcluster.StartOptions{AuditPolicy: localcluster.UserAuditPolicy(managerUser())})
	Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if b.mgr != nil {
			_ = b.mgr.Stop(30 * time.Second)
		}
		_ = b.cluster.Stop()
	})
	logDir := t.TempDir()
	if os.Getenv("NHC_SCALE_LOGS") != "" {
		logDir = os.Getenv("NHC_SCALE_LOGS")
		Expect(os.MkdirAll(logDir, 0o755)).To(Succeed())
	}
	scheme := testutil.Scheme()
	cfg := *b.cluster.Config
	// The benchmark's own client must not be what limits the simulation.
	cfg.QPS, cfg.Burst = 500, 1000
	b.k8s, err = client.New(&cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(&cfg)
	Expect(err).NotTo(HaveOccurred())
	dyn, err := dynamic.NewForConfig(&cfg)
	Expect(err).NotTo(HaveOccurred())

	simLog, err := os.Create(filepath.Join(logDir, "simulation.log"))
	Expect(err).NotTo(HaveOccurred())
	if b.sc.Driven {
		// The benchmark writes node conditions: no node lifecycle controller, no kwok.
		Expect(b.cluster.StartControllerManager(simLog, "garbage-collector-controller", "clusterrole-aggregation-controller",
			"namespace-controller", "serviceaccount-controller", "serviceaccount-token-controller")).To(Succeed())
	} else {
		Expect(b.cluster.StartNodeSimulationWith(simLog, localcluster.NodeSimulationOptions{GracePeriod: b.sc.GracePeriod})).To(Succeed())
	}
	// As the e2e suite: the chart's RBAC, and the test remediator's permissions by aggregation.
	_, err = b.cluster.InstallChart(map[string]any{"certManager": map[string]any{"enabled": false}})
	Expect(err).NotTo(HaveOccurred())
	templateVerbs := []string{"get"}
	if b.sc.TemplateListWatch {
		templateVerbs = []string{"get", "list", "watch"}
	}
	Expect(b.k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-remediator", Labels: map[string]string{remediationv1alpha1.AggregateToExtRemediationLabel: "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediationtemplates"}, Verbs: templateVerbs},
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediations"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		},
	})).To(Succeed())
	Expect(waitFor(ctx, 30*time.Second, "the aggregated ClusterRole", func() bool {
		agg := &rbacv1.ClusterRole{}
		return b.k8s.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-ext-remediation"}, agg) == nil && len(agg.Rules) == 2
	})).To(Succeed())

	b.obs.start(ctx, cs, dyn)
	kubelets := b.kubeletsClient(ctx, &cfg)
	b.sim = &nodes{cluster: b.cluster, k8s: b.k8s, cs: kubelets, driven: b.sc.Driven, obs: b.obs}
	per := b.sc.Nodes / b.sc.Pools
	pool := map[string]string{}
	for p := range b.sc.Pools {
		var names []string
		for i := range per {
			names = append(names, nodeName(p, i))
			pool[nodeName(p, i)] = poolName(p)
		}
		b.pools = append(b.pools, names)
		b.all = append(b.all, names...)
	}
	start := time.Now()
	Expect(parallel(b.all, 20, func(n string) error { return b.sim.create(ctx, n, pool[n]) })).To(Succeed())
	b.logf("Created %d nodes in %s", len(b.all), time.Since(start).Round(time.Second))
	Expect(waitFor(ctx, 10*time.Minute, "every node Ready", func() bool { return b.obs.countReady(b.all) == len(b.all) })).To(Succeed())
	b.logf("All %d nodes Ready after %s", len(b.all), time.Since(start).Round(time.Second))
	if b.sc.Driven {
		go b.sim.heartbeat(ctx, b.all, b.sc.HeartbeatPeriod)
	}

	template := testutil.TemplateObject("scale-template", true)
	Expect(b.k8s.Create(ctx, template)).To(Succeed())
	mgrLog, err := os.Create(filepath.Join(logDir, "manager.log"))
	Expect(err).NotTo(HaveOccurred())
	// Plain HTTP metrics: scraping HTTPS metrics would add the manager's TokenReviews and
	// SubjectAccessReviews to the requests counted.
	args := append([]string{"--metrics-secure=false"}, b.sc.ManagerArgs...)
	args = append(args, strings.Fields(os.Getenv("NHC_SCALE_MANAGER_ARGS"))...)
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b.mgr, err = b.cluster.StartReady(readyCtx, localcluster.ManagerOptions{Binary: binary, Output: mgrLog, Args: args, Env: b.sc.ManagerEnv})
	Expect(err).NotTo(HaveOccurred())
	go b.rss.run(ctx, b.mgr.Cmd.Process.Pid)

	b.createNHCs(ctx, template.GetName(), per, res)
	b.settle(ctx)
	b.logf("Manager ready, %d NodeHealthChecks created; logs in %s", b.sc.Pools, logDir)
}

// createNHCs creates a NodeHealthCheck per pool on the running manager, 10 at a time, and measures
// how long each takes to report its pool: status counting every node observed and healthy.
func (b *bench) createNHCs(ctx context.Context, template string, per int, res *results) {
	b.obs.expectConverged(per)
	var names []string
	for p := range b.sc.Pools {
		names = append(names, "scale-"+poolName(p))
	}
	var mu sync.Mutex
	created := map[string]time.Time{}
	start := time.Now()
	Expect(parallel(names, 10, func(name string) error {
		nhc := testutil.NewNHC(name)
		nhc.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{PoolLabel: strings.TrimPrefix(name, "scale-")}}
		nhc.Spec.RemediationTemplate = testutil.TestTemplateRef(template)
		for i := range nhc.Spec.UnhealthyConditions {
			nhc.Spec.UnhealthyConditions[i].Duration.Duration = b.sc.Duration
		}
		if err := b.k8s.Create(ctx, nhc); err != nil {
			return err
		}
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		return nil
	})).To(Succeed())
	r := &res.Start
	r.CreateSeconds = round(time.Since(start).Seconds())
	Expect(waitFor(ctx, 2*time.Minute, "every NodeHealthCheck's status to count its pool observed and healthy", func() bool {
		return len(b.obs.convergedTimes()) == len(names)
	})).To(Succeed())
	converged := b.obs.convergedTimes()
	var after []time.Duration
	var last time.Time
	for _, name := range names {
		// A status written before the create returned: 0.
		after = append(after, max(converged[name].Sub(created[name]), 0))
		if converged[name].After(last) {
			last = converged[name]
		}
	}
	r.ConvergedAfterCreate = summarise(after)
	r.AllConvergedSeconds = round(last.Sub(start).Seconds())
	b.logf("Start: %d NodeHealthChecks created in %.1fs; each status counts its pool after its create p50 %.3fs p99 %.3fs max %.3fs; all %.1fs after the first create",
		len(names), r.CreateSeconds, r.ConvergedAfterCreate.P50, r.ConvergedAfterCreate.P99, r.ConvergedAfterCreate.Max, r.AllConvergedSeconds)
}

// settle waits until the manager's reconcile count stays the same for 5 seconds.
func (b *bench) settle(ctx context.Context) {
	last, since := -1.0, time.Now()
	Expect(waitFor(ctx, 5*time.Minute, "the manager to settle", func() bool {
		r, err := reconciles(ctx, b.mgr.MetricsAddr)
		if err != nil {
			return false
		}
		_, total := diff(r, nil)
		if total != last {
			last, since = total, time.Now()
		}
		return time.Since(since) >= 5*time.Second
	})).To(Succeed())
}

// meter is where a phase's cost is measured from.
type meter struct {
	start      time.Time
	reconciles map[string]float64
	cpu        float64
	heartbeats int64
}

func (b *bench) meter(ctx context.Context) meter {
	r, err := reconciles(ctx, b.mgr.MetricsAddr)
	Expect(err).NotTo(HaveOccurred())
	cpu, _, err := procStats(b.mgr.Cmd.Process.Pid)
	Expect(err).NotTo(HaveOccurred())
	b.rss.take(b.mgr.Cmd.Process.Pid)
	return meter{start: time.Now(), reconciles: r, cpu: cpu, heartbeats: b.sim.heartbeats.Load()}
}

// cost fills the phase's cost since m.
func (b *bench) cost(ctx context.Context, name string, m meter, c *cost) {
	r, err := reconciles(ctx, b.mgr.MetricsAddr)
	Expect(err).NotTo(HaveOccurred())
	cpu, _, err := procStats(b.mgr.Cmd.Process.Pid)
	Expect(err).NotTo(HaveOccurred())
	end := time.Now()
	c.Seconds = round(end.Sub(m.start).Seconds())
	c.Reconciles, c.ReconcilesTotal = diff(r, m.reconciles)
	c.ManagerCPUSeconds = round(cpu - m.cpu)
	c.ManagerRSSMaxMiB = round(b.rss.take(b.mgr.Cmd.Process.Pid))
	c.HeartbeatUpdates = b.sim.heartbeats.Load() - m.heartbeats
	b.windows[name] = [2]time.Time{m.start, end}
}

func (b *bench) steady(ctx context.Context, res *results) {
	b.logf("Phase 1: steady state for %s", b.sc.Steady)
	m := b.meter(ctx)
	select {
	case <-ctx.Done():
	case <-time.After(b.sc.Steady):
	}
	b.cost(ctx, "steady", m, &res.Steady.cost)
	b.logf("Phase 1 done: %v reconciles, %d heartbeat-only updates, manager CPU %.2fs, RSS max %.1f MiB",
		res.Steady.ReconcilesTotal, res.Steady.HeartbeatUpdates, res.Steady.ManagerCPUSeconds, res.Steady.ManagerRSSMaxMiB)
}

// failureTimeout bounds how long a failure takes to become a CR: the node grace period with kwok,
// the duration, and slack for a loaded machine.
func (b *bench) failureTimeout() time.Duration {
	return b.sc.Duration + 2*time.Minute
}

// crLatencies returns, for each node, the time from its condition's expiry (stored lastTransitionTime
// plus duration) to the first ADDED event of its CR since from.
func (b *bench) crLatencies(nodes []string, from time.Time) []time.Duration {
	transitions := b.obs.transitions(nodes)
	added := map[string]time.Time{}
	for _, e := range b.obs.eventsSince(from) {
		if _, seen := added[e.node]; e.added && !seen {
			added[e.node] = e.at
		}
	}
	var out []time.Duration
	for _, n := range nodes {
		if at, ok := added[n]; ok {
			out = append(out, at.Sub(transitions[n].Add(b.sc.Duration)))
		}
	}
	return out
}

// waitRecovered waits until the nodes are Ready and no CR is left.
func (b *bench) waitRecovered(ctx context.Context, nodes []string) {
	Expect(waitFor(ctx, 5*time.Minute, "the nodes Ready and their CRs gone", func() bool {
		return b.obs.countReady(nodes) == len(nodes) && b.obs.crCount() == 0
	})).To(Succeed())
	b.obs.clearRecovered()
}

func (b *bench) onePercent(ctx context.Context, res *results) {
	k := max(b.sc.Nodes/100, 1)
	var failed []string
	for j := range k {
		failed = append(failed, b.pools[j%b.sc.Pools][j/b.sc.Pools])
	}
	r := &res.OnePercent
	r.Failures = k
	b.logf("Phase 2: %d nodes (1%%) failing", k)
	m := b.meter(ctx)
	Expect(b.sim.fail(ctx, failed, time.Now())).To(Succeed())
	Expect(waitFor(ctx, b.failureTimeout(), "a CR for each failed node", func() bool { return b.obs.withCR(failed) == len(failed) })).To(Succeed())
	remediated := time.Now()
	r.CRLatency = summarise(b.crLatencies(failed, m.start))
	b.onePercentDeadlines = map[string]time.Time{}
	for n, at := range b.obs.transitions(failed) {
		b.onePercentDeadlines[n] = at.Add(b.sc.Duration)
	}
	// The status write and events that follow the CRs, in the phase's cost.
	Expect(waitFor(ctx, time.Minute, "the status listing each failed node with its CR, and its events", func() bool {
		return b.obs.listedWithCR(failed) == len(failed) &&
			b.obs.withEvents(failed, m.start, remediationv1alpha1.EventReasonDetectedUnhealthy, remediationv1alpha1.EventReasonRemediationCreated) == len(failed)
	})).To(Succeed())
	b.cost(ctx, "onePercent", m, &r.cost)
	b.logf("Phase 2: every CR after %s; CR latency after expiry p50 %.3fs p99 %.3fs max %.3fs", remediated.Sub(m.start).Round(time.Millisecond), r.CRLatency.P50, r.CRLatency.P99, r.CRLatency.Max)

	m = b.meter(ctx)
	Expect(parallel(failed, 20, func(n string) error { return b.sim.recover(ctx, n) })).To(Succeed())
	b.waitRecovered(ctx, failed)
	b.cost(ctx, "onePercentRecovery", m, &r.Recovery)
	b.logf("Phase 2 done: recovered, CRs gone after %.1fs", r.Recovery.Seconds)
}

// outagePlan returns the failures of the 30% outage by pool: the first fifth of the pools (at
// least one) lose 60% of their nodes, the others share the rest of the 30% (at least a fifth of
// theirs, so that a small run fails nodes under the threshold too).
func (b *bench) outagePlan() (failed map[int][]string, over map[int]bool) {
	per := b.sc.Nodes / b.sc.Pools
	overPools := max(b.sc.Pools/5, 1)
	failed, over = map[int][]string{}, map[int]bool{}
	lose := per * 60 / 100
	for p := range overPools {
		over[p] = true
		failed[p] = b.pools[p][:lose]
	}
	rest := max(b.sc.Nodes*30/100-overPools*lose, (b.sc.Pools-overPools)*per/5)
	for j := range rest {
		p := overPools + j%(b.sc.Pools-overPools)
		failed[p] = append(failed[p], b.pools[p][j/(b.sc.Pools-overPools)])
	}
	return failed, over
}

func (b *bench) outage(ctx context.Context, res *results) {
	plan, over := b.outagePlan()
	r := &res.Outage
	var failed, underFailed []string
	want := map[string][]string{}
	for p, nodes := range plan {
		failed = append(failed, nodes...)
		want["scale-"+poolName(p)] = nodes
		if over[p] {
			r.FailuresInOverThresholdPools += len(nodes)
			r.OverThresholdPools = append(r.OverThresholdPools, poolName(p))
		} else {
			underFailed = append(underFailed, nodes...)
		}
	}
	sort.Strings(r.OverThresholdPools)
	r.Failures = len(failed)
	b.logf("Phase 3: %d nodes (30%%) failing at once; pools %v over their threshold", len(failed), r.OverThresholdPools)
	b.obs.expectListed(want)
	m := b.meter(ctx)
	// One transition time for all: they fail at once.
	Expect(b.sim.fail(ctx, failed, time.Now())).To(Succeed())
	Expect(waitFor(ctx, b.failureTimeout(), "a CR for each failed node under the threshold and every failed node listed", func() bool {
		return b.obs.withCR(underFailed) == len(underFailed) && len(b.obs.listedTimes()) == len(want)
	})).To(Succeed())
	b.logf("Phase 3: every expected CR and status after %s", time.Since(m.start).Round(time.Millisecond))
	// A remediation of an over-threshold pool would come now: the remediation controller decides
	// each of their NodeHealthChecks once more, after the status listed every failed node.
	var overNHCs []string
	for p := range over {
		overNHCs = append(overNHCs, "scale-"+poolName(p))
	}
	b.decidedAfter(ctx, overNHCs)
	b.cost(ctx, "outage", m, &r.cost)

	inOver := map[string]bool{}
	for p := range over {
		for _, n := range plan[p] {
			inOver[n] = true
		}
	}
	for _, e := range b.obs.eventsSince(m.start) {
		if e.added {
			r.CRsCreated++
			if inOver[e.node] {
				r.CRsInOverThresholdPools++
			}
		}
	}
	r.CRLatency = summarise(b.crLatencies(underFailed, m.start))
	listed := b.obs.listedTimes()
	r.StatusListedAfterDeadline = map[string]float64{}
	transitions := b.obs.transitions(failed)
	worst := time.Duration(-1 << 62)
	r.TransitionSpread = map[string]float64{}
	for p, nodes := range plan {
		var deadline, earliest time.Time
		for _, n := range nodes {
			if d := transitions[n].Add(b.sc.Duration); d.After(deadline) {
				deadline = d
			}
			if earliest.IsZero() || transitions[n].Before(earliest) {
				earliest = transitions[n]
			}
		}
		r.TransitionSpread[poolName(p)] = round(deadline.Add(-b.sc.Duration).Sub(earliest).Seconds())
		d := listed["scale-"+poolName(p)].Sub(deadline)
		r.StatusListedAfterDeadline[poolName(p)] = round(d.Seconds())
		worst = max(worst, d)
	}
	r.StatusListedAfterDeadlineMax = round(worst.Seconds())
	b.logf("Phase 3 done: %d CRs (%d in over-threshold pools), CR latency p99 %.3fs, status lists every failed node at most %.3fs after the pool's deadline; Ready transitions spread by pool (s) %v",
		r.CRsCreated, r.CRsInOverThresholdPools, r.CRLatency.P99, r.StatusListedAfterDeadlineMax, r.TransitionSpread)
	b.outageFailed = failed
	b.outagePools = plan
}

// decidedAfter returns once the remediation controller has carried out, for each of the
// NodeHealthChecks, a decision that began after the call (testutil.DecidedAfter's rule, for all of
// them at once): it touches them, waits for one more decision of each, touches them again and waits
// for another. Each touch costs each controller a reconcile that writes nothing.
func (b *bench) decidedAfter(ctx context.Context, nhcs []string) {
	before, err := decisions(ctx, b.mgr.MetricsAddr)
	Expect(err).NotTo(HaveOccurred())
	for i := 1; i <= 2; i++ {
		for _, name := range nhcs {
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck"))
			obj.SetName(name)
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"test.medik8s.io/touched":"%d"}}}`, time.Now().UnixNano())
			Expect(b.k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		}
		Expect(waitFor(ctx, time.Minute, "the remediation controller to decide the over-threshold NodeHealthChecks", func() bool {
			now, err := decisions(ctx, b.mgr.MetricsAddr)
			if err != nil {
				return false
			}
			for _, name := range nhcs {
				if now[name] < before[name]+float64(i) {
					return false
				}
			}
			return true
		})).To(Succeed())
	}
}

func (b *bench) recovery(ctx context.Context, res *results) {
	failed := b.outageFailed
	r := &res.Recovery
	b.logf("Phase 4: %d nodes recover within 5s", len(failed))
	m := b.meter(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, len(failed))
	for _, n := range failed {
		delay := rand.N(5 * time.Second)
		wg.Go(func() {
			time.Sleep(delay)
			if err := b.sim.recover(ctx, n); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
	err := waitFor(ctx, 5*time.Minute, "the nodes Ready and their CRs gone", func() bool {
		return b.obs.countReady(failed) == len(failed) && b.obs.crCount() == 0
	})
	r.CRsLeft = b.obs.crCount()
	if err != nil {
		b.logf("Phase 4: %v (%d CRs left)", err, r.CRsLeft)
	}
	b.obs.clearRecovered()
	b.cost(ctx, "recovery", m, &r.cost)

	pool := map[string]string{}
	for p, nodes := range b.outagePools {
		for _, n := range nodes {
			pool[n] = poolName(p)
		}
	}
	readyAt := b.obs.readyAt(failed)
	var gone []time.Duration
	r.CRsCreatedByPool = map[string]int{}
	var lastReady, lastGone time.Time
	for _, t := range readyAt {
		if t.After(lastReady) {
			lastReady = t
		}
	}
	for _, e := range b.obs.eventsSince(m.start) {
		if e.added {
			r.CRsCreated++
			r.CRsCreatedByPool[pool[e.node]]++
			if e.nodeReady {
				r.CRsCreatedForReadyNodes++
			}
			continue
		}
		if t, ok := readyAt[e.node]; ok {
			gone = append(gone, e.at.Sub(t))
		}
		if e.at.After(lastGone) {
			lastGone = e.at
		}
	}
	r.CRGoneAfterNodeReady = summarise(gone)
	if !lastGone.IsZero() {
		r.AllGoneAfterLastReadySeconds = round(lastGone.Sub(lastReady).Seconds())
	}
	b.logf("Phase 4 done: CRs gone after their node is Ready p50 %.3fs p99 %.3fs max %.3fs; %d CRs created during the recovery (%d for Ready nodes) by pool %v",
		r.CRGoneAfterNodeReady.P50, r.CRGoneAfterNodeReady.P99, r.CRGoneAfterNodeReady.Max, r.CRsCreated, r.CRsCreatedForReadyNodes, r.CRsCreatedByPool)
}

// rawCreates measures the API server's own rate for remediation starts, in this run: for as many
// nodes as the operator started remediations in the 30% failure (RawCreates), and then in the 1%
// failure (OnePercentRawCreates), the creates a start makes, one after the other as the operator
// makes them: the node's lease (where the operator keeps them), then its remediation CR built as the
// operator builds it (both for nodes that do not exist; the CRs without owner, in a namespace of their
// own, so that the operator has nothing to do with them); as the operator's ServiceAccount (the same
// priority and fairness flow, no client-side limit, as the manager's client) by as many workers as
// the remediation controller runs starts at once. After the measured phases: its requests fall
// outside their windows. The 1% figure tells what part of that failure's CR latency is the API
// server's: a second after the deadline cannot be met where a plain client needs more for the same
// starts.
func (b *bench) rawCreates(ctx context.Context, res *results) {
	if res.Outage.CRsCreated == 0 {
		return
	}
	kubeconfig, err := b.cluster.ServiceAccountKubeconfig(localcluster.ChartNamespace, localcluster.ServiceAccount)
	Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS = -1
	raw, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	const ns = "scale-raw-creates"
	Expect(b.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	template := testutil.TemplateObject("scale-template", true)
	Expect(b.k8s.Get(ctx, client.ObjectKeyFromObject(template), template)).To(Succeed())
	owner := &remediationv1alpha1.NodeHealthCheck{}
	Expect(b.k8s.Get(ctx, client.ObjectKey{Name: "scale-" + poolName(0)}, owner)).To(Succeed())
	starts := func(prefix string, n int, r *rawStarts) {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("%s-%05d", prefix, i))
		}
		start := time.Now()
		Expect(parallel(names, rawCreateWorkers, func(name string) error {
			holder, seconds, now := nodelease.Holder(owner.Name), nodelease.Seconds(time.Minute), metav1.NowMicro()
			// In the chart's lease namespace, the only one where the operator may create leases.
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: nodelease.DefaultNamespace, Name: nodelease.Name(name)},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now}}
			if err := raw.Create(ctx, lease); err != nil {
				return err
			}
			cr, err := remediationcr.Build(template, owner, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, remediationcr.Machine{})
			if err != nil {
				return err
			}
			cr.SetNamespace(ns)
			cr.SetGenerateName("")
			cr.SetName(name)
			cr.SetOwnerReferences(nil)
			return raw.Create(ctx, cr)
		})).To(Succeed())
		r.N, r.Workers = n, rawCreateWorkers
		r.Seconds = round(time.Since(start).Seconds())
		r.PerSecond = round(float64(n) / r.Seconds)
	}
	r := &res.RawCreates
	starts("raw", res.Outage.CRsCreated, r)
	b.logf("Raw creates: %d leases and remediation CRs as the operator's ServiceAccount, %d workers, in %.2fs (%.0f starts/s); the operator's 30%% failure: %d CRs, the last %.2fs after its deadline",
		r.N, r.Workers, r.Seconds, r.PerSecond, res.Outage.CRsCreated, res.Outage.CRLatency.Max)
	if n := res.OnePercent.Failures; n > 0 {
		r := &res.OnePercentRawCreates
		starts("raw1", n, r)
		b.logf("Raw creates for the 1%% failure: %d leases and remediation CRs, %d workers, in %.2fs (%.0f starts/s); the operator's CR p99 %.2fs after the deadline",
			r.N, r.Workers, r.Seconds, r.PerSecond, res.OnePercent.CRLatency.P99)
	}
}

// rawCreateWorkers is how many remediation starts the remediation controller runs at once (its
// reconciles, each starting one of these, and its bound on starts in flight, maxStarts).
const rawCreateWorkers = 32

// audit counts the manager's API requests of each phase from the audit log.
func (b *bench) audit(res *results) {
	log, err := localcluster.ReadAuditLog(b.cluster.AuditLog)
	Expect(err).NotTo(HaveOccurred())
	users := map[string]bool{}
	for _, e := range log {
		users[e.User.Username] = true
	}
	Expect(users).To(HaveLen(1), "the audit log records only the manager's requests")
	for name, c := range map[string]*cost{"steady": &res.Steady.cost, "onePercent": &res.OnePercent.cost,
		"onePercentRecovery": &res.OnePercent.Recovery, "outage": &res.Outage.cost, "recovery": &res.Recovery.cost} {
		w := b.windows[name]
		c.API = count(log, w[0], w[1], isNodeName)
		c.UncachedReads = uncachedReads(c.API.Requests)
		c.UncachedReadsPerSecond = round(float64(c.UncachedReads) / c.Seconds)
		b.logf("Audit %s (%.1fs): requests %v; watches %v; leader election %v", name, c.Seconds, c.API.Requests, c.API.Watches, c.API.LeaderElection)
	}
	r := &res.OnePercent
	r.RequestsPerFailure = round(float64(r.API.Requests.total()) / float64(r.Failures))
	r.EventsPerFailure = round(float64(events(r.API.Requests)) / float64(r.Failures))
	r.NodeEventsPerFailure = round(float64(r.API.NodeEvents.total()) / float64(r.Failures))
	r.RequestsPerFailureWithRecovery = round(float64(r.API.Requests.total()+r.Recovery.API.Requests.total()) / float64(r.Failures))
	w := b.windows["onePercent"]
	r.Starts = splitStarts(log, w[0], w[1], b.onePercentDeadlines, nodelease.DefaultNamespace, nodelease.Name)
	b.logf("Audit: 1%% starts: the manager's first write of a failed node's lease received p50 %.3fs p99 %.3fs max %.3fs after its deadline (%d nodes); the API server answered its lease and CR creates in p50 %.3fs p99 %.3fs max %.3fs",
		r.Starts.Detection.P50, r.Starts.Detection.P99, r.Starts.Detection.Max, r.Starts.Detection.N, r.Starts.Served.P50, r.Starts.Served.P99, r.Starts.Served.Max)
	b.logf("Audit: steady %v; per failure %.2f requests (%.2f events, %.2f of them regarding the Node), %.2f with the recovery: %v then %v",
		res.Steady.API.Requests, r.RequestsPerFailure, r.EventsPerFailure, r.NodeEventsPerFailure, r.RequestsPerFailureWithRecovery, r.API.Requests, r.Recovery.API.Requests)
	res.incidentCosts()
	in := res.Incident
	b.logf("Incident (%d failed nodes): %.2f writes and %.2f reads (%.2f but template GETs and discovery) per failed node; failure: %d writes, %d events, %.1f status writes per NodeHealthCheck, per failed node %v %v; recovery: %d writes, %d events, %.1f status writes per NodeHealthCheck, per failed node %v %v",
		in.FailedNodes, in.WritesPerFailedNode, in.ReadsPerFailedNode, in.UncachedReadsPerFailedNode,
		in.Failure.Writes, in.Failure.EventWrites, in.Failure.StatusWritesPerNHC, in.Failure.WritesPerFailedNode, in.Failure.ReadsPerFailedNode,
		in.Recovery.Writes, in.Recovery.EventWrites, in.Recovery.StatusWritesPerNHC, in.Recovery.WritesPerFailedNode, in.Recovery.ReadsPerFailedNode)
}

// kubeletsClient returns the client the driven nodes' status writes are made with: as a node
// (group system:nodes), so that the API server's flow control classifies them as kubelets' (the
// built-in system-nodes FlowSchema, priority level system), not as the benchmark's admin requests,
// which are exempt and, thousands at once when a mass outage ends, took the API server from every
// limited level (the operator's Lease renewal among them). Allowed by a ClusterRoleBinding of the
// group to node status writes (envtest's API server authorizes with RBAC alone: no Node
// authorizer).
func (b *bench) kubeletsClient(ctx context.Context, admin *rest.Config) kubernetes.Interface {
	Expect(b.k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "scale-kubelets"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, Verbs: []string{"get", "patch", "update"}}},
	})).To(Succeed())
	Expect(b.k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scale-kubelets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "scale-kubelets"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	})).To(Succeed())
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:scale-kubelets", Groups: []string{"system:nodes", "system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return cs
}

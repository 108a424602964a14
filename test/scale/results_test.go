package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// cost is what a phase cost the manager.
type cost struct {
	Seconds float64 `json:"seconds"`
	// Reconciles are controller_runtime_reconcile_total's increase, by controller.
	Reconciles      map[string]float64 `json:"reconciles"`
	ReconcilesTotal float64            `json:"reconcilesTotal"`
	// API are the manager's API requests, from the API server's audit log.
	API auditCounts `json:"api"`
	// UncachedReads are the GETs and LISTs of nodes and leases among them.
	UncachedReads          int     `json:"uncachedReads"`
	UncachedReadsPerSecond float64 `json:"uncachedReadsPerSecond"`
	ManagerCPUSeconds      float64 `json:"managerCPUSeconds"`
	ManagerRSSMaxMiB       float64 `json:"managerRSSMaxMiB"`
	// HeartbeatUpdates are the heartbeat-only node status updates the benchmark made (driven nodes).
	HeartbeatUpdates int64 `json:"heartbeatUpdates"`
}

// results are a run's figures, written as JSON.
type results struct {
	Scenario scenario    `json:"scenario"`
	Machine  machineInfo `json:"machine"`
	Started  time.Time   `json:"started"`
	// Valid is false when the run does not measure what it should (Invalid says why).
	Valid   bool     `json:"valid"`
	Invalid []string `json:"invalid,omitempty"`
	// Reached is the phase under way (or the last one); Stopped, of a run that broke, the phase it
	// stopped in: the figures of later phases are zero, not measured.
	Reached string `json:"reached,omitempty"`
	Stopped string `json:"stopped,omitempty"`
	// SpuriousReadyLosses are nodes that left Ready without being failed by the benchmark.
	SpuriousReadyLosses int      `json:"spuriousReadyLosses"`
	SpuriousNodes       []string `json:"spuriousNodes,omitempty"`

	// Start: the NodeHealthChecks created on the running manager, before phase 1.
	Start struct {
		// CreateSeconds: the benchmark's creates, 10 at a time.
		CreateSeconds float64 `json:"createSeconds"`
		// ConvergedAfterCreate: from each NodeHealthCheck's create to its status counting every node
		// of its pool observed and healthy.
		ConvergedAfterCreate latencies `json:"convergedAfterCreate"`
		// AllConvergedSeconds: from the first create to the last status that converged.
		AllConvergedSeconds float64 `json:"allConvergedSeconds"`
	} `json:"start"`
	Steady struct {
		cost
	} `json:"steady"`
	OnePercent struct {
		cost
		Failures int `json:"failures"`
		// CRLatency: from each condition's expiry to its CR's ADDED event at the benchmark.
		CRLatency latencies `json:"crLatency"`
		// Starts splits the CR latency: the operator's part (its first write for the node received
		// by the API server after the deadline) and the API server's (each start write's time).
		Starts startTimings `json:"starts"`
		// RequestsPerFailure: the manager's requests (no watches, no leader election) from the failures
		// until every CR exists (and 2s more), per failure; events included.
		RequestsPerFailure float64 `json:"requestsPerFailure"`
		EventsPerFailure   float64 `json:"eventsPerFailure"`
		// NodeEventsPerFailure are those of the events that regard the failed Node (issue 35's,
		// so that `kubectl describe node` shows its remediation): the rest regard its NodeHealthCheck.
		NodeEventsPerFailure           float64 `json:"nodeEventsPerFailure"`
		RequestsPerFailureWithRecovery float64 `json:"requestsPerFailureWithRecovery"`
		// Recovery is the recovery of those nodes, until their CRs are gone.
		Recovery cost `json:"recovery"`
	} `json:"onePercent"`
	Outage struct {
		cost
		Failures                     int       `json:"failures"`
		OverThresholdPools           []string  `json:"overThresholdPools"`
		FailuresInOverThresholdPools int       `json:"failuresInOverThresholdPools"`
		CRsCreated                   int       `json:"crsCreated"`
		CRsInOverThresholdPools      int       `json:"crsInOverThresholdPools"`
		CRLatency                    latencies `json:"crLatency"`
		// StatusListedAfterDeadline: by pool, from the latest deadline of its failed nodes to the
		// NodeHealthCheck's status listing every one of them (negative: before the deadline).
		StatusListedAfterDeadline    map[string]float64 `json:"statusListedAfterDeadlineSeconds"`
		StatusListedAfterDeadlineMax float64            `json:"statusListedAfterDeadlineMaxSeconds"`
		// TransitionSpread: by pool, from the first to the last Ready transition of its failed nodes
		// (with kwok, the node lifecycle controller marks them Unknown one by one).
		TransitionSpread map[string]float64 `json:"transitionSpreadSeconds"`
	} `json:"outage"`
	Recovery struct {
		cost
		// CRGoneAfterNodeReady: from a node seen Ready to its CR's DELETED event.
		CRGoneAfterNodeReady         latencies `json:"crGoneAfterNodeReady"`
		AllGoneAfterLastReadySeconds float64   `json:"allGoneAfterLastReadySeconds"`
		CRsLeft                      int       `json:"crsLeft"`
		// CRsCreated arrived after the recovery began.
		CRsCreated              int            `json:"crsCreated"`
		CRsCreatedByPool        map[string]int `json:"crsCreatedByPool"`
		CRsCreatedForReadyNodes int            `json:"crsCreatedForReadyNodes"`
	} `json:"recovery"`
	// RawCreates: a lease and a CR for as many nodes as the 30% failure's CRs, created by a plain
	// client (rawCreates): the API server's own rate for remediation starts in this run.
	RawCreates rawStarts `json:"rawCreates"`
	// OnePercentRawCreates: the same for as many nodes as the 1% failure's.
	OnePercentRawCreates rawStarts `json:"onePercentRawCreates"`
	// Incident is the 30% failure and its recovery per failed node (issue 27).
	Incident incident `json:"incident"`
	Targets  []target `json:"targets"`
}

// rawStarts is a plain client's remediation starts (rawCreates): n leases and CRs, by workers.
type rawStarts struct {
	N         int     `json:"n"`
	Workers   int     `json:"workers"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"perSecond"`
}

// incident is what the 30% failure (phase 3) and its recovery (phase 4) cost, per failed node.
type incident struct {
	FailedNodes int `json:"failedNodes"`
	// Failure and Recovery are the two phases' figures.
	Failure  incidentPhase `json:"failure"`
	Recovery incidentPhase `json:"recovery"`
	// WritesPerFailedNode and ReadsPerFailedNode add up both phases; UncachedReadsPerFailedNode
	// leaves out the template GETs that the aggregation contract forces (the remediator grants only
	// get) and discovery requests.
	WritesPerFailedNode        float64 `json:"writesPerFailedNode"`
	ReadsPerFailedNode         float64 `json:"readsPerFailedNode"`
	UncachedReadsPerFailedNode float64 `json:"uncachedReadsPerFailedNode"`
}

// incidentPhase is one phase of the incident.
type incidentPhase struct {
	Writes int `json:"writes"`
	Reads  int `json:"reads"`
	// WritesPerFailedNode and ReadsPerFailedNode are by "verb resource".
	WritesPerFailedNode map[string]float64 `json:"writesPerFailedNode"`
	ReadsPerFailedNode  map[string]float64 `json:"readsPerFailedNode"`
	// StatusWritesPerNHC are the NodeHealthCheck status writes per NodeHealthCheck.
	StatusWritesPerNHC float64 `json:"statusWritesPerNHC"`
	// EventWrites are the event creates and patches.
	EventWrites int `json:"eventWrites"`
}

// incidentCosts fills the incident's figures from the outage's and the recovery's requests.
func (r *results) incidentCosts() {
	in := &r.Incident
	in.FailedNodes = r.Outage.Failures
	if in.FailedNodes == 0 {
		return
	}
	uncached := 0
	for _, p := range []struct {
		reqs requestCounts
		out  *incidentPhase
	}{{r.Outage.API.Requests, &in.Failure}, {r.Recovery.API.Requests, &in.Recovery}} {
		w, rd := writes(p.reqs), reads(p.reqs)
		p.out.Writes, p.out.Reads = w.total(), rd.total()
		p.out.WritesPerFailedNode, p.out.ReadsPerFailedNode = w.perNode(in.FailedNodes), rd.perNode(in.FailedNodes)
		p.out.StatusWritesPerNHC = round(float64(w.sum(func(_, resource string) bool { return resource == "nodehealthchecks/status" })) / float64(max(r.Scenario.Pools, 1)))
		p.out.EventWrites = events(w)
		uncached += rd.sum(func(verb, resource string) bool { return !templateGet(verb, resource) && !discovery(verb, resource) })
	}
	in.WritesPerFailedNode = round(float64(in.Failure.Writes+in.Recovery.Writes) / float64(in.FailedNodes))
	in.ReadsPerFailedNode = round(float64(in.Failure.Reads+in.Recovery.Reads) / float64(in.FailedNodes))
	in.UncachedReadsPerFailedNode = round(float64(uncached) / float64(in.FailedNodes))
}

// target is one of issue 15's targets and the run's figure.
type target struct {
	Name     string  `json:"name"`
	Target   string  `json:"target"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
}

func (r *results) targets() {
	rss := max(r.Steady.ManagerRSSMaxMiB, r.OnePercent.ManagerRSSMaxMiB, r.OnePercent.Recovery.ManagerRSSMaxMiB, r.Outage.ManagerRSSMaxMiB, r.Recovery.ManagerRSSMaxMiB)
	uncached := max(r.OnePercent.UncachedReadsPerSecond, r.Outage.UncachedReadsPerSecond, r.Recovery.UncachedReadsPerSecond)
	add := func(name, tgt string, measured float64, met bool) {
		r.Targets = append(r.Targets, target{Name: name, Target: tgt, Measured: measured, Met: met})
	}
	add("CR p99 after the duration expires (1% failing), s", "<= 1", r.OnePercent.CRLatency.P99, r.OnePercent.CRLatency.P99 <= 1)
	add("reconciles from heartbeat-only updates (steady state)", "0", r.Steady.ReconcilesTotal, r.Steady.ReconcilesTotal == 0)
	steadyReqs := float64(r.Steady.API.Requests.total())
	add("API requests from heartbeat-only updates (steady state, without leader election and watches)", "0", steadyReqs, steadyReqs == 0)
	if r.Scenario.Nodes <= 5000 {
		add("manager RSS, MiB (max over the phases)", "<= 80", rss, rss <= 80)
	} else {
		// Issue 36 sets it at 25,000 nodes; growth per node beyond 5,000: bench-compare.
		add("manager RSS, MiB (max over the phases)", "<= 250", rss, rss <= 250)
	}
	// Issue 15's bound (6) holds every request but the event regarding the Node that issue 35 added
	// for each start, which has a bound of its own.
	beside := round(r.OnePercent.RequestsPerFailure - r.OnePercent.NodeEventsPerFailure)
	add("API requests per remediated node incl. events, besides the event regarding the Node (1% failing, until remediated)", "<= 6", beside, beside <= 6)
	add("events regarding the Node per remediated node (issue 35; 1% failing, until remediated)", "<= 1", r.OnePercent.NodeEventsPerFailure, r.OnePercent.NodeEventsPerFailure <= 1)
	add("uncached reads (GET/LIST nodes, leases) per second while remediations run (max of phases 2-4)", "0", uncached, uncached == 0)
	if r.Scenario.Nodes <= 5000 {
		add("status lists every unhealthy node after the deadline, 30% failing, s (max over pools)", "<= 5", r.Outage.StatusListedAfterDeadlineMax, r.Outage.StatusListedAfterDeadlineMax <= 5)
	} else {
		add("status lists every unhealthy node after the deadline, 30% failing, s (max over pools)", "<= 10", r.Outage.StatusListedAfterDeadlineMax, r.Outage.StatusListedAfterDeadlineMax <= 10)
	}
	add("each NodeHealthCheck's status counts its pool after its create, s (max)", "<= 10", r.Start.ConvergedAfterCreate.Max, r.Start.ConvergedAfterCreate.N > 0 && r.Start.ConvergedAfterCreate.Max <= 10)
	if r.RawCreates.N > 0 {
		// Issue 36: every CR of the mass failure within the API server's own write rate: no later
		// after its deadline than a second of detection plus the time a plain client needed for the
		// same creates (a lease and a CR per node).
		bound := 1 + r.RawCreates.Seconds
		add(fmt.Sprintf("every CR after its deadline, 30%% failing, s (max), within 1s + %.2fs for the same creates by a plain client", r.RawCreates.Seconds),
			fmt.Sprintf("<= %.2f", bound), r.Outage.CRLatency.Max, r.Outage.CRLatency.Max <= bound)
	}
	add("CRs in pools over their threshold", "0", float64(r.Outage.CRsInOverThresholdPools), r.Outage.CRsInOverThresholdPools == 0)
	add("CRs created during the recovery of a mass outage", "0", float64(r.Recovery.CRsCreated), r.Recovery.CRsCreated == 0)
	in := r.Incident
	add("API writes per failed node, 30% failing and its recovery", "<= 3.5", in.WritesPerFailedNode, in.WritesPerFailedNode <= 3.5)
	add("API reads per failed node, 30% failing and its recovery (but template GETs and discovery)", "0", in.UncachedReadsPerFailedNode, in.UncachedReadsPerFailedNode == 0)
	if r.Scenario.Nodes <= 1000 {
		// Issue 27 sets it at 1,000 nodes.
		add("every CR after its deadline, 30% failing, s (max)", "<= 1", r.Outage.CRLatency.Max, r.Outage.CRLatency.Max <= 1)
	}
}

func (r *results) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %d nodes, %d NodeHealthChecks, driven=%v, valid=%v %v, spurious Ready losses %d\n",
		r.Scenario.Nodes, r.Scenario.Pools, r.Scenario.Driven, r.Valid, r.Invalid, r.SpuriousReadyLosses)
	for _, t := range r.Targets {
		mark := "MET   "
		if !t.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(&b, "  %s %-100s %10.3f (target %s)\n", mark, t.Name, t.Measured, t.Target)
	}
	return b.String()
}

// write writes the results to dir as scale-<nodes>-<time>.json and scale-<nodes>-latest.json and
// returns the first path.
func (r *results) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("scale-%d-%s.json", r.Scenario.Nodes, r.Started.Format("20060102T150405Z")))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	return path, os.WriteFile(filepath.Join(dir, fmt.Sprintf("scale-%d-latest.json", r.Scenario.Nodes)), data, 0o644)
}

// machineInfo is where a run ran.
type machineInfo struct {
	NProc     int    `json:"nproc"`
	MemoryMiB int    `json:"memoryMiB"`
	GoVersion string `json:"goVersion"`
	Commit    string `json:"commit"`
	CPU       string `json:"cpu"`
}

func machine() machineInfo {
	m := machineInfo{NProc: runtime.NumCPU(), GoVersion: runtime.Version()}
	if out, err := exec.Command("git", "-C", testutil.RepoRoot(), "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(strings.SplitN(string(data), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			m.MemoryMiB = kb / 1024
		}
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return m
}

package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestScaleCompare prints the figures of scale benchmark runs side by side, one column per results
// file, as a Markdown table (the form docs/performance.md uses): `make bench-compare`, whose FILES are
// the results files (globs allowed; default bin/bench/scale-*-latest.json). Skipped unless
// NHC_SCALE_COMPARE names the files.
func TestScaleCompare(t *testing.T) {
	spec := os.Getenv("NHC_SCALE_COMPARE")
	if spec == "" {
		t.Skip("NHC_SCALE_COMPARE names no results files (make bench-compare FILES=...)")
	}
	var files []string
	for _, pattern := range strings.Fields(spec) {
		matched, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		files = append(files, matched...)
	}
	if len(files) == 0 {
		t.Fatalf("no results file matches %q", spec)
	}
	var names []string
	var runs []*results
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := &results{}
		if err := json.Unmarshal(data, r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if r.Incident.FailedNodes == 0 {
			r.incidentCosts() // a run from before issue 27: from its counts
		}
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "scale-"), ".json"))
		runs = append(runs, r)
	}
	fmt.Print(compareTable(names, runs))
	if spread := spreadTable(runs); spread != "" {
		fmt.Print("\n" + spread)
	}
}

// compareTable returns the figures of runs as a Markdown table, a row per figure (the target
// in parentheses) and a column per run, headed by names.
func compareTable(names []string, runs []*results) string {
	rows := []struct {
		figure string
		value  func(r *results) string
	}{
		{"commit", func(r *results) string { return r.Machine.Commit }},
		{"nodes, NodeHealthChecks, driven", func(r *results) string {
			return fmt.Sprintf("%d, %d, %v", r.Scenario.Nodes, r.Scenario.Pools, r.Scenario.Driven)
		}},
		{"steady state; templates list/watch; manager env", func(r *results) string {
			env := strings.Join(r.Scenario.ManagerEnv, " ")
			if env == "" {
				env = "-"
			}
			return fmt.Sprintf("%s; %v; %s", r.Scenario.Steady, r.Scenario.TemplateListWatch, env)
		}},
		{"valid, spurious Ready losses", func(r *results) string {
			if r.Stopped != "" {
				return fmt.Sprintf("%v, %d, stopped during %s", r.Valid, r.SpuriousReadyLosses, r.Stopped)
			}
			return fmt.Sprintf("%v, %d", r.Valid, r.SpuriousReadyLosses)
		}},
		{"start: each status counts its pool after its create, p99 / max s (max ≤ 10)", func(r *results) string {
			if r.Start.ConvergedAfterCreate.N == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f / %.2f", r.Start.ConvergedAfterCreate.P99, r.Start.ConvergedAfterCreate.Max)
		}},
		{"steady: reconciles, API requests (0, 0)", func(r *results) string {
			return fmt.Sprintf("%g, %d", r.Steady.ReconcilesTotal, r.Steady.API.Requests.total())
		}},
		{"RSS max, MiB: steady / 1% / outage / recovery (≤ 80)", func(r *results) string {
			return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f", r.Steady.ManagerRSSMaxMiB, r.OnePercent.ManagerRSSMaxMiB,
				r.Outage.ManagerRSSMaxMiB, r.Recovery.ManagerRSSMaxMiB)
		}},
		{"manager CPU s: steady / 1% / outage / recovery", func(r *results) string {
			return fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", r.Steady.ManagerCPUSeconds, r.OnePercent.ManagerCPUSeconds,
				r.Outage.ManagerCPUSeconds, r.Recovery.ManagerCPUSeconds)
		}},
		{"1%: CR after expiry p50 / p99, s (p99 ≤ 1)", func(r *results) string {
			return fmt.Sprintf("%.2f / %.2f", r.OnePercent.CRLatency.P50, r.OnePercent.CRLatency.P99)
		}},
		{"1%: the operator's first write for a node received after expiry p50 / p99, s; the API server's time per start write p50 / p99, s", func(r *results) string {
			if r.OnePercent.Starts.Detection.N == 0 {
				return "-"
			}
			d, s := r.OnePercent.Starts.Detection, r.OnePercent.Starts.Served
			return fmt.Sprintf("%.2f / %.2f; %.2f / %.2f", d.P50, d.P99, s.P50, s.P99)
		}},
		{"1%: a plain client's time for the same creates (a lease and a CR per node), s", func(r *results) string {
			if r.OnePercentRawCreates.N == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", r.OnePercentRawCreates.Seconds)
		}},
		{"1%: API requests per failure incl. events (≤ 6 besides ≤ 1 regarding the Node)", func(r *results) string {
			if r.OnePercent.NodeEventsPerFailure == 0 {
				return fmt.Sprintf("%g", r.OnePercent.RequestsPerFailure)
			}
			return fmt.Sprintf("%g (%g regarding the Node)", r.OnePercent.RequestsPerFailure, r.OnePercent.NodeEventsPerFailure)
		}},
		{"uncached reads per second while remediating (0)", func(r *results) string {
			return fmt.Sprintf("%g", max(r.OnePercent.UncachedReadsPerSecond, r.Outage.UncachedReadsPerSecond, r.Recovery.UncachedReadsPerSecond))
		}},
		{"30%: CRs created, in over-threshold pools (0)", func(r *results) string {
			return fmt.Sprintf("%d, %d", r.Outage.CRsCreated, r.Outage.CRsInOverThresholdPools)
		}},
		{"30%: CR after expiry p99, s", func(r *results) string { return fmt.Sprintf("%.2f", r.Outage.CRLatency.P99) }},
		{"30%: status lists every failed node, max s after the deadline (≤ 5)", func(r *results) string {
			return fmt.Sprintf("%.2f", r.Outage.StatusListedAfterDeadlineMax)
		}},
		{"30%: every CR after its deadline, max s (≤ 1 at 1,000)", func(r *results) string { return fmt.Sprintf("%.2f", r.Outage.CRLatency.Max) }},
		{"30%: a plain client's time for the same creates (a lease and a CR per node), s (nodes/s)", func(r *results) string {
			if r.RawCreates.N == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f (%.0f/s)", r.RawCreates.Seconds, r.RawCreates.PerSecond)
		}},
		{"30% and recovery: writes per failed node (≤ 3.5)", func(r *results) string { return fmt.Sprintf("%g", r.Incident.WritesPerFailedNode) }},
		{"30% and recovery: reads per failed node, but template GETs and discovery (0)", func(r *results) string {
			return fmt.Sprintf("%g (all reads %g)", r.Incident.UncachedReadsPerFailedNode, r.Incident.ReadsPerFailedNode)
		}},
		{"30%: status writes per NodeHealthCheck, failure / recovery", func(r *results) string {
			return fmt.Sprintf("%g / %g", r.Incident.Failure.StatusWritesPerNHC, r.Incident.Recovery.StatusWritesPerNHC)
		}},
		{"30%: event writes, failure / recovery", func(r *results) string {
			return fmt.Sprintf("%d / %d", r.Incident.Failure.EventWrites, r.Incident.Recovery.EventWrites)
		}},
		{"30%: failure: per failed node, by verb and resource", func(r *results) string { return byKind(r.Incident.Failure) }},
		{"30%: recovery: per failed node, by verb and resource", func(r *results) string { return byKind(r.Incident.Recovery) }},
		{"recovery: CR gone after Ready p99, s", func(r *results) string { return fmt.Sprintf("%.2f", r.Recovery.CRGoneAfterNodeReady.P99) }},
		{"recovery: CRs created while the nodes come back (0)", func(r *results) string { return fmt.Sprintf("%d", r.Recovery.CRsCreated) }},
		{"targets met", func(r *results) string {
			met := 0
			for _, t := range r.Targets {
				if t.Met {
					met++
				}
			}
			return fmt.Sprintf("%d of %d", met, len(r.Targets))
		}},
	}
	var b strings.Builder
	cells := func(first string, rest []string) {
		b.WriteString("| " + first + " | " + strings.Join(rest, " | ") + " |\n")
	}
	cells("figure (target)", names)
	separators := make([]string, len(names))
	for i := range separators {
		separators[i] = "---"
	}
	cells("---", separators)
	for _, row := range rows {
		values := make([]string, len(runs))
		for i, r := range runs {
			values[i] = row.value(r)
		}
		cells(row.figure, values)
	}
	growth := make([]string, len(runs))
	for i, r := range runs {
		growth[i] = "-"
		if i > 0 && r.Scenario.Nodes > runs[i-1].Scenario.Nodes {
			growth[i] = fmt.Sprintf("%.2f", rssGrowthKiB(runs[i-1], r))
		}
	}
	cells("manager RSS growth per node over the column before, KiB (≤ 5 beyond 5,000)", growth)
	return b.String()
}

// maxRSS is a run's manager RSS, the largest over its phases, in MiB.
func maxRSS(r *results) float64 {
	return max(r.Steady.ManagerRSSMaxMiB, r.OnePercent.ManagerRSSMaxMiB, r.OnePercent.Recovery.ManagerRSSMaxMiB, r.Outage.ManagerRSSMaxMiB, r.Recovery.ManagerRSSMaxMiB)
}

// rssGrowthKiB is how much more memory b's manager took than a's, per node more, in KiB.
func rssGrowthKiB(a, b *results) float64 {
	return round((maxRSS(b) - maxRSS(a)) * 1024 / float64(b.Scenario.Nodes-a.Scenario.Nodes))
}

// spreadFigures are the figures spreadTable summarises over repeated runs.
var spreadFigures = []struct {
	figure string
	value  func(r *results) float64
}{
	{"1%: CR after expiry p99, s", func(r *results) float64 { return r.OnePercent.CRLatency.P99 }},
	{"30%: CR after expiry p99, s", func(r *results) float64 { return r.Outage.CRLatency.P99 }},
	{"30%: every CR after its deadline, max s", func(r *results) float64 { return r.Outage.CRLatency.Max }},
	{"30%: status lists every failed node, max s after the deadline", func(r *results) float64 { return r.Outage.StatusListedAfterDeadlineMax }},
	{"recovery: CR gone after Ready p99, s", func(r *results) float64 { return r.Recovery.CRGoneAfterNodeReady.P99 }},
	{"recovery: CR gone after Ready max, s", func(r *results) float64 { return r.Recovery.CRGoneAfterNodeReady.Max }},
	{"30% and recovery: writes per failed node", func(r *results) float64 { return r.Incident.WritesPerFailedNode }},
	{"1%: API requests per failure", func(r *results) float64 { return r.OnePercent.RequestsPerFailure }},
	{"manager RSS max, MiB", maxRSS},
	{"manager CPU, s (all phases)", func(r *results) float64 {
		return r.Steady.ManagerCPUSeconds + r.OnePercent.ManagerCPUSeconds + r.OnePercent.Recovery.ManagerCPUSeconds + r.Outage.ManagerCPUSeconds + r.Recovery.ManagerCPUSeconds
	}},
	{"steady: reconciles + API requests", func(r *results) float64 {
		return r.Steady.ReconcilesTotal + float64(r.Steady.API.Requests.total())
	}},
}

// spreadTable returns, for valid runs repeated at one commit and size (at least two of them), each
// spreadFigure as "min / median / max", a column per commit and size; "" when nothing repeats. An
// invalid run (a node lost Ready unasked, or the run broke) is left out.
func spreadTable(runs []*results) string {
	type group struct {
		commit string
		nodes  int
	}
	byGroup := map[group][]*results{}
	var order []group
	for _, r := range runs {
		if !r.Valid {
			continue
		}
		g := group{r.Machine.Commit, r.Scenario.Nodes}
		if byGroup[g] == nil {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], r)
	}
	var heads []group
	for _, g := range order {
		if len(byGroup[g]) > 1 {
			heads = append(heads, g)
		}
	}
	if len(heads) == 0 {
		return ""
	}
	sort.SliceStable(heads, func(i, j int) bool { return heads[i].nodes < heads[j].nodes })
	var b strings.Builder
	cells := func(first string, rest []string) {
		b.WriteString("| " + first + " | " + strings.Join(rest, " | ") + " |\n")
	}
	names := make([]string, len(heads))
	separators := make([]string, len(heads))
	for i, g := range heads {
		names[i] = fmt.Sprintf("%d nodes, %s (%d valid runs)", g.nodes, g.commit, len(byGroup[g]))
		separators[i] = "---"
	}
	cells("figure: min / median / max", names)
	cells("---", separators)
	for _, f := range spreadFigures {
		values := make([]string, len(heads))
		for i, g := range heads {
			var vs []float64
			for _, r := range byGroup[g] {
				vs = append(vs, f.value(r))
			}
			sort.Float64s(vs)
			// The median of an even count: the lower middle, a value one run measured.
			values[i] = fmt.Sprintf("%g / %g / %g", round(vs[0]), round(vs[(len(vs)-1)/2]), round(vs[len(vs)-1]))
		}
		cells(f.figure, values)
	}
	return b.String()
}

// byKind lists a phase's writes and reads per failed node, by verb and resource, in one cell.
func byKind(p incidentPhase) string {
	var parts []string
	for _, m := range []map[string]float64{p.WritesPerFailedNode, p.ReadsPerFailedNode} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %g", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func TestCompareTable(t *testing.T) {
	a, b := &results{Valid: true}, &results{}
	a.Machine.Commit, b.Machine.Commit = "aaaaaaa", "bbbbbbb"
	a.Recovery.ManagerRSSMaxMiB, b.Recovery.ManagerRSSMaxMiB = 75.81, 79.5
	a.OnePercent.RequestsPerFailure, b.OnePercent.RequestsPerFailure = 6, 7.04
	b.OnePercent.NodeEventsPerFailure = 1
	a.Outage.UncachedReadsPerSecond = 0.5
	a.Targets = []target{{Met: true}, {Met: false}}
	lines := strings.Split(strings.TrimSuffix(compareTable([]string{"5000-a", "5000-b"}, []*results{a, b}), "\n"), "\n")
	want := map[string]string{
		"| figure (target) |": "| figure (target) | 5000-a | 5000-b |",
		"| --- |":             "| --- | --- | --- |",
		"| commit |":          "| commit | aaaaaaa | bbbbbbb |",
		"| valid, ":           "| valid, spurious Ready losses | true, 0 | false, 0 |",
		"| RSS max":           "| RSS max, MiB: steady / 1% / outage / recovery (≤ 80) | 0.0 / 0.0 / 0.0 / 75.8 | 0.0 / 0.0 / 0.0 / 79.5 |",
		"| 1%: API requests":  "| 1%: API requests per failure incl. events (≤ 6 besides ≤ 1 regarding the Node) | 6 | 7.04 (1 regarding the Node) |",
		"| uncached reads":    "| uncached reads per second while remediating (0) | 0.5 | 0 |",
		"| targets met |":     "| targets met | 1 of 2 | 0 of 0 |",
	}
	for prefix, line := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				found = true
				if l != line {
					t.Errorf("got  %s\nwant %s", l, line)
				}
			}
		}
		if !found {
			t.Errorf("no row %q in\n%s", prefix, strings.Join(lines, "\n"))
		}
	}
	for _, l := range lines {
		if got := strings.Count(l, " | "); got != 2 {
			t.Errorf("%d inner separators, want 2 (a figure and 2 runs): %s", got, l)
		}
	}
}

func TestSpreadTable(t *testing.T) {
	run := func(commit string, nodes int, p99 float64) *results {
		r := &results{Valid: true}
		r.Machine.Commit, r.Scenario.Nodes, r.Outage.CRLatency.P99 = commit, nodes, p99
		return r
	}
	if got := spreadTable([]*results{run("a", 1000, 1), run("b", 1000, 2)}); got != "" {
		t.Errorf("no repeated run: want no table, got\n%s", got)
	}
	invalid := run("a", 1000, 99)
	invalid.Valid = false
	got := spreadTable([]*results{run("a", 5000, 3), run("a", 1000, 0.5), run("a", 5000, 1), run("a", 1000, 0.7), run("a", 5000, 2), run("b", 1000, 9), invalid})
	want := []string{
		"| figure: min / median / max | 1000 nodes, a (2 valid runs) | 5000 nodes, a (3 valid runs) |",
		"| 30%: CR after expiry p99, s | 0.5 / 0.5 / 0.7 | 1 / 2 / 3 |",
	}
	for _, line := range want {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("no line %q in\n%s", line, got)
		}
	}
}

func TestIncidentCosts(t *testing.T) {
	r := &results{}
	r.Scenario.Pools = 2
	r.Outage.Failures = 4
	r.Outage.API.Requests = requestCounts{"create leases": 4, "create testremediations": 4, "update nodehealthchecks/status": 4,
		"create events": 3, "patch events": 1, "get testremediationtemplates": 2, "get nonResource /apis/x": 1}
	r.Recovery.API.Requests = requestCounts{"delete testremediations": 4, "delete leases": 4, "update nodehealthchecks/status": 2, "list nodes": 1}
	r.incidentCosts()
	in := r.Incident
	if in.Failure.Writes != 16 || in.Recovery.Writes != 10 || in.WritesPerFailedNode != 6.5 {
		t.Errorf("writes %d, %d, per failed node %g; want 16, 10, 6.5", in.Failure.Writes, in.Recovery.Writes, in.WritesPerFailedNode)
	}
	if in.ReadsPerFailedNode != 1 || in.UncachedReadsPerFailedNode != 0.25 {
		t.Errorf("reads per failed node %g, but templates and discovery %g; want 1, 0.25", in.ReadsPerFailedNode, in.UncachedReadsPerFailedNode)
	}
	if in.Failure.StatusWritesPerNHC != 2 || in.Recovery.StatusWritesPerNHC != 1 || in.Failure.EventWrites != 4 {
		t.Errorf("status writes per NodeHealthCheck %g, %g, event writes %d; want 2, 1, 4", in.Failure.StatusWritesPerNHC, in.Recovery.StatusWritesPerNHC, in.Failure.EventWrites)
	}
	if got, want := byKind(in.Recovery), "delete leases 1, delete testremediations 1, update nodehealthchecks/status 0.5, list nodes 0.25"; got != want {
		t.Errorf("byKind: got %q, want %q", got, want)
	}
}

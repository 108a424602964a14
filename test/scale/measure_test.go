package scale

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// reconciles scrapes the manager's plain-HTTP metrics endpoint and returns
// controller_runtime_reconcile_total summed by controller.
func reconciles(ctx context.Context, metricsAddr string) (map[string]float64, error) {
	return scrape(ctx, metricsAddr, "controller_runtime_reconcile_total", "controller")
}

// decisions scrapes how many decisions the manager's remediation controller has carried out for
// each NodeHealthCheck (remediation.MetricDecisions), by name.
func decisions(ctx context.Context, metricsAddr string) (map[string]float64, error) {
	return scrape(ctx, metricsAddr, remediation.MetricDecisions, "nhc")
}

// scrape scrapes the manager's plain-HTTP metrics endpoint and returns the counter metric summed
// by the label's value.
func scrape(ctx context.Context, metricsAddr, metric, label string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, metric+"{"), "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		out[labelValue(labels, label)] += v
	}
	return out, sc.Err()
}

func labelValue(labels, name string) string {
	for _, l := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(l, "="); ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func diff(after, before map[string]float64) (map[string]float64, float64) {
	out, total := map[string]float64{}, 0.0
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
			total += d
		}
	}
	return out, total
}

// procStats reads a process's CPU seconds (user+system) from /proc/<pid>/stat and its RSS from
// /proc/<pid>/status.
func procStats(pid int) (cpuSeconds float64, rssMiB float64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces) in parentheses; utime and stime are
	// fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			rssMiB = kb / 1024
		}
	}
	return (utime + stime) / 100, rssMiB, nil
}

// rssSampler records the largest RSS of a process, sampled every second, since the last reset.
type rssSampler struct {
	mu  sync.Mutex
	max float64
}

func (r *rssSampler) run(ctx context.Context, pid int) {
	for {
		if _, rss, err := procStats(pid); err == nil {
			r.mu.Lock()
			r.max = math.Max(r.max, rss)
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// take returns the largest RSS since the last take and starts again from the current value.
func (r *rssSampler) take(pid int) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.max
	if _, rss, err := procStats(pid); err == nil {
		m = math.Max(m, rss)
		r.max = rss
	}
	return m
}

// requestCounts are API requests by key ("verb resource[/subresource]").
type requestCounts map[string]int

func (r requestCounts) total() int { return r.sum(func(_, _ string) bool { return true }) }

// auditCounts are a window's API requests of the manager, from the audit log.
type auditCounts struct {
	// Requests are the requests other than watches and leader election, by "verb resource".
	Requests requestCounts `json:"requests"`
	// Watches are the watches started, by resource.
	Watches requestCounts `json:"watches"`
	// LeaderElection are the leader election Lease's requests, by verb.
	LeaderElection requestCounts `json:"leaderElection"`
	// NodeEvents are the writes of events regarding a Node (issue 35's), by verb: also counted in
	// Requests.
	NodeEvents requestCounts `json:"nodeEvents,omitempty"`
}

// count buckets the manager's audit events between from and to. An event write regards a Node when
// isNode says so of the name it regards: the one its own name starts with (client-go's event
// recorders name an event "<regarding>.<time in hex>").
func count(events []localcluster.AuditEvent, from, to time.Time, isNode func(name string) bool) auditCounts {
	c := auditCounts{Requests: requestCounts{}, Watches: requestCounts{}, LeaderElection: requestCounts{}, NodeEvents: requestCounts{}}
	for _, e := range events {
		if e.StageTimestamp.Before(from) || !e.StageTimestamp.Before(to) {
			continue
		}
		resource := "nonResource " + e.RequestURI
		if e.ObjectRef != nil {
			resource = e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				resource += "/" + e.ObjectRef.Subresource
			}
		}
		switch {
		case e.Verb == "watch":
			if e.Stage == "ResponseStarted" {
				c.Watches[resource]++
			}
		case e.Stage != "ResponseComplete":
		case e.ObjectRef != nil && e.ObjectRef.Resource == "leases" && e.ObjectRef.Namespace == localcluster.ChartNamespace:
			c.LeaderElection[e.Verb]++
		default:
			c.Requests[e.Verb+" "+resource]++
			if resource == "events" && isWrite(e.Verb) {
				if regarding, _, ok := cutLast(e.ObjectRef.Name, "."); ok && isNode(regarding) {
					c.NodeEvents[e.Verb]++
				}
			}
		}
	}
	return c
}

// cutLast slices s around the last instance of sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// uncachedReads are the GETs and LISTs of nodes and leases among the requests.
func uncachedReads(r requestCounts) int {
	return r.sum(func(verb, resource string) bool {
		return (verb == "get" || verb == "list") && (resource == "nodes" || resource == "leases")
	})
}

// isWrite tells the verbs that write.
func isWrite(verb string) bool { return verb != "get" && verb != "list" && verb != "watch" }

// writes are the requests that write, by "verb resource".
func writes(r requestCounts) requestCounts {
	return r.filter(func(verb, _ string) bool { return isWrite(verb) })
}

// reads are the GETs and LISTs, by "verb resource".
func reads(r requestCounts) requestCounts {
	return r.filter(func(verb, _ string) bool { return !isWrite(verb) })
}

// templateGet tells a GET of a remediation template: the aggregation contract lets the operator
// only get them, so it reads them around the cache (issue 15's known floor, docs/performance.md).
func templateGet(verb, resource string) bool {
	return verb == "get" && strings.HasSuffix(resource, "templates")
}

// discovery tells a discovery request (the RESTMapper asking for a group it does not know).
func discovery(_, resource string) bool { return strings.HasPrefix(resource, "nonResource ") }

// filter returns the requests whose verb and resource match.
func (r requestCounts) filter(match func(verb, resource string) bool) requestCounts {
	out := requestCounts{}
	for k, v := range r {
		if verb, resource, _ := strings.Cut(k, " "); match(verb, resource) {
			out[k] = v
		}
	}
	return out
}

// perNode divides each count by n, rounded.
func (r requestCounts) perNode(n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range r {
		out[k] = round(float64(v) / float64(n))
	}
	return out
}

// events are the events written among the requests.
func events(r requestCounts) int {
	return r.sum(func(_, resource string) bool { return resource == "events" })
}

// sum adds up the requests whose verb and resource match.
func (r requestCounts) sum(match func(verb, resource string) bool) int {
	n := 0
	for k, v := range r {
		if verb, resource, _ := strings.Cut(k, " "); match(verb, resource) {
			n += v
		}
	}
	return n
}

// latencies summarises durations in seconds.
type latencies struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Seconds"`
	P99 float64 `json:"p99Seconds"`
	Max float64 `json:"maxSeconds"`
	Min float64 `json:"minSeconds"`
}

func summarise(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return round(ds[max(i, 0)].Seconds())
	}
	return latencies{N: len(ds), P50: q(0.5), P99: q(0.99), Max: round(ds[len(ds)-1].Seconds()), Min: round(ds[0].Seconds())}
}

func round(s float64) float64 { return math.Round(s*1000) / 1000 }

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting %s for %s: %w", timeout, what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// startTimings splits the time from a failure's deadline to its CR: when the API server received
// the manager's first write for the node (its lease, taken before the CR is created), and how long
// the API server took for each start write (lease and CR creates) it answered in the window.
type startTimings struct {
	// Detection: from each node's deadline to the API server receiving the manager's first write
	// of the node's lease: the operator's own part of the CR's latency.
	Detection latencies `json:"detection"`
	// Served: from received to answered, for the manager's creates of leases and remediation CRs.
	Served latencies `json:"served"`
}

// splitStarts returns the startTimings of the audit log's events between from and to, for nodes
// whose deadlines are given and whose leases are named by leaseName in leaseNamespace.
func splitStarts(events []localcluster.AuditEvent, from, to time.Time, deadlines map[string]time.Time,
	leaseNamespace string, leaseName func(node string) string) startTimings {
	nodeOf := make(map[string]string, len(deadlines))
	for n := range deadlines {
		nodeOf[leaseName(n)] = n
	}
	first := map[string]time.Time{}
	var served []time.Duration
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || !isWrite(e.Verb) ||
			e.StageTimestamp.Before(from) || !e.StageTimestamp.Before(to) {
			continue
		}
		lease := e.ObjectRef.Resource == "leases" && e.ObjectRef.Namespace == leaseNamespace
		if e.Verb == "create" && (lease || strings.HasSuffix(e.ObjectRef.Resource, "remediations")) {
			served = append(served, e.StageTimestamp.Sub(e.RequestReceivedTimestamp))
		}
		if n, ok := nodeOf[e.ObjectRef.Name]; ok && lease {
			if at, seen := first[n]; !seen || e.RequestReceivedTimestamp.Before(at) {
				first[n] = e.RequestReceivedTimestamp
			}
		}
	}
	var detection []time.Duration
	for n, at := range first {
		detection = append(detection, at.Sub(deadlines[n]))
	}
	return startTimings{Detection: summarise(detection), Served: summarise(served)}
}

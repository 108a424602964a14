package hostile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// endpoints are a manager's plain-HTTP metrics endpoint and its pprof endpoint.
type endpoints struct {
	metrics, pprof string
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

func (e endpoints) get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

// scrape returns the manager's metrics.
func (e endpoints) scrape(ctx context.Context) string {
	GinkgoHelper()
	body, err := e.get(ctx, "http://"+e.metrics+"/metrics")
	Expect(err).NotTo(HaveOccurred(), "scraping the manager's metrics")
	return body
}

// metric returns the sum of the series of the family whose labels contain every one of labels
// (name="value" pairs), 0 when there is none.
func metric(body, family string, labels ...string) float64 {
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, family)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(rest, l)
		}
		if !match {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// memory is a measurement of the manager's memory.
type memory struct {
	// HeapInuse is go_memstats_heap_inuse_bytes right after a forced collection: what the manager
	// keeps, without the garbage that GOGC lets pile up between collections.
	HeapInuse float64
	// RSS is process_resident_memory_bytes at the same moment.
	RSS float64
}

func (m memory) String() string {
	return fmt.Sprintf("heap in use %.1f MiB, RSS %.1f MiB", mib(m.HeapInuse), mib(m.RSS))
}

// measure forces a garbage collection in the manager (pprof's heap profile with gc=1 runs one
// before it writes) and reads its heap in use and RSS from its metrics.
func (e endpoints) measure(ctx context.Context) memory {
	GinkgoHelper()
	_, err := e.get(ctx, "http://"+e.pprof+"/debug/pprof/heap?gc=1")
	Expect(err).NotTo(HaveOccurred(), "forcing a garbage collection in the manager")
	body := e.scrape(ctx)
	return memory{HeapInuse: metric(body, "go_memstats_heap_inuse_bytes"), RSS: metric(body, "process_resident_memory_bytes")}
}

// quiesce returns once the manager has caught up with what was written so far: the remediation
// controller has decided each NodeHealthCheck in a reconcile that began after the call
// (testutil.DecidedAfter on remediation.MetricDecisions), and no controller has work queued.
func (e endpoints) quiesce(ctx context.Context, nhcs ...*remediationv1alpha1.NodeHealthCheck) {
	GinkgoHelper()
	for _, nhc := range nhcs {
		touch := func() {
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"test.medik8s.io/touched":"%d"}}}`, time.Now().UnixNano())
			Expect(k8s.Patch(ctx, nhc.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		}
		count := func() float64 {
			return metric(e.scrape(ctx), remediation.MetricDecisions, fmt.Sprintf(`nhc=%q`, nhc.Name))
		}
		testutil.DecidedAfter(time.Minute, touch, count, "the remediation controller decided NodeHealthCheck %s after the attack paused", nhc.Name)
	}
	Eventually(func() float64 { return metric(e.scrape(ctx), "workqueue_depth") }).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).
		Should(BeZero(), "no controller of the manager has work queued")
}

// rssPeak samples a process's resident memory every second and keeps the largest.
type rssPeak struct {
	mu   sync.Mutex
	peak float64
}

func (r *rssPeak) run(ctx context.Context, pid int) {
	for {
		if rss, err := residentBytes(pid); err == nil {
			r.mu.Lock()
			r.peak = max(r.peak, rss)
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (r *rssPeak) get() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak
}

// residentBytes reads a process's RSS from /proc/<pid>/status.
func residentBytes(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// eventWriteErrors are what client-go's events.k8s.io broadcaster logs when the API server refuses
// an event, the event cannot be built, or it gave up retrying ("may retry after sleeping", a
// transient error, is not one).
var eventWriteErrors = regexp.MustCompile(`Server rejected event|Unable to construct event|retry limit exceeded`)

// logScan reads a manager's output: it counts the lines that report an event write error, keeps
// the first of them and the last lines (each cut to lineKeep bytes), and copies everything to
// full when set. Lines may be megabytes long (an event quoted whole).
type logScan struct {
	mu      sync.Mutex
	full    io.Writer
	partial []byte
	tail    []string
	// eventErrors counts event write errors; firstEventError is the first, cut.
	eventErrors     int
	firstEventError string
	lines           int
}

// lineKeep is how much of a line the scan keeps: the logger's prefix and message fit in it.
const lineKeep = 400

// tailLines is how many of the last lines a failure prints.
const tailLines = 40

func (l *logScan) Write(p []byte) (int, error) {
	n := len(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.full != nil {
		_, _ = l.full.Write(p)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := lineKeep - len(l.partial); room > 0 {
			l.partial = append(l.partial, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		l.line(string(l.partial))
		l.partial = l.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *logScan) line(s string) {
	l.lines++
	if eventWriteErrors.MatchString(s) {
		if l.eventErrors == 0 {
			l.firstEventError = s
		}
		l.eventErrors++
	}
	l.tail = append(l.tail, s)
	if len(l.tail) > tailLines {
		l.tail = l.tail[1:]
	}
}

func (l *logScan) report() (eventErrors int, first, tail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.eventErrors, l.firstEventError, strings.Join(l.tail, "\n")
}

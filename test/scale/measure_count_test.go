package scale

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// TestCountTellsEventsRegardingANode: the writes of events regarding a Node (named after the node,
// as client-go's recorders name them) are counted apart from those regarding a NodeHealthCheck, and
// in the requests too.
func TestCountTellsEventsRegardingANode(t *testing.T) {
	at := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	lines := []string{
		// An event regarding a pool's NodeHealthCheck, one regarding a node, a patch of a series
		// regarding the node, and the CR create: all but the first regard the node or its CR.
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"events","namespace":"default","name":"scale-p29.18ef10c2152a6095","apiGroup":"events.k8s.io"},"stageTimestamp":"2026-12-07T20:00:01Z"}`,
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"events","namespace":"default","name":"scale-p29-000.18ef10c2152a7d1a","apiGroup":"events.k8s.io"},"stageTimestamp":"2026-12-07T20:00:01Z"}`,
		`{"stage":"ResponseComplete","verb":"patch","objectRef":{"resource":"events","namespace":"default","name":"scale-p29-000.18ef10c2152a7d1a","apiGroup":"events.k8s.io"},"stageTimestamp":"2026-12-07T20:00:02Z"}`,
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"testremediations","namespace":"default","name":"scale-p29-000"},"stageTimestamp":"2026-12-07T20:00:01Z"}`,
		// Outside the window.
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"events","namespace":"default","name":"scale-p30-001.18ef10c2152a7d1b","apiGroup":"events.k8s.io"},"stageTimestamp":"2026-12-07T20:00:09Z"}`,
	}
	log := auditEvents(t, lines)
	c := count(log, at, at.Add(5*time.Second), isNodeName)
	if got := c.NodeEvents.total(); got != 2 {
		t.Errorf("event writes regarding a node: %d (%v), want 2", got, c.NodeEvents)
	}
	if got := events(c.Requests); got != 3 {
		t.Errorf("event writes: %d (%v), want 3", got, c.Requests)
	}
	if got := c.Requests.total(); got != 4 {
		t.Errorf("requests: %d (%v), want 4", got, c.Requests)
	}
}

func TestIsNodeName(t *testing.T) {
	for name, want := range map[string]bool{nodeName(0, 0): true, nodeName(249, 99): true, "scale-" + poolName(3): false, "scale-p03-": false, "other-p03-001": false} {
		if got := isNodeName(name); got != want {
			t.Errorf("isNodeName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestSplitStartsTellsTheOperatorsPartFromTheAPIServers: a failure's detection is its deadline to
// the API server receiving the first write of its node's lease; the API server's part is each
// lease and CR create's time from received to answered. Other writes and nodes are not counted.
func TestSplitStartsTellsTheOperatorsPartFromTheAPIServers(t *testing.T) {
	at := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	lines := []string{
		// Node a: its lease created 0.3s after the deadline (answered 0.1s later), then updated.
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"leases","namespace":"medik8s-leases","name":"node-a"},"requestReceivedTimestamp":"2026-12-07T20:00:01.3Z","stageTimestamp":"2026-12-07T20:00:01.4Z"}`,
		`{"stage":"ResponseComplete","verb":"update","objectRef":{"resource":"leases","namespace":"medik8s-leases","name":"node-a"},"requestReceivedTimestamp":"2026-12-07T20:00:03Z","stageTimestamp":"2026-12-07T20:00:03.1Z"}`,
		// Its CR, generated name, answered 0.5s after received.
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"testremediations","namespace":"default"},"requestReceivedTimestamp":"2026-12-07T20:00:01.5Z","stageTimestamp":"2026-12-07T20:00:02Z"}`,
		// Node b: its lease received 0.8s after the deadline.
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"leases","namespace":"medik8s-leases","name":"node-b"},"requestReceivedTimestamp":"2026-12-07T20:00:01.8Z","stageTimestamp":"2026-12-07T20:00:02.1Z"}`,
		// Not a start write: an event, the leader election lease, a lease read.
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"events","namespace":"default","name":"node-a.18ef10c2152a7d1a"},"requestReceivedTimestamp":"2026-12-07T20:00:01Z","stageTimestamp":"2026-12-07T20:00:05Z"}`,
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"leases","namespace":"node-healthcheck","name":"node-a"},"requestReceivedTimestamp":"2026-12-07T20:00:00.5Z","stageTimestamp":"2026-12-07T20:00:05Z"}`,
		`{"stage":"ResponseComplete","verb":"get","objectRef":{"resource":"leases","namespace":"medik8s-leases","name":"node-b"},"requestReceivedTimestamp":"2026-12-07T20:00:01.1Z","stageTimestamp":"2026-12-07T20:00:01.2Z"}`,
		// Outside the window.
		`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"leases","namespace":"medik8s-leases","name":"node-b"},"requestReceivedTimestamp":"2026-12-07T20:00:09Z","stageTimestamp":"2026-12-07T20:00:09.9Z"}`,
	}
	log := auditEvents(t, lines)
	deadline := at.Add(time.Second)
	got := splitStarts(log, at, at.Add(5*time.Second), map[string]time.Time{"a": deadline, "b": deadline}, "medik8s-leases",
		func(node string) string { return "node-" + node })
	want := startTimings{
		Detection: latencies{N: 2, Min: 0.3, P50: 0.3, P99: 0.8, Max: 0.8},
		Served:    latencies{N: 3, Min: 0.1, P50: 0.3, P99: 0.5, Max: 0.5},
	}
	if got != want {
		t.Errorf("splitStarts = %+v, want %+v", got, want)
	}
}

// auditEvents parses audit log lines.
func auditEvents(t *testing.T, lines []string) []localcluster.AuditEvent {
	t.Helper()
	var log []localcluster.AuditEvent
	for _, l := range lines {
		var e localcluster.AuditEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		log = append(log, e)
	}
	return log
}

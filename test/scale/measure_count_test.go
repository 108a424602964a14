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
	var log []localcluster.AuditEvent
	for _, l := range lines {
		var e localcluster.AuditEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		log = append(log, e)
	}
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

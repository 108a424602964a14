package eventseries

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// recorded is one event the inner recorder got.
type recorded struct {
	regarding, related, eventType, reason, action, note string
}

type capture struct {
	got []recorded
	// versions are the resourceVersions of the regarding objects.
	versions []string
}

func (c *capture) Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	c.versions = append(c.versions, regarding.(metav1.Object).GetResourceVersion())
	r := recorded{regarding: regarding.(metav1.Object).GetName(), eventType: eventtype, reason: reason, action: action, note: fmt.Sprintf(note, args...)}
	if related != nil {
		r.related = related.(metav1.Object).GetName()
	}
	c.got = append(c.got, r)
}

func node(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func TestBurstsMergeIntoOneSeries(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner := &capture{}
	r := &Recorder{Inner: inner, Burst: 2, Window: time.Minute, Clock: clock}
	pool := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "pool", UID: "u1"}}
	other := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "u2"}}
	created := func(n string) {
		r.Eventf(pool, node(n), corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationCreated, "Create", "Created for node %s", n)
	}

	// An isolated event, and a second one of the burst: as they are.
	created("a")
	clock.SetTime(clock.Now().Add(59 * time.Second))
	created("b")
	// Another reason, another object, another type: bursts of their own.
	r.Eventf(pool, node("c"), corev1.EventTypeNormal, remediationv1alpha1.EventReasonDetectedUnhealthy, "Detect", "Detected %s", "c")
	r.Eventf(other, node("c"), corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationCreated, "Create", "Created for node %s", "c")
	r.Eventf(pool, node("c"), corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationCreated, "Create", "Refused for node %s", "c")
	// The third similar event within the window of the previous one: combined, without the node,
	// under the first combined action, whatever its own.
	created("c")
	r.Eventf(pool, node("d"), corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationCreated, "Create-again", "Created for node %s", "d")
	// A minute of quiet ends the burst.
	clock.SetTime(clock.Now().Add(time.Minute))
	created("e")

	want := []recorded{
		{"pool", "a", "Normal", "RemediationCreated", "Create", "Created for node a"},
		{"pool", "b", "Normal", "RemediationCreated", "Create", "Created for node b"},
		{"pool", "c", "Normal", "DetectedUnhealthy", "Detect", "Detected c"},
		{"other", "c", "Normal", "RemediationCreated", "Create", "Created for node c"},
		{"pool", "c", "Warning", "RemediationCreated", "Create", "Refused for node c"},
		{"pool", "", "Normal", "RemediationCreated", "Create", CombinedPrefix + "Created for node c"},
		{"pool", "", "Normal", "RemediationCreated", "Create", CombinedPrefix + "Created for node d"},
		{"pool", "e", "Normal", "RemediationCreated", "Create", "Created for node e"},
	}
	if len(inner.got) != len(want) {
		t.Fatalf("recorded %d events, want %d:\n%v", len(inner.got), len(want), inner.got)
	}
	for i := range want {
		if inner.got[i] != want[i] {
			t.Errorf("event %d: got %+v, want %+v", i, inner.got[i], want[i])
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bursts) != 1 {
		t.Errorf("%d bursts kept after a quiet minute, want 1 (the new one)", len(r.bursts))
	}
}

func TestCombinedEventsRegardTheObjectWithoutItsVersion(t *testing.T) {
	inner := &capture{}
	r := &Recorder{Inner: inner, Burst: 1, Window: time.Minute}
	pool := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "pool", UID: "u1", ResourceVersion: "7"}}
	r.Eventf(pool, node("a"), corev1.EventTypeNormal, remediationv1alpha1.EventReasonDetectedUnhealthy, "Detect", "Detected a")
	pool.ResourceVersion = "8" // a status write
	r.Eventf(pool, node("b"), corev1.EventTypeNormal, remediationv1alpha1.EventReasonDetectedUnhealthy, "Detect", "Detected b")
	if want := []string{"7", ""}; len(inner.versions) != 2 || inner.versions[0] != want[0] || inner.versions[1] != want[1] {
		t.Fatalf("regarding versions %q, want %q: the combined event's would start a new series after each status write", inner.versions, want)
	}
	if pool.ResourceVersion != "8" {
		t.Fatalf("the caller's object changed: resourceVersion %q", pool.ResourceVersion)
	}
}

// Mirrorf records the first Mirror events of a burst also regarding their related object (a node's
// own events show its remediation), and no more: a mass failure costs Mirror such events per burst.
func TestMirrorfRegardsTheRelatedObjectForTheFirstOfABurst(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner := &capture{}
	r := &Recorder{Inner: inner, Burst: 3, Window: time.Minute, Mirror: 2, Clock: clock}
	pool := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "pool", UID: "u1"}}
	created := func(n string) {
		r.Mirrorf(pool, node(n), corev1.EventTypeNormal, remediationv1alpha1.EventReasonRemediationCreated, "Create", "Created for node %s", n)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		created(n)
	}
	// A minute of quiet: an isolated event again, mirrored.
	clock.SetTime(clock.Now().Add(time.Minute))
	created("e")
	var onNodes []string
	for _, ev := range inner.got {
		if ev.regarding != "pool" {
			if ev.related != "pool" || ev.reason != remediationv1alpha1.EventReasonRemediationCreated || ev.note != "Created for node "+ev.regarding {
				t.Fatalf("mirrored event %+v: want the same event, regarding the node and related to the NodeHealthCheck", ev)
			}
			onNodes = append(onNodes, ev.regarding)
		}
	}
	if fmt.Sprint(onNodes) != "[a b e]" {
		t.Fatalf("events regarding nodes: %v, want the first 2 of the burst and the isolated one", onNodes)
	}
	if len(inner.got) != 5+3 {
		t.Fatalf("%d events recorded, want 5 regarding the NodeHealthCheck and 3 regarding nodes: %+v", len(inner.got), inner.got)
	}
}

package upgrade

import (
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestGateStartsUnknownAndBlocks(t *testing.T) {
	g := NewGate(false)
	v := g.Verdict()
	if v.Known || !v.Blocking(0, t0) || !strings.Contains(v.Pending, "not been discovered") {
		t.Fatalf("a new gate must be unknown and block: %+v", v)
	}
	g.Discovered()
	if v := g.Verdict(); !v.Known || v.Blocking(0, t0) {
		t.Fatalf("discovered without detectors: known and open, got %+v", v)
	}
}

func TestGateIsUnknownUntilEveryDetectorReported(t *testing.T) {
	g := NewGate(false)
	g.Expect(DetectorClusterVersion)
	g.Expect(DetectorInfrastructure)
	g.Discovered()
	g.ReportError(DetectorClusterVersion, errors.New("clusterversions is forbidden"))
	v := g.Verdict()
	if v.Known || !strings.Contains(v.Pending, "clusterversion: clusterversions is forbidden") || !strings.Contains(v.Pending, "infrastructure: not evaluated yet") {
		t.Fatalf("pending detectors and their errors must be named: %+v", v)
	}
	g.Report(DetectorClusterVersion, []Signal{cv}, t0)
	if v := g.Verdict(); v.Known {
		t.Fatalf("infrastructure has not reported: %+v", v)
	}
	g.SetOpenShift(true)
	v = g.Verdict()
	if !v.Known || !v.OpenShift || len(v.Closed) != 1 || v.Closed[0].Message != cv.Message {
		t.Fatalf("known, hosted, closed by the ClusterVersion: %+v", v)
	}
	// An error after a report keeps the last known state.
	g.ReportError(DetectorClusterVersion, errors.New("transient"))
	if v := g.Verdict(); !v.Known || len(v.Closed) != 1 {
		t.Fatalf("an error must not forget the last state: %+v", v)
	}
	prev, before := g.Report(DetectorClusterVersion, nil, t0)
	if len(prev) != 1 || !before || g.Verdict().Blocking(0, t0) {
		t.Fatalf("opening: prev %v, before %v, verdict %+v", prev, before, g.Verdict())
	}
}

func TestGateHidesMachineHealthChecksWhileUnknown(t *testing.T) {
	g := NewGate(false)
	g.SetMachineHealthChecks(MachineHealthChecks{Conflict: "MachineHealthCheck a/b"})
	if c := g.Verdict().MachineHealthChecks.Conflict; c != "" {
		t.Fatalf("unknown gate reported a conflict: %q", c)
	}
	g.Discovered()
	if c := g.Verdict().MachineHealthChecks.Conflict; c == "" {
		t.Fatal("known gate lost the conflict")
	}
}

func TestGateNotifiesChangesAndCoalesces(t *testing.T) {
	g := NewGate(false)
	a, b := g.Changes(), g.Changes()
	g.Expect(DetectorPauseObject)
	g.Discovered()
	g.Report(DetectorPauseObject, []Signal{pause}, t0)
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("each subscriber gets one pending event for several changes: %d, %d", len(a), len(b))
	}
	<-a
	g.Report(DetectorPauseObject, []Signal{pause}, t0) // same signal: no change
	if len(a) != 0 {
		t.Fatal("an unchanged report notified")
	}
	g.Report(DetectorPauseObject, nil, t0)
	if len(a) != 1 {
		t.Fatal("opening did not notify")
	}
}

func TestGateIsSafeForConcurrentUse(t *testing.T) {
	g := NewGate(true)
	ch := g.Changes()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				switch (i + j) % 4 {
				case 0:
					g.Report(DetectorClusterAPI, []Signal{capi}, t0)
				case 1:
					g.Report(DetectorClusterAPI, nil, t0)
				case 2:
					if j%2 == 0 {
						g.ForgetNodeSignals("nhc")
					}
					g.NodeSignals("nhc", []Signal{np}, t0)
					_ = g.NodeSince("nhc", []Signal{np}, t0)
				default:
					_ = g.Verdict()
					_ = g.DetectorStates()
				}
				select {
				case <-ch:
				default:
				}
			}
		}()
	}
	wg.Wait()
}

func md(name string) Signal {
	s := capi
	s.Message = "Cluster API rolls out MachineDeployment ns/" + name
	s.Object = &corev1.ObjectReference{Kind: "MachineDeployment", Namespace: "ns", Name: name}
	return s
}

func TestGateRemembersWhenItFirstSawEachSignal(t *testing.T) {
	g := NewGate(false)
	g.Expect(DetectorClusterAPI)
	g.Expect(DetectorClusterVersion)
	g.Discovered()
	g.Report(DetectorClusterAPI, []Signal{md("a")}, t0)
	g.Report(DetectorClusterAPI, []Signal{md("a"), md("b")}, t0.Add(time.Hour))
	fromObject := began(cv, 3*time.Hour)
	g.Report(DetectorClusterVersion, []Signal{fromObject}, t0.Add(time.Hour))
	v := g.Verdict()
	if len(v.Closed) != 3 || !v.Closed[0].Since.Equal(t0) || !v.Closed[1].Since.Equal(t0.Add(time.Hour)) || !v.Closed[2].Since.Equal(fromObject.Since) {
		t.Fatalf("each signal keeps when it began, a time from its object wins: %+v", v.Closed)
	}
	if !v.Blocking(2*time.Hour, t0.Add(2*time.Hour)) {
		t.Error("b began an hour ago and blocks for two")
	}
	if v.Blocking(time.Hour, t0.Add(2*time.Hour)) {
		t.Error("every signal has been seen for longer than an hour")
	}

	// a's rollout ends; when it starts again, it is a new signal.
	g.Report(DetectorClusterAPI, []Signal{md("b")}, t0.Add(2*time.Hour))
	g.Report(DetectorClusterAPI, []Signal{md("a"), md("b")}, t0.Add(3*time.Hour))
	v = g.Verdict()
	if !v.Closed[0].Since.Equal(t0.Add(3*time.Hour)) || !v.Closed[1].Since.Equal(t0.Add(time.Hour)) {
		t.Fatalf("a began anew, b kept its start: %+v", v.Closed)
	}

	// A restart loses the memory: the signal starts when the new gate first sees it.
	g = NewGate(false)
	g.Expect(DetectorClusterAPI)
	g.Discovered()
	g.Report(DetectorClusterAPI, []Signal{md("a")}, t0.Add(4*time.Hour))
	if v := g.Verdict(); !v.Closed[0].Since.Equal(t0.Add(4 * time.Hour)) {
		t.Fatalf("after a restart the signal starts anew: %+v", v.Closed)
	}
}

func TestGateNotifiesWhenASignalStartsAnew(t *testing.T) {
	g := NewGate(false)
	ch := g.Changes()
	g.Discovered()
	g.Report(DetectorClusterVersion, []Signal{began(cv, time.Hour)}, t0)
	<-ch
	g.Report(DetectorClusterVersion, []Signal{began(cv, time.Hour)}, t0.Add(time.Minute))
	if len(ch) != 0 {
		t.Fatal("an unchanged report notified")
	}
	g.Report(DetectorClusterVersion, []Signal{began(cv, 0)}, t0.Add(time.Minute))
	if len(ch) != 1 {
		t.Fatal("a new start did not notify")
	}
}

func TestGateRemembersNodeSignalsPerNodeHealthCheck(t *testing.T) {
	g := NewGate(true)
	mc := func(node string) Signal {
		return Signal{Detector: DetectorMachineConfig, Reason: "MachineConfigUpdating", Message: "node " + node, Object: &corev1.ObjectReference{Kind: "Node", Name: node}}
	}
	g.NodeSignals("one", []Signal{np, mc("n1")}, t0)
	g.NodeSignals("two", []Signal{np}, t0.Add(time.Hour))
	got := g.NodeSignals("one", []Signal{np, mc("n1"), mc("n2")}, t0.Add(2*time.Hour))
	if len(got) != 3 || !got[0].Since.Equal(t0) || !got[1].Since.Equal(t0) || !got[2].Since.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("one keeps its starts, a new node starts now: %+v", got)
	}
	if got := g.NodeSignals("two", []Signal{np}, t0.Add(2*time.Hour)); !got[0].Since.Equal(t0.Add(time.Hour)) {
		t.Fatalf("each NodeHealthCheck has its own memory: %+v", got)
	}
	g.NodeSignals("one", []Signal{mc("n2")}, t0.Add(3*time.Hour))
	if got := g.NodeSignals("one", []Signal{np, mc("n2")}, t0.Add(4*time.Hour)); !got[0].Since.Equal(t0.Add(4*time.Hour)) || !got[1].Since.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("a rollout seen again after it was gone starts anew: %+v", got)
	}
	g.ForgetNodeSignals("two") // the NodeHealthCheck is gone
	if got := g.NodeSignals("two", []Signal{np}, t0.Add(5*time.Hour)); !got[0].Since.Equal(t0.Add(5 * time.Hour)) {
		t.Fatalf("a forgotten NodeHealthCheck starts anew: %+v", got)
	}
	if got := g.NodeSignals("one", []Signal{began(np, 30*time.Minute)}, t0.Add(5*time.Hour)); !got[0].Since.Equal(t0.Add(-30 * time.Minute)) {
		t.Fatalf("a given start is kept: %+v", got)
	}
	// Bounded: a NodeHealthCheck keeps only the signals it shows now (a node that left it, or
	// stopped being updated, is gone with its signal), and nothing once it is gone.
	g.NodeSignals("one", nil, t0.Add(6*time.Hour))
	g.ForgetNodeSignals("two")
	if len(g.nodeSignals) != 0 {
		t.Errorf("node signals kept for %d NodeHealthChecks, want none", len(g.nodeSignals))
	}
}

func TestGateHoldsEachDetectorsState(t *testing.T) {
	g := NewGate(true)
	if got := g.DetectorStates(); !maps.Equal(got, map[string]DetectorState{DetectorNodeRollout: StateOpen}) {
		t.Fatalf("a new gate: the kubelet rolling-upgrade detector is on and open, nothing else has a state: %v", got)
	}
	g.Expect(DetectorClusterVersion)
	g.Expect(DetectorClusterAPI)
	g.Expect(DetectorInfrastructure)
	g.Discovered()
	g.ReportError(DetectorClusterVersion, errors.New("clusterversions is forbidden"))
	g.Report(DetectorClusterAPI, []Signal{capi}, t0)
	g.SetOpenShift(true)
	want := map[string]DetectorState{DetectorClusterVersion: StateUnknown, DetectorClusterAPI: StateClosed, DetectorNodeRollout: StateOpen,
		// On OpenShift the MachineConfig detector is on; the Infrastructure detector reports a finding,
		// not signals, and is open once it has (it never holds remediation back: before, it stayed
		// unknown, and the chart's paused-for-long alert fired on every OpenShift cluster).
		DetectorMachineConfig: StateOpen, DetectorInfrastructure: StateOpen}
	if got := g.DetectorStates(); !maps.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	g.Report(DetectorClusterVersion, nil, t0)
	g.Report(DetectorClusterAPI, nil, t0)
	mc := Signal{Detector: DetectorMachineConfig, Reason: "MachineConfigUpdating", Message: "node n1", Object: &corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	g.NodeSignals("one", []Signal{mc}, t0)
	g.NodeSignals("two", []Signal{np, mc}, t0)
	want = map[string]DetectorState{DetectorClusterVersion: StateOpen, DetectorClusterAPI: StateOpen, DetectorNodeRollout: StateClosed,
		DetectorMachineConfig: StateClosed, DetectorInfrastructure: StateOpen}
	if got := g.DetectorStates(); !maps.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	g.NodeSignals("two", nil, t0)
	if got := g.DetectorStates(); got[DetectorNodeRollout] != StateOpen || got[DetectorMachineConfig] != StateClosed {
		t.Fatalf("the rollout is gone, one still sees a MachineConfig update: %v", got)
	}
	g.ForgetNodeSignals("one") // the NodeHealthCheck is gone
	if got := g.DetectorStates()[DetectorMachineConfig]; got != StateOpen {
		t.Fatalf("no NodeHealthCheck blocked: %v", got)
	}
	g.SetOpenShift(false)
	if _, on := g.DetectorStates()[DetectorMachineConfig]; on {
		t.Fatal("not OpenShift: the MachineConfig detector is off and has no state")
	}
}

func TestGateNodeSinceReadsWhatNodeSignalsRecorded(t *testing.T) {
	g := NewGate(true)
	mc := func(node string) Signal {
		return Signal{Detector: DetectorMachineConfig, Reason: "MachineConfigUpdating", Message: "node " + node, Object: &corev1.ObjectReference{Kind: "Node", Name: node}}
	}
	if got := g.NodeSince("one", []Signal{np}, t0); len(got) != 1 || !got[0].Since.Equal(t0) {
		t.Fatalf("a signal the upgradeguard has not recorded begins now: %+v", got)
	}
	if got := g.NodeSince("one", []Signal{np}, t0.Add(time.Hour)); !got[0].Since.Equal(t0.Add(time.Hour)) {
		t.Fatalf("reading recorded nothing: %+v", got)
	}
	if _, on := g.DetectorStates()[DetectorNodeRollout]; !on || g.DetectorStates()[DetectorNodeRollout] != StateOpen {
		t.Fatalf("reading closed nothing: %v", g.DetectorStates())
	}
	g.NodeSignals("one", []Signal{np, mc("n1")}, t0)
	got := g.NodeSince("one", []Signal{mc("n2"), began(mc("n3"), time.Minute), np, mc("n1")}, t0.Add(2*time.Hour))
	if len(got) != 4 || !got[0].Since.Equal(t0.Add(2*time.Hour)) || !got[1].Since.Equal(t0.Add(-time.Minute)) ||
		!got[2].Since.Equal(t0) || !got[3].Since.Equal(t0) {
		t.Fatalf("recorded signals keep their start, others begin now, a given start is kept: %+v", got)
	}
	if got := g.NodeSince("two", []Signal{np}, t0.Add(2*time.Hour)); !got[0].Since.Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("each NodeHealthCheck has its own memory: %+v", got)
	}
	if got := g.NodeSignals("one", []Signal{np, mc("n1")}, t0.Add(3*time.Hour)); !got[0].Since.Equal(t0) || !got[1].Since.Equal(t0) {
		t.Fatalf("NodeSince recorded nothing: %+v", got)
	}
	g.ForgetNodeSignals("one")
	if got := g.NodeSince("one", []Signal{np}, t0.Add(4*time.Hour)); !got[0].Since.Equal(t0.Add(4 * time.Hour)) {
		t.Fatalf("forgotten: begins now: %+v", got)
	}
}

// The detectors that report findings rather than signals leave "unknown" once they have reported:
// a conflicting MachineHealthCheck holds every remediation back (closed), coverage holds nodes one
// by one (open). A detector that is not enabled has no state.
func TestGateFindingStates(t *testing.T) {
	g := NewGate(false)
	g.Expect(DetectorMachineHealthCheck)
	g.Expect(DetectorClusterAPIMachineHealthCheck)
	g.Discovered()
	if got := g.DetectorStates(); got[DetectorMachineHealthCheck] != StateUnknown || got[DetectorClusterAPIMachineHealthCheck] != StateUnknown {
		t.Fatalf("before they report: %v", got)
	}
	g.SetMachineHealthChecks(MachineHealthChecks{Conflict: "openshift-machine-api/workers"})
	g.SetClusterAPICoverage(map[string]string{"n1": "default/mhc"})
	if got := g.DetectorStates(); got[DetectorMachineHealthCheck] != StateClosed || got[DetectorClusterAPIMachineHealthCheck] != StateOpen {
		t.Fatalf("a conflict and a coverage: %v", got)
	}
	g.SetMachineHealthChecks(MachineHealthChecks{})
	if got := g.DetectorStates()[DetectorMachineHealthCheck]; got != StateOpen {
		t.Fatalf("the conflict is gone: %v", got)
	}
	g.SetOpenShift(true)
	if _, on := g.DetectorStates()[DetectorInfrastructure]; on {
		t.Fatal("the Infrastructure detector is not enabled here and has no state")
	}
}

package upgrade

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestGateStartsUnknownAndBlocks(t *testing.T) {
	g := NewGate(false)
	v := g.Verdict()
	if v.Known || !v.Blocking() || !strings.Contains(v.Pending, "not been discovered") {
		t.Fatalf("a new gate must be unknown and block: %+v", v)
	}
	g.Discovered()
	if v := g.Verdict(); !v.Known || v.Blocking() {
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
	g.Report(DetectorClusterVersion, &cv)
	if v := g.Verdict(); v.Known {
		t.Fatalf("infrastructure has not reported: %+v", v)
	}
	g.SetHostedControlPlane(true)
	v = g.Verdict()
	if !v.Known || !v.HostedControlPlane || len(v.Closed) != 1 || v.Closed[0].Message != cv.Message {
		t.Fatalf("known, hosted, closed by the ClusterVersion: %+v", v)
	}
	// An error after a report keeps the last known state.
	g.ReportError(DetectorClusterVersion, errors.New("transient"))
	if v := g.Verdict(); !v.Known || len(v.Closed) != 1 {
		t.Fatalf("an error must not forget the last state: %+v", v)
	}
	prev, before := g.Report(DetectorClusterVersion, nil)
	if prev == nil || !before || g.Verdict().Blocking() {
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
	g.Report(DetectorPauseObject, &np)
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("each subscriber gets one pending event for several changes: %d, %d", len(a), len(b))
	}
	<-a
	g.Report(DetectorPauseObject, &np) // same signal: no change
	if len(a) != 0 {
		t.Fatal("an unchanged report notified")
	}
	g.Report(DetectorPauseObject, nil)
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
					g.Report(DetectorClusterAPI, &np)
				case 1:
					g.Report(DetectorClusterAPI, nil)
				case 2:
					g.ReportNode(DetectorNodeRollout, "nhc", j%2 == 0)
				default:
					_ = g.Verdict()
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

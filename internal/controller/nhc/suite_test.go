package nhc_test

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// The nhc controller runs alone here: specs create remediation CRs themselves (e.NewCR) to play the
// remediation controller's part. It batches status writes as in the manager (StatusBatch), on a
// real clock that specs may move ahead (wall).
var (
	reconciler *nhc.Reconciler
	// requests records the manager's requests to the API server.
	requests = &testutil.RequestCounter{}
	wall     = &aheadClock{}
	e        = testutil.ControllerSuite(testutil.SuiteOptions{
		EnvOptions: testutil.EnvOptions{ManagerTransport: requests.Wrap},
		Configure:  watch.ConfigureManager,
		Setup: func(mgr ctrl.Manager, clock *clocktesting.FakeClock) error {
			// Nothing but the cache and nodes' Machines: no upgrade gate, leases, clock skew or refusals.
			wiring, err := watch.NewWiring(mgr, watch.Sources{Machines: targets.NewMachines(mgr.GetClient())})
			if err != nil {
				return err
			}
			reconciler = &nhc.Reconciler{Client: mgr.GetClient(), Clock: clock, Recorder: mgr.GetEventRecorder(nhc.ControllerName),
				StatusBatch: nhc.DefaultStatusBatch, Wall: wall, Wiring: wiring}
			return reconciler.SetupWithManager(mgr)
		},
	})
)

// aheadClock is the real clock, moved ahead by what specs Step: a quiet StatusBatch passes without
// waiting for it, and a write that is held still comes in real time. A spec may Stop it: then it
// moves only by Step, so a write held for the batch never comes, however loaded the machine, while
// one written at once still does (Resume lets it run again).
type aheadClock struct {
	mu      sync.Mutex
	ahead   time.Duration
	stopped *time.Time
}

func (c *aheadClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped != nil {
		return *c.stopped
	}
	return time.Now().Add(c.ahead)
}

func (c *aheadClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *aheadClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped != nil {
		t := c.stopped.Add(d)
		c.stopped = &t
		return
	}
	c.ahead += d
}

func (c *aheadClock) Stop() {
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = &now
}

// Resume runs the clock again from where it stood: what it was stepped while stopped stays ahead.
func (c *aheadClock) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped != nil {
		c.ahead = max(c.ahead, c.stopped.Sub(time.Now()))
	}
	c.stopped = nil
}

func TestNHCController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "nhc controller suite")
}

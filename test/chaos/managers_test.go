package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/controller"
)

// Leader election on a short lease, so a standby takes over within about a second of a leader
// stepping down (the leader releases the lease when it stops) and within a few seconds of one
// that lost it.
var (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// instance is one manager running the operator's controllers in this process.
type instance struct {
	name   string
	mgr    ctrl.Manager
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	// proc is the manager's connections to the API server; skew its clock skew monitor.
	proc *process
	skew *clockskew.Monitor
}

// errKilled is what a killed manager's requests return: its process is gone.
var errKilled = errors.New("chaos: the manager was killed (SIGKILL): nothing it sends arrives")

// process stands for a manager's OS process as the API server sees it: its connections. Killed
// (kill), it sends nothing more and its watches end at once, as after SIGKILL: the manager does not
// release its leader-election lease, writes nothing it meant to write next (the status write after
// a CR create), and keeps nothing it had in memory, since the driver never uses it again. Its
// goroutines may run on for a moment after the kill, but nothing they send reaches the API server,
// which is all a killed process could show the cluster. (A real subprocess would also abort the
// requests in flight at the kill; here those complete, as they may when the kernel had sent them.)
type process struct {
	// dead is set once the process is killed, ended once it is killed or its manager stopped.
	dead, ended atomic.Bool
	// onKill stops the manager (cancels its context) once it is killed.
	onKill func()
	mu     sync.Mutex
	// armed: kill the process right after the API server created a remediation CR it asked for,
	// before the response reaches the manager (between the CR create and the status write).
	armed bool
	// killedAfter names the CR created right before the kill ("" for a kill at rest).
	killedAfter string
}

// arm makes the process die right after its next remediation CR create.
func (p *process) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// isArmed reports whether the process is armed and alive.
func (p *process) isArmed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed && !p.dead.Load()
}

// created is called with every response to a remediation CR create the API server answered: an
// armed process dies now.
func (p *process) created(what string) bool {
	p.mu.Lock()
	if !p.armed || p.dead.Load() {
		p.mu.Unlock()
		return false
	}
	p.killedAfter = what
	p.mu.Unlock()
	p.kill()
	return true
}

// kill ends the process: no request of it arrives any more, its watches end.
func (p *process) kill() {
	p.ended.Store(true)
	if p.dead.Swap(true) {
		return
	}
	if p.onKill != nil {
		go p.onKill()
	}
}

// skewClock is the clock of the managers' clock skew monitors: real time shifted by the offset the
// skew moves set. The API server's Date header is real time too, so the monitors measure exactly
// that offset. The decisions read the fake clock instead, which runs ahead of real time by the
// history's clock steps: that lead is how the test makes time pass, not a skew the operator could
// see or should act on (see docs/chaos.md, "Clock skew").
type skewClock struct{ offset *atomic.Int64 }

func (c skewClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c skewClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (m *instance) alive() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

func (m *instance) elected() bool {
	select {
	case <-m.mgr.Elected():
		return m.alive() && !m.proc.dead.Load()
	default:
		return false
	}
}

// managers runs the operator's managers: as cmd/manager builds them (the production options from
// controller.ConfigureManager, the controllers from controller.SetupWithManager), with leader
// election, on the fake clock, through the faulty transport.
type managers struct {
	cfg    *rest.Config
	scheme *runtime.Scheme
	clock  *clocktesting.FakeClock
	faults *faults
	list   []*instance
	seq    int
	// skew is the offset of the skew monitors' clock from real time (skewClock).
	skew atomic.Int64
}

// start starts a manager as cmd/manager does: every API response measures the clock skew (a
// monitor per process, so a new manager starts with the skew not measured yet), the probe keeps it
// current, the returning-node hold and the skew bound have their production defaults.
func (ms *managers) start() (*instance, error) {
	ms.seq++
	proc := &process{}
	skew := clockskew.New(skewClock{&ms.skew}, maxClockSkew)
	cfg := rest.CopyConfig(ms.cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return ms.faults.wrap(proc, rt) })
	cfg.Wrap(skew.Wrap)
	cfg.QPS, cfg.Burst = 200, 400
	opts := ctrl.Options{
		Scheme:                        ms.scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		GracefulShutdownTimeout:       new(10 * time.Second),
		// Several managers live in this process, one after the other or side by side as leader and
		// standby, with the same controller names.
		Controller: config.Controller{SkipNameValidation: new(true)},
	}
	controller.ConfigureManager(&opts)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	probe, err := clockskew.NewProbe(skew, mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(probe); err != nil {
		return nil, err
	}
	// Condition times are judged as in production (no ConditionChanges given: the skew monitor's
	// bound, 10s): a change the watch shows more than the bound after its lastTransitionTime counts
	// from when the watch showed it. The driver writes condition times on the fake clock and may
	// step it before the watch shows a write (within a burst, or an unsettled step); the model
	// knows (node.SeenBy) and the liveness invariant waits for the latest time a failure can count
	// from. The removal hold has its production default too.
	if err := controller.SetupWithManager(mgr, controller.Options{Clock: ms.clock, LeaseNamespace: leaseNamespace,
		ReturnGrace: returnGrace, RemovalHold: removalHold, ClockSkew: skew}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &instance{name: fmt.Sprintf("m%d", ms.seq), mgr: mgr, cancel: cancel, done: make(chan struct{}), proc: proc, skew: skew}
	proc.onKill = func() {
		ms.faults.cutWatches(proc)
		cancel()
	}
	go func() {
		defer close(m.done)
		m.err = mgr.Start(ctx)
	}()
	ms.list = append(ms.list, m)
	return m, nil
}

// stop stops a manager and waits for it to finish.
func (ms *managers) stop(m *instance) error {
	m.proc.ended.Store(true)
	m.cancel()
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("manager %s did not stop within 30s", m.name)
	}
	ms.forget(m)
	if m.err != nil && !errors.Is(m.err, context.Canceled) {
		return fmt.Errorf("manager %s: %w", m.name, m.err)
	}
	return nil
}

func (ms *managers) forget(m *instance) {
	for i, o := range ms.list {
		if o == m {
			ms.list = append(ms.list[:i], ms.list[i+1:]...)
			return
		}
	}
}

// leader returns the running manager that leads, if any.
func (ms *managers) leader() *instance {
	for _, m := range ms.list {
		if m.elected() {
			return m
		}
	}
	return nil
}

// standby returns a running manager that does not lead, if any.
func (ms *managers) standby() *instance {
	for _, m := range ms.list {
		if m.alive() && !m.proc.dead.Load() && !m.elected() {
			return m
		}
	}
	return nil
}

// reap forgets managers that exited by themselves (a lost leader election) and returns what they
// said.
func (ms *managers) reap() []string {
	var out []string
	for _, m := range append([]*instance(nil), ms.list...) {
		switch {
		case m.proc.dead.Load():
			how := "at rest"
			if after := m.proc.killedAfter; after != "" {
				how = "right after the API server created a CR it asked for (POST " + after + ")"
			}
			out = append(out, fmt.Sprintf("manager %s was killed (SIGKILL) %s", m.name, how))
			ms.forget(m)
		case !m.alive():
			m.proc.ended.Store(true)
			out = append(out, fmt.Sprintf("manager %s exited: %v", m.name, m.err))
			ms.forget(m)
		}
	}
	return out
}

// skewAgrees reports whether every running manager's skew monitor has measured and judged the
// current offset: beyond the bound or within it.
func (ms *managers) skewAgrees() bool {
	beyond := time.Duration(ms.skew.Load()).Abs() > maxClockSkew
	for _, m := range ms.list {
		if v := m.skew.Verdict(); m.alive() && !m.proc.dead.Load() && (!v.Known || v.Exceeded != beyond) {
			return false
		}
	}
	return true
}

func (ms *managers) stopAll() {
	for _, m := range append([]*instance(nil), ms.list...) {
		_ = ms.stop(m)
	}
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

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
}

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
		return m.alive()
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
}

func (ms *managers) start() (*instance, error) {
	ms.seq++
	cfg := rest.CopyConfig(ms.cfg)
	cfg.Wrap(ms.faults.wrap)
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
	if err := controller.SetupWithManager(mgr, controller.Options{Clock: ms.clock, LeaseNamespace: leaseNamespace}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &instance{name: fmt.Sprintf("m%d", ms.seq), mgr: mgr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		m.err = mgr.Start(ctx)
	}()
	ms.list = append(ms.list, m)
	return m, nil
}

// stop stops a manager and waits for it to finish.
func (ms *managers) stop(m *instance) error {
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
		if m.alive() && !m.elected() {
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
		if !m.alive() {
			out = append(out, fmt.Sprintf("manager %s exited: %v", m.name, m.err))
			ms.forget(m)
		}
	}
	return out
}

func (ms *managers) stopAll() {
	for _, m := range append([]*instance(nil), ms.list...) {
		_ = ms.stop(m)
	}
}

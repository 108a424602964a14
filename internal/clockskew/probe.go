package clockskew

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultProbeInterval is how long the Probe waits for an API response before it sends its own.
// With leader election, the leader renews its lease and every standby tries to take it every 2s
// (--leader-election-retry-period), so no probe is ever sent; without it, an idle replica sends one
// GET /version every 30s, a negligible load, and its newest sample is at most two intervals (a
// minute) old: well inside the estimator's Window, and far quicker than a skew that grows by drift
// can matter.
const DefaultProbeInterval = 30 * time.Second

// probeTimeout bounds one probe; a probe that times out is sent again an interval later.
const probeTimeout = 10 * time.Second

// Probe is a manager Runnable, on every replica (not only the leader), that keeps its Monitor
// current without adding API traffic where there is some: when a whole Interval passed in which
// no response was measured, it sends GET /version, which every client may read (the default
// system:public-info-viewer ClusterRole), and whose response is measured like any other.
type Probe struct {
	// Monitor is the Monitor kept current.
	Monitor *Monitor
	// Client sends the probe. Its transport must be wrapped by the Monitor (it is when it is built
	// from the manager's config after Wrap was installed on it).
	Client rest.Interface
	// Interval is how long to wait for a response before probing (DefaultProbeInterval).
	Interval time.Duration
	// Clock times the interval.
	Clock clock.Clock
}

// NewProbe returns a Probe of m that sends its requests with cfg, which must carry m's Wrap (use
// the manager's config), every DefaultProbeInterval on the real clock.
func NewProbe(m *Monitor, cfg *rest.Config) (*Probe, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the clock skew probe's client: %w", err)
	}
	return &Probe{Monitor: m, Client: dc.RESTClient(), Interval: DefaultProbeInterval, Clock: clock.RealClock{}}, nil
}

// Start probes until ctx is done.
func (p *Probe) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("clockskew")
	for {
		seen := p.Monitor.sampleCount()
		t := p.Clock.NewTimer(p.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		if p.Monitor.sampleCount() != seen {
			continue // other requests keep it current
		}
		if err := p.probe(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Probing the API server's clock failed")
		}
	}
}

func (p *Probe) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	// Any response, an error status too, carries the Date header that is measured.
	return p.Client.Get().AbsPath("/version").Do(ctx).Error()
}

// NeedLeaderElection is false: every replica measures its own clock.
func (p *Probe) NeedLeaderElection() bool { return false }

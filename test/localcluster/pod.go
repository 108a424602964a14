package localcluster

import (
	"context"
	"sync"
	"time"
)

// Pod keeps a manager running as a pod with restartPolicy Always does: when the process exits, the
// "kubelet" starts it again after a back-off, and counts the restarts.
type Pod struct {
	cluster *Cluster
	options ManagerOptions

	mu       sync.Mutex
	current  *Manager
	restarts int
	stopped  bool
	loopDone chan struct{}
}

// restartBackOff is the pause before a restart (the kubelet's starts at 10s and doubles).
const restartBackOff = time.Second

// StartPod starts a manager, waits until it is ready, and keeps it running.
func (c *Cluster) StartPod(ctx context.Context, o ManagerOptions) (*Pod, error) {
	m, err := c.StartReady(ctx, o)
	if err != nil {
		return nil, err
	}
	p := &Pod{cluster: c, options: o, current: m, loopDone: make(chan struct{})}
	go p.loop()
	return p, nil
}

func (p *Pod) loop() {
	defer close(p.loopDone)
	for {
		_ = p.Manager().Wait()
		for {
			time.Sleep(restartBackOff)
			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				return
			}
			m, err := p.cluster.StartManager(p.options)
			if err == nil {
				p.current, p.restarts = m, p.restarts+1
			}
			p.mu.Unlock()
			if err != nil {
				continue
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				_ = m.WaitReady(ctx) // joins the webhook Service once ready
			}()
			break
		}
	}
}

// Manager returns the current process.
func (p *Pod) Manager() *Manager {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}

// Restarts returns how often the process was restarted.
func (p *Pod) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Stop stops the pod: SIGTERM, and no more restarts.
func (p *Pod) Stop(timeout time.Duration) error {
	p.mu.Lock()
	p.stopped = true
	m := p.current
	p.mu.Unlock()
	err := m.Stop(timeout)
	<-p.loopDone
	return err
}

package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// PoolLabel puts a node in a pool; each pool has its NodeHealthCheck.
const PoolLabel = "scale.medik8s.io/pool"

// What kube-controller-manager and the kubelet write into the Ready condition.
const (
	reasonUnknown  = "NodeStatusUnknown"
	messageUnknown = "Kubelet stopped posting node status."
	reasonReady    = "KubeletReady"
	messageReady   = "kubelet is posting ready status"
)

// nodes simulates the scenario's nodes, either through kwok and the node lifecycle controller
// (driven=false) or by writing their status itself (driven=true).
type nodes struct {
	cluster *localcluster.Cluster
	k8s     client.Client
	cs      kubernetes.Interface
	driven  bool
	obs     *observer
	// heartbeats counts the heartbeat-only status updates made (driven).
	heartbeats atomic.Int64
}

func poolName(p int) string { return fmt.Sprintf("p%02d", p) }

func nodeName(pool, i int) string { return fmt.Sprintf("scale-%s-%03d", poolName(pool), i) }

// nodeNameRE matches what nodeName returns (and not a pool's NodeHealthCheck, scale-pNN).
var nodeNameRE = regexp.MustCompile(`^scale-p[0-9]+-[0-9]+$`)

// isNodeName tells a name nodeName returns.
func isNodeName(name string) bool { return nodeNameRE.MatchString(name) }

// parallel runs do for each item with workers goroutines and returns the first error.
func parallel(items []string, workers int, do func(string) error) error {
	ch := make(chan string)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for it := range ch {
				if err := do(it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return first
}

// create creates the node of the pool; a driven node is created Ready.
func (s *nodes) create(ctx context.Context, name, pool string) error {
	labels := map[string]string{PoolLabel: pool, "kubernetes.io/hostname": name}
	if !s.driven {
		_, err := s.cluster.AddNode(ctx, s.k8s, name, labels)
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := s.k8s.Create(ctx, n); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return s.setReady(ctx, name, corev1.ConditionTrue, time.Now())
}

// condition is a node status patch of the Ready condition (a strategic merge patch: conditions
// merge by type, fields left out keep their values).
type condition struct {
	Type               corev1.NodeConditionType `json:"type"`
	Status             corev1.ConditionStatus   `json:"status,omitempty"`
	Reason             string                   `json:"reason,omitempty"`
	Message            string                   `json:"message,omitempty"`
	LastTransitionTime *metav1.Time             `json:"lastTransitionTime,omitempty"`
	LastHeartbeatTime  *metav1.Time             `json:"lastHeartbeatTime,omitempty"`
}

func (s *nodes) patchReady(ctx context.Context, name string, c condition) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []condition{c}}})
	if err != nil {
		return err
	}
	if _, err := s.cs.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patching node %s status: %w", name, err)
	}
	return nil
}

// setReady writes the Ready condition as kube-controller-manager (Unknown: the heartbeat time stays)
// or the kubelet (True) would, with the transition time given.
func (s *nodes) setReady(ctx context.Context, name string, status corev1.ConditionStatus, since time.Time) error {
	t := metav1.NewTime(since)
	c := condition{Type: corev1.NodeReady, Status: status, LastTransitionTime: &t}
	if status == corev1.ConditionTrue {
		now := metav1.Now()
		c.Reason, c.Message, c.LastHeartbeatTime = reasonReady, messageReady, &now
	} else {
		c.Reason, c.Message = reasonUnknown, messageUnknown
	}
	return s.patchReady(ctx, name, c)
}

// fail makes the nodes fail: kwok stops their heartbeats (the node lifecycle controller marks them
// Unknown after its grace period), or the benchmark writes Ready=Unknown since the time given.
func (s *nodes) fail(ctx context.Context, names []string, since time.Time) error {
	s.obs.setFailing(names)
	return parallel(names, 20, func(n string) error {
		if !s.driven {
			return localcluster.SetHeartbeats(ctx, s.k8s, n, false)
		}
		// Written as the node lifecycle controller writes it: dated when written (since only bounds
		// it), so that a write the benchmark's load delays is no backdated change.
		return s.setReady(ctx, n, corev1.ConditionUnknown, later(since, time.Now()))
	})
}

// recover brings a node back: kwok heartbeats it again, or the benchmark writes Ready=True.
func (s *nodes) recover(ctx context.Context, name string) error {
	if !s.driven {
		return localcluster.SetHeartbeats(ctx, s.k8s, name, true)
	}
	return s.setReady(ctx, name, corev1.ConditionTrue, time.Now())
}

// heartbeat makes heartbeat-only status updates (only the Ready condition's lastHeartbeatTime
// changes) of the nodes that are not failing, each node once per period, spread evenly, as kubelets
// do; driven nodes only.
func (s *nodes) heartbeat(ctx context.Context, names []string, period time.Duration) {
	const tick = 100 * time.Millisecond
	perTick := float64(len(names)) * float64(tick) / float64(period)
	work := make(chan string, len(names))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(work)
	for range 8 {
		wg.Go(func() {
			for n := range work {
				now := metav1.Now()
				if err := s.patchReady(ctx, n, condition{Type: corev1.NodeReady, LastHeartbeatTime: &now}); err == nil {
					s.heartbeats.Add(1)
				}
			}
		})
	}
	next, due := 0, 0.0
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for due += perTick; due >= 1; due-- {
			n := names[next]
			next = (next + 1) % len(names)
			if s.obs.isFailing(n) {
				continue
			}
			select {
			case work <- n:
			default: // the API server is behind: skip this heartbeat rather than pile up
			}
		}
	}
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

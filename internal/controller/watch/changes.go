package watch

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// ConditionChanges remembers when this process's node watch showed the status of a node's condition
// change without its lastTransitionTime moving, on the decisions' clock. The returning-node hold (health.Node.SeenChanging) reads it
// besides the conditions' lastTransitionTime, which some writers keep when a node turns Ready again
// (kwok's stock stages keep the creation time). It is memory only: after a restart the timestamps
// alone count, as before.
type ConditionChanges struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	// seen maps a node to when each condition type was seen changing; each inner map is replaced,
	// never changed, so what Seen returned stays as it was.
	seen map[string]map[corev1.NodeConditionType]time.Time
}

// NewConditionChanges returns an empty record on the clock.
func NewConditionChanges(c clock.PassiveClock) *ConditionChanges {
	return &ConditionChanges{clock: c, seen: map[string]map[corev1.NodeConditionType]time.Time{}}
}

// Register records the changes the cache's node informer delivers from now on.
func (c *ConditionChanges) Register(ctx context.Context, informers cache.Informers) error {
	inf, err := informers.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("getting the node informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 {
				c.Update(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.forget(n.Name)
			}
		},
	}); err != nil {
		return fmt.Errorf("watching node condition changes: %w", err)
	}
	return nil
}

// Update records the condition types whose status differs between the node as it was and as it
// is while its lastTransitionTime did not move forward: a writer that keeps that time true (a
// kubelet) says when the change happened better than when the watch delivered it. A condition the
// node did not have before (a node registering) changed nothing. It forgets the types the node no
// longer has: the node writes its condition types itself, so the record holds no more than the
// node carries now (and nothing once the node is deleted).
func (c *ConditionChanges) Update(old, updated *corev1.Node) {
	var changed []corev1.NodeConditionType
	for _, cond := range updated.Status.Conditions {
		if was := condition(old, cond.Type); was != nil && was.Status != cond.Status && !cond.LastTransitionTime.After(was.LastTransitionTime.Time) {
			changed = append(changed, cond.Type)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.seen[updated.Name]
	gone := false
	for t := range before {
		if condition(updated, t) == nil {
			gone = true
		}
	}
	if len(changed) == 0 && !gone {
		return
	}
	next := make(map[corev1.NodeConditionType]time.Time, len(before)+len(changed))
	for t, at := range before {
		if condition(updated, t) != nil {
			next[t] = at
		}
	}
	if len(changed) > 0 {
		now := c.clock.Now()
		for _, t := range changed {
			next[t] = now
		}
	}
	if len(next) == 0 {
		delete(c.seen, updated.Name)
		return
	}
	c.seen[updated.Name] = next
}

// Len returns how many nodes it holds changes of.
func (c *ConditionChanges) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// Seen returns when each condition type of the node was seen changing status (nil: none was). The
// map must not be changed.
func (c *ConditionChanges) Seen(node string) map[corev1.NodeConditionType]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[node]
}

func (c *ConditionChanges) forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, node)
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

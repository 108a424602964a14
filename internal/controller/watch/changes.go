package watch

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// ConditionChanges remembers, on the decisions' clock, what this process's node watch showed of
// nodes' conditions changing:
//   - when a condition's status changed without its lastTransitionTime moving (Seen). The
//     returning-node hold (health.Node.SeenChanging) reads it besides the conditions'
//     lastTransitionTime, which some writers keep when a node turns Ready again (kwok's stock stages
//     keep the creation time);
//   - which conditions' lastTransitionTime is not to be trusted, and from when they count instead
//     (Untrusted, health.Node.CountFrom): the kubelet and node-problem-detector write it with the
//     node's clock (or any value: the kubelet writes its own Node). A time later than the manager's
//     clock plus the bound, or earlier than the node's creation, is not trusted whenever it is seen;
//     at a status change the watch showed, neither is one more than the bound before the moment the
//     watch showed it (the writer's clock runs slow, or it backdated the change: a short blip would
//     count as the whole duration at once) or than the condition's own heartbeat. Such a condition
//     counts from when the watch showed the change (or first showed the condition).
//
// A decision reads the record for the node object it decides from (For), which first brings the
// record up to that object: the cache's store holds a node's update before any event handler
// has run (this record's is one of the controllers' node event handlers), so a reconcile another
// event started may read a node whose change the record has not seen yet; a node that came back,
// read before the record saw it come back, would count as healthy since its kept old transition
// time, and another node be remediated while the threshold holds only thanks to it. Each node's
// last recorded resourceVersion orders the two paths: an event older than what a decision already
// brought the record up to changes nothing.
//
// It is memory only: after a restart the timestamps alone count, but for the times that are never
// trusted. A node's record holds at most its current condition types, and goes with the node.
type ConditionChanges struct {
	clock clock.PassiveClock
	// bound is how far a condition's time may be from the manager's view of it: the manager's
	// clock-skew bound (negative: every time is trusted).
	bound atomic.Int64
	mu    sync.Mutex
	// seen maps a node to when each condition type was seen changing; untrusted to when each
	// untrusted condition counts from. Each inner map is replaced, never changed, so what Seen and
	// Untrusted returned stays as it was.
	seen      map[string]map[corev1.NodeConditionType]time.Time
	untrusted map[string]map[corev1.NodeConditionType]time.Time
	// last is, per node, the version the record was last brought up to, and its conditions'
	// types, statuses and transition times (what a later version is compared with).
	last map[string]recorded
}

// recorded is the node version a record was last brought up to.
type recorded struct {
	resourceVersion string
	conditions      []corev1.NodeCondition
}

// TrustEveryConditionTime is a bound that trusts every condition time: for test suites whose
// fixtures create nodes with conditions that changed long before (a node "down for an hour").
const TrustEveryConditionTime time.Duration = -1

// NewConditionChanges returns an empty record on the clock, trusting condition times within bound
// of the manager's view of them.
func NewConditionChanges(c clock.PassiveClock, bound time.Duration) *ConditionChanges {
	changes := &ConditionChanges{clock: c, seen: map[string]map[corev1.NodeConditionType]time.Time{},
		untrusted: map[string]map[corev1.NodeConditionType]time.Time{}, last: map[string]recorded{}}
	changes.SetBound(bound)
	return changes
}

// SetBound sets how far a condition's time may be from the manager's view of it before it is not
// trusted (TrustEveryConditionTime: never), for the changes seen from now on.
func (c *ConditionChanges) SetBound(bound time.Duration) { c.bound.Store(int64(bound)) }

// Register records the changes the cache's node informer delivers from now on.
func (c *ConditionChanges) Register(ctx context.Context, informers cache.Informers) error {
	inf, err := informers.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return fmt.Errorf("getting the node informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				c.Update(nil, n)
			}
		},
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

// Update records what changed between the node as it was (nil: as the watch first shows it) and
// as it is (see ConditionChanges): the condition types whose status differs while their
// lastTransitionTime did not move forward (a writer that keeps that time true, a kubelet, says when
// the change happened better than when the watch delivered it; a condition the node did not have
// before changed nothing), and which condition times it does not trust. It forgets the types the
// node no longer has: the node writes its condition types itself, so the record holds no more than
// the node carries now (and nothing once the node is deleted).
//
// A version of the node no newer than the one the record was last brought up to (For, or an
// earlier event) changes nothing; a newer one is compared with that version (old is then ignored).
// Versions that are not well-formed resourceVersions are compared with old, as the event gives it.
func (c *ConditionChanges) Update(old, updated *corev1.Node) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.update(now, old, updated)
}

// For returns what the record holds of the node (Seen, Untrusted), first brought up to this object:
// the one a decision reads from the cache (see ConditionChanges). The maps must not be changed.
func (c *ConditionChanges) For(n *corev1.Node) (seen, untrusted map[corev1.NodeConditionType]time.Time) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.update(now, nil, n)
	return c.seen[n.Name], c.untrusted[n.Name]
}

func (c *ConditionChanges) update(now time.Time, old, updated *corev1.Node) {
	if last, ok := c.last[updated.Name]; ok {
		switch cmp, err := resourceversion.CompareResourceVersion(updated.ResourceVersion, last.resourceVersion); {
		case err != nil:
		case cmp <= 0:
			return // seen already, or older than what was seen
		default:
			old = &corev1.Node{Status: corev1.NodeStatus{Conditions: last.conditions}}
		}
	}
	c.remember(updated)
	// Allocated only when something changed: heartbeats come here too.
	var seen, untrusted map[corev1.NodeConditionType]time.Time
	distrust := func(t corev1.NodeConditionType, since time.Time) {
		if untrusted == nil {
			untrusted = map[corev1.NodeConditionType]time.Time{}
		}
		untrusted[t] = since
	}
	wasSeen := c.seen[updated.Name]
	keepSeen := func() {
		if seen != nil {
			return
		}
		seen = make(map[corev1.NodeConditionType]time.Time, len(wasSeen)+1)
		for t, at := range wasSeen {
			if condition(updated, t) != nil {
				seen[t] = at
			}
		}
	}
	for t := range wasSeen {
		if condition(updated, t) == nil {
			keepSeen() // a type the node no longer has
			break
		}
	}
	before := c.untrusted[updated.Name]
	for _, cond := range updated.Status.Conditions {
		was := condition(old, cond.Type)
		changed := old != nil && (was == nil || was.Status != cond.Status)
		if changed && was != nil && !cond.LastTransitionTime.After(was.LastTransitionTime.Time) {
			keepSeen()
			seen[cond.Type] = now
		}
		switch since, ok := before[cond.Type]; {
		case changed && c.untrustedAt(updated, cond, now, true):
			distrust(cond.Type, now) // counts from this change
		case changed:
			// a change whose time is trusted ends the distrust
		case ok:
			distrust(cond.Type, since) // the same status as when it was not trusted
		case c.untrustedAt(updated, cond, now, false):
			distrust(cond.Type, now) // first seen so
		}
	}
	switch {
	case seen == nil:
	case len(seen) == 0:
		delete(c.seen, updated.Name)
	default:
		c.seen[updated.Name] = seen
	}
	switch {
	case untrusted == nil && before != nil:
		delete(c.untrusted, updated.Name)
	case untrusted != nil && !maps.Equal(untrusted, before):
		c.untrusted[updated.Name] = untrusted
	}
}

// remember records the node's version as the one the record is up to; its conditions are copied
// only when they differ from the last version's (heartbeats come here too).
func (c *ConditionChanges) remember(n *corev1.Node) {
	last := c.last[n.Name]
	same := len(last.conditions) == len(n.Status.Conditions)
	for i := 0; same && i < len(last.conditions); i++ {
		was, cond := last.conditions[i], n.Status.Conditions[i]
		same = was.Type == cond.Type && was.Status == cond.Status && was.LastTransitionTime.Equal(&cond.LastTransitionTime)
	}
	if !same {
		last.conditions = make([]corev1.NodeCondition, len(n.Status.Conditions))
		for i, cond := range n.Status.Conditions {
			last.conditions[i] = corev1.NodeCondition{Type: cond.Type, Status: cond.Status, LastTransitionTime: cond.LastTransitionTime}
		}
	}
	last.resourceVersion = n.ResourceVersion
	c.last[n.Name] = last
}

// untrustedAt tells whether the condition's lastTransitionTime is not to be trusted, seen now: later
// than now plus the bound, or earlier than the node's creation by more than it; and, at a status
// change the watch showed now, earlier than now or the condition's heartbeat by more than it.
func (c *ConditionChanges) untrustedAt(n *corev1.Node, cond corev1.NodeCondition, now time.Time, atChange bool) bool {
	ltt, bound := cond.LastTransitionTime.Time, time.Duration(c.bound.Load())
	switch {
	case bound < 0:
		return false
	case ltt.IsZero():
		return false // counts from now anyway (health.EvaluateNode)
	case ltt.After(now.Add(bound)):
		return true
	case !n.CreationTimestamp.IsZero() && ltt.Before(n.CreationTimestamp.Add(-bound)):
		return true
	case !atChange:
		return false
	case ltt.Before(now.Add(-bound)):
		return true
	}
	return !cond.LastHeartbeatTime.IsZero() && ltt.Before(cond.LastHeartbeatTime.Add(-bound))
}

// Untrusted returns, for each condition of the node whose lastTransitionTime is not to be trusted,
// when it counts from instead (nil: none). The map must not be changed.
func (c *ConditionChanges) Untrusted(node string) map[corev1.NodeConditionType]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.untrusted[node]
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
	delete(c.untrusted, node)
	delete(c.last, node)
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	if n == nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

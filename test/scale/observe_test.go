package scale

import (
	"context"
	"maps"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

var (
	testRemediations = schema.GroupVersionResource{Group: "test.medik8s.io", Version: "v1alpha1", Resource: "testremediations"}
	nodeHealthChecks = schema.GroupVersionResource{Group: "remediation.medik8s.io", Version: "v1alpha1", Resource: "nodehealthchecks"}
)

// nodeState is what the observer last saw of a node's Ready condition.
type nodeState struct {
	ready corev1.ConditionStatus
	// transition is the stored lastTransitionTime of the Ready condition.
	transition time.Time
	// readyAt is when the observer saw the node become Ready (local clock).
	readyAt time.Time
}

// crEvent is a remediation CR's ADDED or DELETED event, with the local time it arrived.
type crEvent struct {
	node  string
	added bool
	at    time.Time
	// nodeReady: the node was Ready (as the observer saw it) when the event arrived.
	nodeReady bool
}

// observer watches nodes, remediation CRs and NodeHealthChecks through informers and records when
// things happen, on the local clock: the benchmark's view of the cluster.
type observer struct {
	mu    sync.Mutex
	nodes map[string]*nodeState
	// failing are the nodes the benchmark failed and that have not been seen Ready since recovery.
	failing map[string]bool
	// spurious are nodes that left Ready without being failed by the benchmark.
	spurious []string
	crs      map[string]bool // node -> has a CR
	events   []crEvent
	// listed is each NodeHealthCheck's status.unhealthyNodes names.
	listed map[string]map[string]bool
	// want and listedAt: when each NodeHealthCheck first listed every node of want[nhc].
	want     map[string][]string
	listedAt map[string]time.Time
	// remediating are the nodes a NodeHealthCheck's status lists with remediations.
	remediating map[string]bool
	// noted is when an event of the reason related to the object (a node) was last added or updated.
	noted map[eventKey]time.Time
	// convergeWant and convergedAt: when each NodeHealthCheck's status first counted convergeWant
	// nodes observed and as many healthy.
	convergeWant int
	convergedAt  map[string]time.Time
}

type eventKey struct{ reason, related string }

func newObserver() *observer {
	return &observer{nodes: map[string]*nodeState{}, failing: map[string]bool{}, crs: map[string]bool{},
		listed: map[string]map[string]bool{}, want: map[string][]string{}, listedAt: map[string]time.Time{},
		remediating: map[string]bool{}, noted: map[eventKey]time.Time{}, convergedAt: map[string]time.Time{}}
}

// start runs the informers until ctx ends and waits for their caches.
func (o *observer) start(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) {
	nodes := informers.NewSharedInformerFactory(cs, 0)
	ni := nodes.Core().V1().Nodes().Informer()
	_, _ = ni.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.node(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { o.node(obj.(*corev1.Node)) },
	})
	crs := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, testutil.TemplateNamespace, nil)
	ci := crs.ForResource(testRemediations).Informer()
	_, _ = ci.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { o.cr(obj, true) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			o.cr(obj, false)
		},
	})
	nhcs := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	hi := nhcs.ForResource(nodeHealthChecks).Informer()
	_, _ = hi.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.nhc(obj.(*unstructured.Unstructured)) },
		UpdateFunc: func(_, obj any) { o.nhc(obj.(*unstructured.Unstructured)) },
	})
	evs := informers.NewSharedInformerFactory(cs, 0)
	ei := evs.Events().V1().Events().Informer()
	_, _ = ei.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.event(obj.(*eventsv1.Event)) },
		UpdateFunc: func(_, obj any) { o.event(obj.(*eventsv1.Event)) },
	})
	nodes.Start(ctx.Done())
	crs.Start(ctx.Done())
	nhcs.Start(ctx.Done())
	evs.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), ni.HasSynced, ci.HasSynced, hi.HasSynced, ei.HasSynced)
}

func readyCondition(n *corev1.Node) (corev1.ConditionStatus, time.Time) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status, c.LastTransitionTime.Time
		}
	}
	return "", time.Time{}
}

func (o *observer) node(n *corev1.Node) {
	now := time.Now()
	status, transition := readyCondition(n)
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.nodes[n.Name]
	if s == nil {
		s = &nodeState{}
		o.nodes[n.Name] = s
	}
	if s.ready == corev1.ConditionTrue && status != corev1.ConditionTrue && !o.failing[n.Name] {
		o.spurious = append(o.spurious, n.Name)
	}
	if status == corev1.ConditionTrue && s.ready != corev1.ConditionTrue {
		s.readyAt = now
	}
	s.ready, s.transition = status, transition
}

func (o *observer) cr(obj any, added bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	node := remediationcr.NodeName(u)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.crs[node] = added
	if !added {
		delete(o.crs, node)
	}
	s := o.nodes[node]
	o.events = append(o.events, crEvent{node: node, added: added, at: now, nodeReady: s != nil && s.ready == corev1.ConditionTrue})
}

func (o *observer) nhc(u *unstructured.Unstructured) {
	now := time.Now()
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "unhealthyNodes")
	names := map[string]bool{}
	withCR := map[string]bool{}
	for _, item := range list {
		if m, ok := item.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				names[n] = true
				if r, _ := m["remediations"].([]any); len(r) > 0 {
					withCR[n] = true
				}
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for n := range o.listed[u.GetName()] {
		delete(o.remediating, n)
	}
	for n := range withCR {
		o.remediating[n] = true
	}
	o.listed[u.GetName()] = names
	o.checkListed(u.GetName(), now)
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedNodes")
	healthy, _, _ := unstructured.NestedInt64(u.Object, "status", "healthyNodes")
	if o.convergeWant > 0 && o.convergedAt[u.GetName()].IsZero() && observed == int64(o.convergeWant) && healthy == observed {
		o.convergedAt[u.GetName()] = now
	}
}

// expectConverged starts timing until each NodeHealthCheck's status counts n nodes observed and n
// healthy.
func (o *observer) expectConverged(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.convergeWant, o.convergedAt = n, map[string]time.Time{}
}

// convergedTimes returns when each NodeHealthCheck's status first counted the nodes expectConverged
// gave.
func (o *observer) convergedTimes() map[string]time.Time {
	return o.times(func() map[string]time.Time { return o.convergedAt })
}

// times returns a copy of the map of times that of returns with o.mu held.
func (o *observer) times(of func() map[string]time.Time) map[string]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(of())
}

func (o *observer) event(e *eventsv1.Event) {
	if e.Related == nil {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.noted[eventKey{e.Reason, e.Related.Name}] = now
}

// listedWithCR returns how many of the nodes a NodeHealthCheck's status lists with remediations.
func (o *observer) listedWithCR(nodes []string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, node := range nodes {
		if o.remediating[node] {
			n++
		}
	}
	return n
}

// withEvents returns how many of the nodes have had an event of each reason, related to the node,
// added or updated at or after since.
func (o *observer) withEvents(nodes []string, since time.Time, reasons ...string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, node := range nodes {
		all := true
		for _, r := range reasons {
			if at, ok := o.noted[eventKey{r, node}]; !ok || at.Before(since) {
				all = false
			}
		}
		if all {
			n++
		}
	}
	return n
}

// checkListed records when nhc lists every node it should; with o.mu held.
func (o *observer) checkListed(nhc string, now time.Time) {
	want, ok := o.want[nhc]
	if !ok || !o.listedAt[nhc].IsZero() {
		return
	}
	for _, n := range want {
		if !o.listed[nhc][n] {
			return
		}
	}
	o.listedAt[nhc] = now
}

// expectListed starts timing until each NodeHealthCheck lists the nodes given for it.
func (o *observer) expectListed(want map[string][]string) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.want, o.listedAt = want, map[string]time.Time{}
	for nhc := range want {
		o.checkListed(nhc, now)
	}
}

// setFailing marks nodes as failed by the benchmark (before it fails them).
func (o *observer) setFailing(nodes []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range nodes {
		o.failing[n] = true
	}
}

// clearRecovered forgets the failures of nodes seen Ready again.
func (o *observer) clearRecovered() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for n := range o.failing {
		if s := o.nodes[n]; s != nil && s.ready == corev1.ConditionTrue {
			delete(o.failing, n)
		}
	}
}

func (o *observer) isFailing(node string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failing[node]
}

// countReady returns how many of the nodes are Ready.
func (o *observer) countReady(nodes []string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	ready := 0
	for _, n := range nodes {
		if s := o.nodes[n]; s != nil && s.ready == corev1.ConditionTrue {
			ready++
		}
	}
	return ready
}

// countNotReady returns how many of the nodes are seen not Ready.
func (o *observer) countNotReady(nodes []string) int {
	return len(nodes) - o.countReady(nodes)
}

// withCR returns how many of the nodes have a remediation CR.
func (o *observer) withCR(nodes []string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, node := range nodes {
		if o.crs[node] {
			n++
		}
	}
	return n
}

func (o *observer) crCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.crs)
}

// eventsSince returns the CR events that arrived at or after t.
func (o *observer) eventsSince(t time.Time) []crEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []crEvent
	for _, e := range o.events {
		if !e.at.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

// transitions returns the stored Ready lastTransitionTime of the nodes.
func (o *observer) transitions(nodes []string) map[string]time.Time {
	return o.nodeTimes(nodes, func(s *nodeState) time.Time { return s.transition })
}

// readyAt returns when the nodes were seen Ready last.
func (o *observer) readyAt(nodes []string) map[string]time.Time {
	return o.nodeTimes(nodes, func(s *nodeState) time.Time { return s.readyAt })
}

// nodeTimes returns a time of each of the nodes seen.
func (o *observer) nodeTimes(nodes []string, at func(*nodeState) time.Time) map[string]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]time.Time{}
	for _, n := range nodes {
		if s := o.nodes[n]; s != nil {
			out[n] = at(s)
		}
	}
	return out
}

func (o *observer) spuriousLosses() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := append([]string(nil), o.spurious...)
	sort.Strings(out)
	return out
}

func (o *observer) listedTimes() map[string]time.Time {
	return o.times(func() map[string]time.Time { return o.listedAt })
}

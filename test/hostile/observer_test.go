package hostile

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

var (
	testRemediations = schema.GroupVersionResource{Group: "test.medik8s.io", Version: "v1alpha1", Resource: "testremediations"}
	nodeHealthChecks = schema.GroupVersionResource{Group: remediationv1alpha1.GroupVersion.Group, Version: remediationv1alpha1.GroupVersion.Version, Resource: "nodehealthchecks"}
)

// observer watches every remediation CR and every NodeHealthCheck status the API server holds
// during the attack and records each breach of the invariants the moment it shows: a CR or a
// status entry for a node that is neither the hostile node nor the failing one, more starts of the
// hostile node than the repair budget allows, more CRs at once than maxInFlight.
type observer struct {
	hostile, failing string
	// asks is the NodeHealthCheck with requests, the budget and maxInFlight; plain the other.
	asks, plain     string
	maxRemediations int
	maxInFlight     int

	mu sync.Mutex
	// crs are the CRs seen, by UID.
	crs map[types.UID]bool
	// live are the CRs of each NodeHealthCheck that exist now.
	live map[string]map[types.UID]bool
	// maxLive is the most CRs of each NodeHealthCheck that existed at once.
	maxLive map[string]int
	// starts counts the CRs created, by NodeHealthCheck and node.
	starts map[string]int
	// failingCR is when the failing node's first CR showed (zero: not yet).
	failingCR time.Time
	// statuses counts the NodeHealthCheck statuses seen.
	statuses   int
	violations []string
}

// maxViolations is how many breaches a failure lists; the others are counted.
const maxViolations = 20

func newObserver(hostile, failing, asks, plain string, maxRemediations, maxInFlight int) *observer {
	return &observer{hostile: hostile, failing: failing, asks: asks, plain: plain, maxRemediations: maxRemediations, maxInFlight: maxInFlight,
		crs: map[types.UID]bool{}, live: map[string]map[types.UID]bool{}, maxLive: map[string]int{}, starts: map[string]int{}}
}

// start runs the informers until ctx ends; it returns once they have listed.
func (o *observer) start(ctx context.Context, dyn dynamic.Interface) error {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	crs := factory.ForResource(testRemediations).Informer()
	if _, err := crs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.cr(obj, true) },
		DeleteFunc: func(obj any) { o.cr(obj, false) },
	}); err != nil {
		return fmt.Errorf("watching remediation CRs: %w", err)
	}
	nhcs := factory.ForResource(nodeHealthChecks).Informer()
	if _, err := nhcs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    o.status,
		UpdateFunc: func(_, obj any) { o.status(obj) },
	}); err != nil {
		return fmt.Errorf("watching NodeHealthChecks: %w", err)
	}
	factory.Start(ctx.Done())
	for gvr, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return fmt.Errorf("listing %s: %w", gvr.Resource, ctx.Err())
		}
	}
	return nil
}

func (o *observer) violate(format string, args ...any) {
	o.violations = append(o.violations, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (o *observer) cr(obj any, added bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	nhc := ""
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == "NodeHealthCheck" {
			nhc = ref.Name
		}
	}
	node := u.GetAnnotations()[remediationv1alpha1.NodeNameAnnotation]
	if !added {
		delete(o.live[nhc], u.GetUID())
		return
	}
	if o.crs[u.GetUID()] {
		return
	}
	o.crs[u.GetUID()] = true
	o.starts[nhc+"/"+node]++
	if o.live[nhc] == nil {
		o.live[nhc] = map[types.UID]bool{}
	}
	o.live[nhc][u.GetUID()] = true
	o.maxLive[nhc] = max(o.maxLive[nhc], len(o.live[nhc]))
	switch {
	case node != o.hostile && node != o.failing:
		o.violate("NodeHealthCheck %s remediates healthy node %s (CR %s)", nhc, node, u.GetName())
	case node == o.failing && nhc != o.plain:
		o.violate("NodeHealthCheck %s remediates node %s, which it does not select (CR %s)", nhc, node, u.GetName())
	case node == o.failing && o.failingCR.IsZero():
		o.failingCR = time.Now()
	}
	if nhc == o.asks && node == o.hostile && o.starts[nhc+"/"+node] == o.maxRemediations+1 {
		// The first start beyond the budget; report counts them all.
		o.violate("NodeHealthCheck %s started remediation %d of node %s (CR %s) within its repair budget's window: beyond maxRemediations %d",
			nhc, o.starts[nhc+"/"+node], node, u.GetName(), o.maxRemediations)
	}
	if nhc == o.asks && len(o.live[nhc]) > o.maxInFlight {
		o.violate("NodeHealthCheck %s has %d remediations at once (CR %s of node %s): beyond maxInFlight %d", nhc, len(o.live[nhc]), u.GetName(), node, o.maxInFlight)
	}
}

func (o *observer) status(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	listed, _, _ := unstructured.NestedSlice(u.Object, "status", "unhealthyNodes")
	o.mu.Lock()
	defer o.mu.Unlock()
	o.statuses++
	for _, e := range listed {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		switch {
		case name != o.hostile && name != o.failing:
			o.violate("NodeHealthCheck %s lists healthy node %s as unhealthy: %v", u.GetName(), name, m)
		case name == o.failing && u.GetName() != o.plain:
			o.violate("NodeHealthCheck %s lists node %s, which it does not select", u.GetName(), name)
		}
	}
}

// report returns what the observer saw and the breaches, if any.
func (o *observer) report() (summary string, violations []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var keys []string
	for k := range o.starts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "CRs created by %s: %d\n", k, o.starts[k])
	}
	for nhc, n := range o.maxLive {
		fmt.Fprintf(&b, "most CRs of %s at once: %d\n", nhc, n)
	}
	fmt.Fprintf(&b, "NodeHealthCheck statuses seen: %d\n", o.statuses)
	violations = append([]string(nil), o.violations...)
	if n := o.starts[o.asks+"/"+o.hostile]; n > o.maxRemediations+1 {
		violations = append(violations, fmt.Sprintf("NodeHealthCheck %s started %d remediations of node %s in all during the attack, with maxRemediations %d in a window of an hour",
			o.asks, n, o.hostile, o.maxRemediations))
	}
	if len(violations) > maxViolations {
		violations = append(violations[:maxViolations], fmt.Sprintf("... and %d more", len(violations)-maxViolations))
	}
	return b.String(), violations
}

// failingRemediated returns when the failing node's first CR showed (zero: not yet).
func (o *observer) failingRemediated() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failingCR
}

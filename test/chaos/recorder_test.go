package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// recorder watches every remediation CR kind with the driver's own reflectors and records each
// CR's life in resourceVersions, so CRs created and deleted within one step are judged too. A
// marker CR of each kind in markerNS, updated at each check, tells when the recorder has seen
// everything up to a resourceVersion (a watch delivers the events of a kind in order). Its
// reflectors retry at once after an API server restart (recorderBackoff), where an informer would
// back off for up to 30s, and resume from the last resourceVersion, so they miss nothing.
type recorder struct {
	mu      sync.Mutex
	byUID   map[types.UID]*crRecord
	lastRV  map[types.UID]uint64
	markers map[string]uint64
}

// recorderBackoff is how the recorder's reflectors retry a failed list or watch.
var recorderBackoff = wait.Backoff{Duration: 50 * time.Millisecond, Cap: 500 * time.Millisecond, Steps: 100, Factor: 2}

func startRecorder(ctx context.Context, cfg *rest.Config) (*recorder, error) {
	r := &recorder{byUID: map[types.UID]*crRecord{}, lastRV: map[types.UID]uint64{}, markers: map[string]uint64{}}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var synced []toolscache.InformerSynced
	for _, k := range crKinds {
		gv, err := schema.ParseGroupVersion(k[0])
		if err != nil {
			return nil, err
		}
		resource := dyn.Resource(gv.WithResource(strings.ToLower(k[1]) + "s"))
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return resource.List(ctx, o) },
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return resource.Watch(ctx, o)
			},
		}
		store := &recordStore{r: r, kind: k[1]}
		backoff := recorderBackoff
		refl := toolscache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, store, toolscache.ReflectorOptions{Name: "chaos-recorder-" + k[1], Backoff: &backoff})
		go refl.RunWithContext(ctx)
		synced = append(synced, store.synced.Load)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("the recorder's reflectors did not sync")
	}
	return r, nil
}

// recordStore takes a reflector's events for the recorder.
type recordStore struct {
	r      *recorder
	kind   string
	synced atomic.Bool
}

func (s *recordStore) Add(obj any) error    { s.r.observe(obj); return nil }
func (s *recordStore) Update(obj any) error { s.r.observe(obj); return nil }
func (s *recordStore) Delete(obj any) error { s.r.deleted(obj); return nil }
func (s *recordStore) Resync() error        { return nil }

// Replace takes a list: its objects are observed, and the CRs of the kind it no longer has were
// deleted after the last state the recorder saw.
func (s *recordStore) Replace(list []any, _ string) error {
	present := map[types.UID]bool{}
	for _, obj := range list {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			present[u.GetUID()] = true
			s.r.observe(u)
		}
	}
	s.r.mu.Lock()
	for uid, rec := range s.r.byUID {
		if rec.Kind == s.kind && rec.Deleted == 0 && !present[uid] {
			rec.Deleted = s.r.lastRV[uid] + 1
		}
	}
	s.r.mu.Unlock()
	s.synced.Store(true)
	return nil
}

func resourceVersion(obj metav1.Object) uint64 {
	rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	return rv
}

// crCondition returns the status of a condition in a CR's status.conditions.
func crCondition(cr *unstructured.Unstructured, conditionType string) string {
	conds, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == conditionType {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

func (r *recorder) observe(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observeLocked(u)
}

func (r *recorder) observeLocked(u *unstructured.Unstructured) {
	rv := resourceVersion(u)
	if u.GetNamespace() == markerNS {
		r.markers[u.GetKind()] = max(r.markers[u.GetKind()], rv)
		return
	}
	r.lastRV[u.GetUID()] = max(r.lastRV[u.GetUID()], rv)
	rec := r.byUID[u.GetUID()]
	if rec == nil {
		rec = &crRecord{UID: u.GetUID(), Kind: u.GetKind(), Name: u.GetName(), Created: rv, CreatedAt: u.GetCreationTimestamp().Time,
			Node: u.GetAnnotations()[remediationv1alpha1.NodeNameAnnotation], Template: u.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]}
		if rec.Node == "" {
			rec.Node = u.GetName()
		}
		rec.Owner, rec.OwnerUID, _ = remediationcr.ControllerNHC(u)
		for _, o := range u.GetOwnerReferences() {
			if o.Kind == "Machine" {
				rec.Machines = append(rec.Machines, o.Name)
			}
		}
		_, rec.ControlPlane = u.GetLabels()[remediationv1alpha1.ControlPlaneCRLabel]
		if v, ok := u.GetAnnotations()[remediationv1alpha1.RemediationRequestedAtAnnotation]; ok {
			rec.RequestedAt, _ = time.Parse(time.RFC3339, v)
			rec.RequestValue = v
		}
		r.byUID[rec.UID] = rec
	}
	if _, marked := u.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]; marked && rec.TimedOut == 0 {
		rec.TimedOut = rv
	}
	switch crCondition(u, remediationv1alpha1.RemediationConditionSucceeded) {
	case "False":
		if rec.Failed == 0 {
			rec.Failed = rv
		}
	case "True":
		if rec.Succeeded == 0 {
			rec.Succeeded = rv
		}
	}
	if u.GetDeletionTimestamp() != nil && rec.Deleted == 0 {
		rec.Deleted = rv // no finalizers here: a CR being deleted is as good as gone
	}
}

func (r *recorder) deleted(obj any) {
	last := false
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, last = d.Obj, true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetNamespace() == markerNS {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.byUID[u.GetUID()]
	if rec == nil {
		r.observeLocked(u) // cannot happen with a watch that started before any CR; keep the record anyway
		rec = r.byUID[u.GetUID()]
	}
	rv := max(resourceVersion(u), r.lastRV[u.GetUID()])
	if last {
		rv++ // the relist only knows the last state; it was deleted after it
	}
	if rec.Deleted == 0 || rv < rec.Deleted {
		rec.Deleted = rv
	}
}

// sync waits until the recorder has seen every CR event up to a resourceVersion, and returns it.
func (r *recorder) sync(ctx context.Context, k8s client.Client) (uint64, error) {
	var upTo uint64
	for _, k := range crKinds {
		m := &unstructured.Unstructured{}
		m.SetAPIVersion(k[0])
		m.SetKind(k[1])
		m.SetNamespace(markerNS)
		m.SetName("marker")
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"chaos.medik8s.io/sync":"%d"}}}`, time.Now().UnixNano())
		if err := k8s.Patch(ctx, m, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return 0, fmt.Errorf("updating the %s marker: %w", k[1], err)
		}
		rv := resourceVersion(m)
		deadline := time.Now().Add(20 * time.Second)
		for {
			r.mu.Lock()
			seen := r.markers[k[1]]
			r.mu.Unlock()
			if seen >= rv {
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("the recorder did not see the %s marker at resourceVersion %d (saw %d)", k[1], rv, seen)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if upTo == 0 || rv < upTo {
			upTo = rv
		}
	}
	return upTo, nil
}

// records returns a copy of every record.
func (r *recorder) records() []*crRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*crRecord, 0, len(r.byUID))
	for _, rec := range r.byUID {
		c := *rec
		out = append(out, &c)
	}
	return out
}

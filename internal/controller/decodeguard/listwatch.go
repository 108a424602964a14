package decodeguard

import (
	"context"
	"errors"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Resource is the NodeHealthCheck resource the list-watch reads.
var Resource = remediationv1alpha1.GroupVersion.WithResource("nodehealthchecks")

// NewListerWatcher returns the NodeHealthCheck informer's list and watch: it reads NodeHealthChecks
// as unstructured objects through client (the nodehealthchecks resource of a dynamic client) and
// hands the informer each one that decodes (Decode), as a *NodeHealthCheck. What does not decode is
// recorded in registry and logged, and:
//   - in a list, or in the initial events of a streaming list (watch-list), it is left out;
//   - in a later watch event (added, modified or deleted), it becomes a DELETED event for a stub that
//     carries only its name, uid and resourceVersion: the informer drops the cached object if it held
//     it (an object that was fine became undecodable), or, if it never held it, at most hands its
//     handlers one delete of an object they never saw, which the controllers treat as gone.
//
// A complete list (all pages of a List, or a watch-list up to its initial-events-end bookmark) makes
// registry exactly its undecodable objects; a decodable or deleted object leaves it at once. Bookmarks
// pass as *NodeHealthCheck stubs carrying the resourceVersion and annotations; errors pass unchanged.
func NewListerWatcher(client dynamic.ResourceInterface, registry *Registry) toolscache.ListerWatcher {
	lw := &listWatcher{client: client, registry: registry}
	return &toolscache.ListWatch{ListWithContextFunc: lw.list, WatchFuncWithContext: lw.watch}
}

type listWatcher struct {
	client   dynamic.ResourceInterface
	registry *Registry

	mu sync.Mutex
	// pages collects the undecodable objects of a paginated List until its last page; the reflector
	// lists page by page from one goroutine, a new list starting with an empty continue token.
	pages map[string]Entry
}

func (l *listWatcher) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	ul, err := l.client.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &remediationv1alpha1.NodeHealthCheckList{ListMeta: metav1.ListMeta{
		ResourceVersion: ul.GetResourceVersion(), Continue: ul.GetContinue(), RemainingItemCount: ul.GetRemainingItemCount()}}
	l.mu.Lock()
	defer l.mu.Unlock()
	if opts.Continue == "" || l.pages == nil {
		l.pages = map[string]Entry{}
	}
	for i := range ul.Items {
		nhc, err := Decode(&ul.Items[i])
		if err != nil {
			l.pages[ul.Items[i].GetName()] = entryFor(&ul.Items[i], err)
			continue
		}
		out.Items = append(out.Items, *nhc)
	}
	if out.Continue == "" {
		l.complete(ctx, l.pages)
		l.pages = nil
	}
	return out, nil
}

func (l *listWatcher) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	opts.AllowWatchBookmarks = true // as controller-runtime's own list-watch does by default
	inner, err := l.client.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	var initial map[string]Entry // the undecodable objects of a watch-list's initial events
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		initial = map[string]Entry{}
	}
	translate := func(in watch.Event) (watch.Event, bool) {
		u, ok := in.Object.(*unstructured.Unstructured)
		if !ok || in.Type == watch.Error {
			return in, true
		}
		if in.Type == watch.Bookmark {
			if initial != nil && u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				l.complete(ctx, initial)
				initial = nil
			}
			return watch.Event{Type: watch.Bookmark, Object: &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{
				ResourceVersion: u.GetResourceVersion(), Annotations: u.GetAnnotations()}}}, true
		}
		nhc, err := Decode(u)
		switch {
		case err == nil && in.Type == watch.Deleted:
			l.forget(ctx, u.GetName(), false)
		case err == nil:
			if initial != nil {
				delete(initial, u.GetName())
			} else {
				l.forget(ctx, u.GetName(), true)
			}
		case initial != nil: // a fresh store: nothing to delete
			initial[u.GetName()] = entryFor(u, err)
			return watch.Event{}, false
		case in.Type == watch.Deleted:
			l.forget(ctx, u.GetName(), false)
			return watch.Event{Type: watch.Deleted, Object: stub(u)}, true
		default:
			l.report(ctx, entryFor(u, err))
			return watch.Event{Type: watch.Deleted, Object: stub(u)}, true
		}
		return watch.Event{Type: in.Type, Object: nhc}, true
	}
	return newFilteredWatch(inner, translate), nil
}

// stub is the typed object a DELETED event for an undecodable object carries.
func stub(u *unstructured.Unstructured) *remediationv1alpha1.NodeHealthCheck {
	return &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{
		Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(), Generation: u.GetGeneration()}}
}

// complete makes the registry what a complete list found, and logs what is new.
func (l *listWatcher) complete(ctx context.Context, undecodable map[string]Entry) {
	for _, e := range l.registry.replace(undecodable) {
		logUndecodable(ctx, e)
	}
}

func (l *listWatcher) report(ctx context.Context, e Entry) {
	if l.registry.report(e) {
		logUndecodable(ctx, e)
	}
}

// forget removes the named NodeHealthCheck from the registry; fixed says it decodes again (rather
// than being deleted), which is logged.
func (l *listWatcher) forget(ctx context.Context, name string, fixed bool) {
	if l.registry.forget(name) && fixed {
		ctrl.LoggerFrom(ctx).Info("NodeHealthCheck can be decoded again and is no longer ignored", "nodeHealthCheck", klog.KRef("", name))
	}
}

func logUndecodable(ctx context.Context, e Entry) {
	ctrl.LoggerFrom(ctx).Error(errors.New(e.Error), "NodeHealthCheck cannot be decoded and is ignored until its spec is fixed",
		"nodeHealthCheck", klog.KRef("", e.Name), "resourceVersion", e.ResourceVersion)
}

// filteredWatch passes each event of a watch through a function that may replace or drop it. Unlike
// watch.Filter it never blocks on a receiver that stopped: Stop ends its goroutine.
type filteredWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newFilteredWatch(inner watch.Interface, f func(watch.Event) (watch.Event, bool)) *filteredWatch {
	w := &filteredWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for {
			select {
			case <-w.stop:
				return
			case in, ok := <-inner.ResultChan():
				if !ok {
					return
				}
				ev, keep := f(in)
				if !keep {
					continue
				}
				select {
				case w.out <- ev:
				case <-w.stop:
					return
				}
			}
		}
	}()
	return w
}

// ResultChan returns the translated events.
func (w *filteredWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop stops the underlying watch and the translation.
func (w *filteredWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

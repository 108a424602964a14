package watch

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Dynamic adds watches for kinds that are only known at run time (remediation templates and CRs,
// the upgrade detectors' kinds) to one running controller, once per kind, through the manager's
// shared cache.
type Dynamic struct {
	controller controller.Controller
	cache      cache.Cache
	mu         sync.Mutex
	watched    map[schema.GroupVersionKind]bool
}

// NewDynamic returns a Dynamic for the controller, reading through the cache.
func NewDynamic(c controller.Controller, cache cache.Cache) *Dynamic {
	return &Dynamic{controller: c, cache: cache, watched: map[schema.GroupVersionKind]bool{}}
}

// Bind makes d add its watches to the controller c: a Dynamic made before its controller (nil
// controller, as the wiring of a gatherer makes it) is bound once the controller is built.
func (w *Dynamic) Bind(c controller.Controller) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.controller = c
}

// Ensure watches gvk with the handler, unless it already does. A kind the API server does not
// serve yet is not an error: Ensure returns false and the caller tries again on a later reconcile
// (the controllers watch CRDs, so one comes when the kind appears).
func (w *Dynamic) Ensure(gvk schema.GroupVersionKind, h handler.EventHandler) (bool, error) {
	if w == nil {
		return false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[gvk] {
		return true, nil
	}
	if w.controller == nil {
		return false, fmt.Errorf("watching %s: the watch of remediation kinds is not bound to its controller", gvk)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err := w.controller.Watch(source.Kind[client.Object](w.cache, obj, h))
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("watching %s: %w", gvk, err)
	}
	w.watched[gvk] = true
	return true, nil
}

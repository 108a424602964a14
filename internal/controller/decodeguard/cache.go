package decodeguard

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// NewCache returns a cache.NewCacheFunc (for ctrl.Options.NewCache) that builds the cache with next
// (cache.New when nil) but gives its typed NodeHealthCheck informer the guarded list-watch
// (NewListerWatcher) and a new Registry, which RegistryOf finds on the cache it returns. Informers of
// every other type, and unstructured or metadata-only NodeHealthCheck informers, are made as before.
// Label and field selectors configured for NodeHealthChecks are not applied: the operator sets none.
func NewCache(next cache.NewCacheFunc) cache.NewCacheFunc {
	if next == nil {
		next = cache.New
	}
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		dynCfg := rest.CopyConfig(cfg)
		dynCfg.NegotiatedSerializer = nil // the dynamic client sets its own, as in controller-runtime
		var client *dynamic.DynamicClient
		var err error
		if opts.HTTPClient != nil {
			client, err = dynamic.NewForConfigAndClient(dynCfg, opts.HTTPClient)
		} else {
			client, err = dynamic.NewForConfig(dynCfg)
		}
		if err != nil {
			return nil, fmt.Errorf("creating the NodeHealthCheck client: %w", err)
		}
		registry := NewRegistry()
		opts.NewInformer = newInformerFunc(opts.NewInformer, client.Resource(Resource), registry)
		c, err := next(cfg, opts)
		if err != nil {
			return nil, err
		}
		return &guardedCache{Cache: c, registry: registry}, nil
	}
}

// RegistryOf returns the Registry of a cache made by NewCache, or nil for any other cache.
func RegistryOf(c cache.Cache) *Registry {
	if g, ok := c.(*guardedCache); ok {
		return g.registry
	}
	return nil
}

// guardedCache is the cache NewCache returns: the cache itself, and where its undecodable
// NodeHealthChecks are recorded.
type guardedCache struct {
	cache.Cache
	registry *Registry
}

type newInformer = func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer

// newInformerFunc returns a cache.Options.NewInformer that substitutes the guarded list-watch for the
// typed NodeHealthCheck informer and leaves the others to next.
func newInformerFunc(next newInformer, client dynamic.ResourceInterface, registry *Registry) newInformer {
	if next == nil {
		next = toolscache.NewSharedIndexInformer
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if _, ok := obj.(*remediationv1alpha1.NodeHealthCheck); ok {
			lw = NewListerWatcher(client, registry)
		}
		return next(lw, obj, resync, indexers)
	}
}

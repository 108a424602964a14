package watch

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// Indexes are the shared cache's indexed stores a gatherer reads (targets.Indexes): the informers
// of the remediation kinds with targets.CRIndexers' indexes, and the Node informer with
// targets.NodeIndexers'. An informer's indexes are updated with its store, under the same lock, so a
// lookup sees exactly what a list of the cache would.
type Indexes struct {
	cache cache.Cache

	mu     sync.Mutex
	stores map[schema.GroupVersionKind]toolscache.Indexer
	nodes  toolscache.Indexer
	nhcs   toolscache.Indexer
}

// Indexes offer the NodeHealthCheck informer's store too.
var _ targets.NodeHealthCheckStore = (*Indexes)(nil)

// NewIndexes returns the Indexes of the cache.
func NewIndexes(c cache.Cache) *Indexes {
	return &Indexes{cache: c, stores: map[schema.GroupVersionKind]toolscache.Indexer{}}
}

// CRs returns the store of the kind's informer, its indexes added on first use; false when the
// informer has no store to index (not client-go's) or has stopped.
func (x *Indexes) CRs(ctx context.Context, gvk schema.GroupVersionKind) (toolscache.Indexer, bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.stores[gvk]; ok {
		return s, true, nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	s, ok, err := x.indexed(ctx, obj, targets.CRIndexers())
	if err != nil || !ok {
		return nil, false, err
	}
	x.stores[gvk] = s
	return s, true, nil
}

// Nodes returns the Node informer's store with its indexes; false when it has none.
func (x *Indexes) Nodes() (toolscache.Indexer, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.nodes == nil {
		s, ok, err := x.indexed(context.Background(), &corev1.Node{}, targets.NodeIndexers())
		if err != nil || !ok {
			return nil, false
		}
		x.nodes = s
	}
	return x.nodes, true
}

// NodeHealthChecks returns the NodeHealthCheck informer's store; false when it has none.
func (x *Indexes) NodeHealthChecks() (toolscache.Store, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.nhcs == nil {
		s, ok, err := x.indexed(context.Background(), &remediationv1alpha1.NodeHealthCheck{}, nil)
		if err != nil || !ok {
			return nil, false
		}
		x.nhcs = s
	}
	return x.nhcs, true
}

// adding serializes the indexes' additions across every Indexes of the process: the controllers
// share the cache's informers, and an informer refuses an index it has.
var adding sync.Mutex

// indexed returns the store of obj's informer with the indexers, adding those it lacks.
func (x *Indexes) indexed(ctx context.Context, obj client.Object, indexers toolscache.Indexers) (toolscache.Indexer, bool, error) {
	informer, err := x.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, false, err
	}
	getter, ok := informer.(interface{ GetIndexer() toolscache.Indexer })
	if !ok || informer.IsStopped() {
		return nil, false, nil
	}
	store := getter.GetIndexer()
	adding.Lock()
	defer adding.Unlock()
	missing := toolscache.Indexers{}
	have := store.GetIndexers()
	for name, f := range indexers {
		if _, ok := have[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) > 0 {
		if err := informer.AddIndexers(missing); err != nil {
			return nil, false, fmt.Errorf("indexing %T: %w", obj, err)
		}
	}
	return store, true, nil
}

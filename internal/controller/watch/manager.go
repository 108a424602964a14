package watch

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/controller/decodeguard"
	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// Errors records the list and watch errors of the caches ConfigureManager configures: one record
// per process, as the errors are facts about the API server. The wiring injects it where kinds are
// judged readable (NewWiring's gatherers, and internal/controller.NewKindSync).
var Errors = targets.NewWatchErrors()

// ConfigureManager sets the manager options the controllers rely on: reads of unstructured objects
// (templates and remediation CRs, whose kinds are only known at run time) are served from the shared
// cache, cached Nodes and Machines are trimmed to what decisions read, cached objects carry no
// managedFields, and a NodeHealthCheck the operator cannot decode is left out of the cache (and
// reported) instead of keeping the whole NodeHealthCheck cache from syncing (decodeguard.NewCache).
func ConfigureManager(o *ctrl.Options) {
	o.NewCache = decodeguard.NewCache(o.NewCache)
	if o.Client.Cache == nil {
		o.Client.Cache = &client.CacheOptions{}
	}
	o.Client.Cache.Unstructured = true
	if o.Cache.ByObject == nil {
		o.Cache.ByObject = map[client.Object]cache.ByObject{}
	}
	o.Cache.ByObject[&corev1.Node{}] = cache.ByObject{Transform: TrimNode}
	// Nothing reads managedFields; they were about a third of each cached remediation CR (an
	// unstructured map) in the scale benchmark's outage.
	if o.Cache.DefaultTransform == nil {
		o.Cache.DefaultTransform = cache.TransformStripManagedFields()
	}
	// A remediation kind whose list or watch fails is told apart from a healthy one
	// (Errors): it disables only the NodeHealthChecks that use it.
	if o.Cache.DefaultWatchErrorHandler == nil {
		o.Cache.DefaultWatchErrorHandler = Errors.Handler
	}
	// Machines (both kinds, read as unstructured objects: one informer per kind, shared by the
	// Machine links and the Cluster API MachineHealthCheck detector) keep only what is read of them.
	o.Cache.DefaultTransform = machines.Transform(o.Cache.DefaultTransform)
}

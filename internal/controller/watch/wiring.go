package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/notify"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/templateaccess"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// Sources are what the controllers decide from besides the manager's cache, built once per process
// (internal/controller.SetupWithManager) and shared by every controller's gatherer, so that they decide alike.
type Sources struct {
	// Machines reads nodes' Machines, verified: which nodes are control-plane nodes, and the CR's
	// Machine owner. Required.
	Machines *targets.Machines
	// Gate is the upgrade gate the upgradeguard feeds; nil: no upgrade awareness (a controller
	// tested alone). MaxPause bounds how long each of its signals holds remediation back.
	Gate     *upgrade.Gate
	MaxPause time.Duration
	// ReturnGrace and RemovalHold are health.Input's; zero: off, no bound.
	ReturnGrace, RemovalHold time.Duration
	// Changes are the node condition changes this process saw; nil: the conditions'
	// lastTransitionTime alone counts.
	Changes *ConditionChanges
	// Templates reads remediation templates with the rights remediators grant; nil: through the cache.
	Templates *templateaccess.Reader
	// Leases reads node leases in LeaseNamespace (the lease cache); nil: leases are not read.
	Leases         client.Reader
	LeaseNamespace string
	// Skew measures the clock skew; nil: not measured.
	Skew *clockskew.Monitor
	// Refusals are the CR creates the API server refused for good; nil: none recorded.
	Refusals *targets.Refusals
	// EtcdGuard turns on OpenShift's etcd quorum guard (read around the cache).
	EtcdGuard bool
}

// Wiring is what one controller decides with, built from the shared Sources by NewWiring: a
// gatherer ready to use, the routes of node, lease and CR events to the NodeHealthChecks they
// concern (the gatherer's node source too), and the watch of the remediation kinds the gatherer
// reads, which the controller binds to itself once it is built (Bind).
type Wiring struct {
	Gatherer *targets.Gatherer
	Routes   *Affected
	Kinds    *Dynamic
	sources  Sources
	// crEvents routes the events of the remediation kinds the gatherer watches (Bind).
	crEvents handler.EventHandler
}

// NewWiring builds a controller's Wiring over the manager, configured with ConfigureManager (its
// cache's list and watch errors are Errors), and the shared sources. The controller binds it once it
// is built (Bind).
func NewWiring(mgr ctrl.Manager, s Sources) (*Wiring, error) {
	if s.Machines == nil {
		return nil, errors.New("wiring a controller: Sources.Machines is required")
	}
	routes, err := AffectedFor(mgr)
	if err != nil {
		return nil, err
	}
	if s.Changes != nil {
		routes.Changes = s.Changes
	}
	w := &Wiring{Routes: routes, sources: s}
	w.Kinds = NewDynamic(nil, mgr.GetCache())
	g := &targets.Gatherer{Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Informers: mgr.GetCache(), WatchErrors: Errors, Nodes: routes, Wall: clock.RealClock{},
		Watch:    func(gvk schema.GroupVersionKind) (bool, error) { return w.Kinds.Ensure(gvk, w.crEvents) },
		Indexes:  NewIndexes(mgr.GetCache()),
		Machines: s.Machines, MaxPause: s.MaxPause, ReturnGrace: s.ReturnGrace, RemovalHold: s.RemovalHold,
		Leases: s.Leases, LeaseNamespace: cmp.Or(s.LeaseNamespace, lease.DefaultNamespace), Refusals: s.Refusals}
	// Interfaces hold only what is set: a nil pointer in one is not a missing source.
	if s.Gate != nil {
		g.Gate = s.Gate
	}
	if s.Changes != nil {
		g.Changes = s.Changes
	}
	if s.Templates != nil {
		g.Access = s.Templates
	}
	if s.Skew != nil {
		g.Skew = s.Skew
	}
	if s.EtcdGuard {
		g.Etcd = &targets.EtcdReader{Reader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper()}
	}
	w.Gatherer = g
	return w, nil
}

// Bind makes the watches the gatherer adds, of the remediation kinds it reads, the controller c's,
// routing their events with crEvents (nil: to the NodeHealthChecks that own the CRs,
// Routes.CREvents). Before it, no kind is watched.
func (w *Wiring) Bind(c controller.Controller, crEvents handler.EventHandler) {
	if crEvents == nil {
		crEvents = w.Routes.CREvents()
	}
	w.crEvents = crEvents
	w.Kinds.Bind(c)
}

// Wakeups are the sources that make a controller look at every NodeHealthCheck (h) again: the
// upgrade gate opening or closing, the clock skew crossing its bound, a CR create refused or
// allowed again; each subscribes anew, one per controller.
func (w *Wiring) Wakeups(h handler.EventHandler) []source.Source {
	var out []source.Source
	if w.sources.Gate != nil {
		out = append(out, notify.Source(w.sources.Gate.Changes(), h))
	}
	if w.sources.Skew != nil {
		out = append(out, source.Channel(w.sources.Skew.Changes(), h))
	}
	if w.sources.Refusals != nil {
		out = append(out, source.Channel(w.sources.Refusals.Changes(), h))
	}
	return out
}

// Templates is how the controllers read templates (targets.TemplatesThrough).
func (w *Wiring) Templates() targets.TemplateGetter {
	return targets.TemplatesThrough(w.sources.Templates, w.Gatherer.Reader)
}

// TemplateWatchable reports whether the operator may list and watch the template kind (every kind
// may, without a reader of templates with the rights remediators grant).
func (w *Wiring) TemplateWatchable(ctx context.Context, gvk schema.GroupVersionKind) (bool, error) {
	if w.sources.Templates == nil {
		return true, nil
	}
	return w.sources.Templates.Watchable(ctx, gvk)
}

// Dependency is one thing a controller cannot run without, and whether it is set.
type Dependency struct {
	Name string
	Set  bool
}

// Require returns an error naming the dependencies of the controller that are not set; nil when
// every one is. Controllers check theirs when they are set up, instead of falling back at each use.
func Require(controller string, deps ...Dependency) error {
	var missing []string
	for _, d := range deps {
		if !d.Set {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the %s controller is not wired: %s not set", controller, strings.Join(missing, ", "))
}

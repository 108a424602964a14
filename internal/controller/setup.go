// Package controller wires the operator's controllers into a manager, in one place, so the manager
// binary and the test suites run exactly the same setup.
package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/controller/decodeguard"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	"github.com/medik8s/node-healthcheck/internal/controller/upgradeguard"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/eventseries"
	"github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/templateaccess"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// Options configure the controllers.
type Options struct {
	// Clock tells the time; clock.RealClock{} in production, a fake clock in tests.
	Clock clock.PassiveClock
	// LeaseNamespace holds the node leases (lease.DefaultNamespace when empty).
	LeaseNamespace string
	// Release labels the node leases the remediation controller creates (lease.ReleaseLabel), so
	// that this release's uninstall deletes only its own; empty: no label.
	Release string
	// Upgrade configures upgrade-aware pausing.
	Upgrade UpgradeOptions
	// Gate, when set, is the upgrade gate to use (tests inspect and drive it); a new one otherwise.
	Gate *upgrade.Gate
	// ReturnGrace is the returning-node hold: while a NodeHealthCheck's healthy-node threshold holds
	// only by counting nodes that came back less than this ago, no new remediation starts
	// (health.Input.ReturnGrace). Zero: off.
	ReturnGrace time.Duration
	// RemovalHold bounds how long a node's removal holds its remediation back, where a
	// NodeHealthCheck skips nodes being removed (health.Input.RemovalHold). Zero: no bound.
	RemovalHold time.Duration
	// ConditionChanges, when set, is the record of node condition changes to use (test suites whose
	// fixtures backdate conditions give one that trusts every time, watch.TrustEveryConditionTime);
	// a new one otherwise, which does not trust condition times further than the clock-skew bound
	// from the manager's view of them.
	ConditionChanges *watch.ConditionChanges
	// ConditionTimeBound, for a new record of node condition changes (ConditionChanges nil), bounds
	// how far a condition's time may be from the manager's view of it (--condition-time-bound): zero,
	// the clock-skew bound (targets.DefaultFutureBound without one); negative, every time is trusted.
	ConditionTimeBound time.Duration
	// ClockSkew measures the skew between the manager's clock and the API server's and says whether
	// it is beyond --max-clock-skew. It measures only the requests of a config its Wrap was
	// installed on before the manager was created (cmd/manager does so).
	ClockSkew *clockskew.Monitor
	// SeriesGrace is how long the metric series of a node that no NodeHealthCheck selects or lists
	// any more stay before they are deleted (nhc.Reconciler.SeriesGrace); zero:
	// nhc.DefaultSeriesGrace.
	SeriesGrace time.Duration
	// Controllers, when set, receives the controllers set up and the in-memory records they share,
	// for tests that check what they keep.
	Controllers *Controllers
}

// Controllers are the controllers SetupWithManager set up, and the in-memory records they share.
type Controllers struct {
	// NHC is the status writer.
	NHC *nhc.Reconciler
	// Remediation is the writer of remediation CRs and node leases.
	Remediation *remediation.Reconciler
	// Refusals are the refused CR creates both decide from.
	Refusals *targets.Refusals
	// Changes are the node condition changes both decide from.
	Changes *watch.ConditionChanges
	// Gate is the upgrade gate.
	Gate *upgrade.Gate
}

// UpgradeOptions turn on the plain-Kubernetes upgrade detectors (the OpenShift ones turn on by
// themselves) and bound the pause.
type UpgradeOptions struct {
	// ClusterAPI pauses while a KubeadmControlPlane or MachineDeployment rolls out.
	ClusterAPI bool
	// NodeRollout pauses a NodeHealthCheck while its nodes run kubelets of different minor versions
	// and one of them is cordoned.
	NodeRollout bool
	// PauseObject, when set, names a ConfigMap or Lease whose existence pauses every NodeHealthCheck.
	PauseObject types.NamespacedName
	// MaxPause, when positive, resumes remediation after a signal held it back this long, each signal
	// from when it began; the pause object's signal is not bounded.
	MaxPause time.Duration
}

// NewTemplateReader returns the manager's reader of remediation templates: cached and watched when
// the operator may list and watch their kind (read only once the kind's informer has synced, by
// synced), read directly otherwise.
func NewTemplateReader(mgr ctrl.Manager, synced *targets.KindSync) *templateaccess.Reader {
	return &templateaccess.Reader{Cached: mgr.GetClient(), Direct: mgr.GetAPIReader(), Reviewer: mgr.GetClient(), Mapper: mgr.GetRESTMapper(), Synced: synced}
}

// NewKindSync returns the readable-or-skip rule of the manager's cache for the kinds the
// controllers read by name (templates, Machines): no read waits for an informer that does not sync.
func NewKindSync(mgr ctrl.Manager) *targets.KindSync {
	return &targets.KindSync{Informers: mgr.GetCache(), APIReader: mgr.GetAPIReader(), Errors: watch.Errors}
}

// ConfigureManager sets the manager options the controllers rely on (see watch.ConfigureManager).
func ConfigureManager(o *ctrl.Options) { watch.ConfigureManager(o) }

// SetupWithManager registers the upgradeguard (its cluster-wide and node-level detectors), nhc and
// remediation controllers with the manager, sharing one upgrade gate that only the upgradeguard
// writes, and the reporter of NodeHealthChecks the cache leaves out because they
// cannot be decoded. The manager must have been configured with ConfigureManager.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	if o.Clock == nil {
		return fmt.Errorf("setting up the controllers: Options.Clock is required (clock.RealClock{} in production)")
	}
	registry := decodeguard.RegistryOf(mgr.GetCache())
	if registry == nil {
		return fmt.Errorf("the manager's cache has no NodeHealthCheck decode guard: configure the manager with ConfigureManager")
	}
	if err := (&decodeguard.Reporter{
		Registry: registry,
		Recorder: mgr.GetEventRecorder(decodeguard.ControllerName),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", decodeguard.ControllerName, err)
	}
	gate := o.Gate
	if gate == nil {
		gate = upgrade.NewGate(o.Upgrade.NodeRollout)
	}
	synced := NewKindSync(mgr)
	templates := NewTemplateReader(mgr, synced)
	leases, err := remediation.NewLeaseCache(mgr, leaseNamespace(o.LeaseNamespace))
	if err != nil {
		return err
	}
	refusals := &targets.Refusals{}
	// One record of node condition changes for both controllers: they decide alike which nodes came
	// back.
	// Condition times further than the clock-skew bound from the manager's view of them are not
	// trusted (the kubelet's or node-problem-detector's clock, or a forged time).
	changes := o.ConditionChanges
	if changes == nil {
		timeBound := o.ConditionTimeBound
		switch {
		case timeBound < 0:
			timeBound = watch.TrustEveryConditionTime
		case timeBound > 0:
		case o.ClockSkew != nil && o.ClockSkew.Bound() > 0:
			timeBound = o.ClockSkew.Bound()
		default:
			timeBound = targets.DefaultFutureBound
		}
		changes = watch.NewConditionChanges(o.Clock, timeBound)
	}
	if err := changes.Register(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	// One reader of nodes' Machines for both controllers: they decide alike which nodes are
	// control-plane nodes.
	machines := targets.NewMachines(mgr.GetClient())
	machines.Synced = synced
	// What both controllers decide from, built once: each gets a gatherer of its own over them
	// (watch.NewWiring), so that they decide alike.
	sources := watch.Sources{Machines: machines, Gate: gate, MaxPause: o.Upgrade.MaxPause, ReturnGrace: o.ReturnGrace, RemovalHold: o.RemovalHold,
		Changes: changes, Templates: templates, Leases: leases, LeaseNamespace: o.LeaseNamespace, Skew: o.ClockSkew, Refusals: refusals, EtcdGuard: true}
	if err := (&upgradeguard.Guard{
		Client:      mgr.GetClient(),
		Mapper:      mgr.GetRESTMapper(),
		Gate:        gate,
		Recorder:    mgr.GetEventRecorder(upgradeguard.ControllerName),
		Clock:       o.Clock,
		ClusterAPI:  o.Upgrade.ClusterAPI,
		PauseObject: o.Upgrade.PauseObject,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", upgradeguard.ControllerName, err)
	}
	guardWiring, err := watch.NewWiring(mgr, sources)
	if err != nil {
		return err
	}
	if err := (&upgradeguard.NodeGuard{
		Client: mgr.GetClient(),
		Gate:   gate,
		Clock:  o.Clock,
		Wiring: guardWiring,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", upgradeguard.NodeControllerName, err)
	}
	seriesGrace := o.SeriesGrace
	if seriesGrace == 0 {
		seriesGrace = nhc.DefaultSeriesGrace
	}
	nhcWiring, err := watch.NewWiring(mgr, sources)
	if err != nil {
		return err
	}
	statusWriter := &nhc.Reconciler{
		Client:   mgr.GetClient(),
		Clock:    o.Clock,
		Wall:     clock.RealClock{},
		Recorder: eventseries.New(mgr.GetEventRecorder(nhc.ControllerName)),
		Wiring:   nhcWiring,
		// The remediation controller runs too: a node is listed with its first CR in one write.
		StartWait: nhc.DefaultStartWait,
		// Many nodes changing within a short window: their changes go out in few writes.
		StatusBatch: nhc.DefaultStatusBatch,
		SeriesGrace: seriesGrace,
	}
	if err := statusWriter.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", nhc.ControllerName, err)
	}
	actorWiring, err := watch.NewWiring(mgr, sources)
	if err != nil {
		return err
	}
	actor := &remediation.Reconciler{
		Client:         mgr.GetClient(),
		Clock:          o.Clock,
		Wall:           clock.RealClock{},
		APIReader:      mgr.GetAPIReader(),
		LeaseNamespace: o.LeaseNamespace,
		Release:        o.Release,
		Leases:         leases,
		Refusals:       refusals,
		Recorder:       eventseries.New(mgr.GetEventRecorder(remediation.ControllerName)),
		Wiring:         actorWiring,
	}
	if err := actor.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", remediation.ControllerName, err)
	}
	if o.Controllers != nil {
		*o.Controllers = Controllers{NHC: statusWriter, Remediation: actor, Refusals: refusals, Changes: changes, Gate: gate}
	}
	return nil
}

// leaseNamespace is the namespace of node leases: ns, or lease.DefaultNamespace when empty.
func leaseNamespace(ns string) string {
	if ns == "" {
		return lease.DefaultNamespace
	}
	return ns
}

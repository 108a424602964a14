// Package controller wires the operator's controllers into a manager, in one place, so the manager
// binary and the test suites run exactly the same setup.
package controller

import (
	"fmt"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
)

// Options configure the controllers.
type Options struct {
	// Clock tells the time; clock.RealClock{} in production, a fake clock in tests.
	Clock clock.PassiveClock
	// LeaseNamespace holds the node leases (remediation.DefaultLeaseNamespace when empty).
	LeaseNamespace string
}

// ConfigureManager sets the manager options the controllers rely on (see nhc.ConfigureManager).
func ConfigureManager(o *ctrl.Options) { nhc.ConfigureManager(o) }

// SetupWithManager registers the nhc and remediation controllers with the manager.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	if err := (&nhc.Reconciler{
		Client:   mgr.GetClient(),
		Clock:    o.Clock,
		Recorder: mgr.GetEventRecorder(nhc.ControllerName),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", nhc.ControllerName, err)
	}
	if err := (&remediation.Reconciler{
		Client:         mgr.GetClient(),
		Clock:          o.Clock,
		APIReader:      mgr.GetAPIReader(),
		LeaseNamespace: o.LeaseNamespace,
		Recorder:       mgr.GetEventRecorder(remediation.ControllerName),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", remediation.ControllerName, err)
	}
	return nil
}

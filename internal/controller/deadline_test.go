package controller_test

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// recordingManager records what is added to the manager: the controllers among it.
type recordingManager struct {
	manager.Manager
	added []manager.Runnable
}

func (m *recordingManager) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return m.Manager.Add(r)
}

// maxDeadline bounds every controller's reconcile deadline: a read that cannot complete (a kind
// whose informer never syncs) must give its worker back within it.
const maxDeadline = 2 * time.Minute

// TestEveryControllerHasADeadline sets the operator's controllers up, as cmd/manager does, on a
// manager of a real API server, and checks that each controller they register bounds its reconciles
// (controller-runtime's ReconciliationTimeout): no read waits for ever. A deadline shows only after
// it passes, minutes into a blocked reconcile, so this checks how each controller is built instead,
// from the controller-runtime controller itself.
func TestEveryControllerHasADeadline(t *testing.T) {
	cfg := testutil.StartControlPlane(t)
	opts := ctrl.Options{Scheme: testutil.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: new(true)}}
	controller.ConfigureManager(&opts)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	recording := &recordingManager{Manager: mgr}
	if err := controller.SetupWithManager(recording, controller.Options{Clock: clock.RealClock{}}); err != nil {
		t.Fatal(err)
	}
	deadlines := map[string]time.Duration{}
	for _, r := range recording.added {
		v := reflect.ValueOf(r)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		name, timeout := v.Elem().FieldByName("Name"), v.Elem().FieldByName("ReconciliationTimeout")
		if !name.IsValid() || !timeout.IsValid() || timeout.Type() != reflect.TypeFor[time.Duration]() {
			continue // not a controller: a cache, a probe
		}
		deadlines[name.String()] = time.Duration(timeout.Int())
	}
	for _, name := range []string{"nodehealthcheck", "remediation", "upgradeguard", "upgradeguard-nodes", "nodehealthcheck-decodeguard"} {
		if _, ok := deadlines[name]; !ok {
			t.Errorf("controller %s was not set up (controllers: %v)", name, deadlines)
		}
	}
	for name, d := range deadlines {
		if d <= 0 || d > maxDeadline {
			t.Errorf("controller %s: reconcile deadline %s, want one of at most %s", name, d, maxDeadline)
		}
	}
}

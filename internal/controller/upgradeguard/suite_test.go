package upgradeguard_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/controller/upgradeguard"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// All three controllers run as in the manager, with every plain-Kubernetes detector on and a
// maximum pause, on a control plane that serves Cluster API's kinds but not OpenShift's (until a
// spec installs ClusterVersion).
var (
	gate = upgrade.NewGate(true)
	e    = testutil.ControllerSuite(testutil.SuiteOptions{
		EnvOptions: testutil.EnvOptions{CRDDirs: []string{testutil.Path("test", "crds", "capi")}},
		Configure:  controller.ConfigureManager,
		Setup: func(mgr ctrl.Manager, clock *clocktesting.FakeClock) error {
			return controller.SetupWithManager(mgr, controller.Options{Clock: clock, Gate: gate, Upgrade: controller.UpgradeOptions{
				ClusterAPI: true, NodeRollout: true, PauseObject: pauseKey, MaxPause: maxPause,
			}, ConditionChanges: watch.NewConditionChanges(clock, watch.TrustEveryConditionTime)}) // fixtures backdate conditions
		},
	})
)

const maxPause = 6 * time.Hour

var pauseKey = types.NamespacedName{Namespace: "default", Name: "pause-remediation"}

func TestUpgradeGuard(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "upgradeguard suite")
}

// pauseConfigMap creates the pause ConfigMap; it is deleted after the spec (or earlier by the spec).
func pauseConfigMap(ctx context.Context, reason string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: pauseKey.Namespace, Name: pauseKey.Name}, Data: map[string]string{"reason": reason}}
	e.Create(ctx, cm)
	return cm
}

// gateMetric reads nodehealthcheck_upgrade_gate for the detector and state (-1: no such series).
func gateMetric(detector, state string) func() float64 {
	return func() float64 {
		if m := testutil.Series(upgradeguard.MetricGate, map[string]string{"detector": detector, "state": state}); m != nil {
			return m.GetGauge().GetValue()
		}
		return -1
	}
}

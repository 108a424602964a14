package nhc_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// The nhc controller runs alone here: specs create remediation CRs themselves (e.NewCR) to play the
// remediation controller's part.
var (
	reconciler *nhc.Reconciler
	e          = testutil.ControllerSuite(testutil.SuiteOptions{
		Configure: watch.ConfigureManager,
		Setup: func(mgr ctrl.Manager, clock *clocktesting.FakeClock) error {
			reconciler = &nhc.Reconciler{Client: mgr.GetClient(), Clock: clock, Recorder: mgr.GetEventRecorder(nhc.ControllerName)}
			return reconciler.SetupWithManager(mgr)
		},
	})
)

func TestNHCController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "nhc controller suite")
}

package remediation_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// returnGrace is the returning-node hold the controllers run with, on in production.
const returnGrace = time.Minute

var (
	// requests records the manager's requests to the API server.
	requests = &testutil.RequestCounter{}
	// Both controllers run, as in the manager: nhc reports in status, remediation acts. Every spec
	// starts with the fake clock at real time.
	e = testutil.ControllerSuite(testutil.SuiteOptions{
		EnvOptions: testutil.EnvOptions{ManagerTransport: requests.Wrap},
		Configure:  controller.ConfigureManager,
		Setup: func(mgr ctrl.Manager, clock *clocktesting.FakeClock) error {
			return controller.SetupWithManager(mgr, controller.Options{Clock: clock, ReturnGrace: returnGrace})
		},
		ClockAtRealTime: true,
	})
)

func TestRemediationController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "remediation controller suite")
}

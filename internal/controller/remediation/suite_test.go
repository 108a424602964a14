package remediation_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// Both controllers run, as in the manager: nhc decides in status, remediation acts on it.
var e *testutil.ControllerEnv

// returnGrace is the returning-node hold the controllers run with, on in production.
const returnGrace = time.Minute

// requests records the manager's requests to the API server.
var requests = &testutil.RequestCounter{}

func TestRemediationController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "remediation controller suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	e = testutil.StartControllersWithOptions(testutil.EnvOptions{ManagerTransport: requests.Wrap}, controller.ConfigureManager, func(mgr ctrl.Manager, clock *clocktesting.FakeClock) error {
		return controller.SetupWithManager(mgr, controller.Options{Clock: clock, ReturnGrace: returnGrace})
	})
})

var _ = AfterSuite(func() { e.Stop() })

// Every spec starts with the fake clock at real time: step timers and overdue steps run from the
// CRs' creationTimestamps, which the API server sets from its own (real) clock, so a fake clock a
// previous spec left hours ahead would time a new CR out at once.
var _ = BeforeEach(func() { e.Clock.SetTime(time.Now().Truncate(time.Second)) })

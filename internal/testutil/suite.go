package testutil

import (
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // test helpers
	. "github.com/onsi/gomega"    //nolint:revive // test helpers
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// DefaultEventuallyTimeout is how long Eventually waits in a controller suite unless the suite says
// otherwise: long enough for a reconcile on a loaded machine, short enough to fail a spec soon.
const DefaultEventuallyTimeout = 15 * time.Second

// SuiteOptions set up a suite of controller specs, once: a control plane, and a manager running the
// controllers under test on a fake clock.
type SuiteOptions struct {
	EnvOptions
	// Configure sets the production manager options (for example controller.ConfigureManager).
	Configure func(*ctrl.Options)
	// Setup sets up the controllers under test on the manager, given the fake clock.
	Setup func(ctrl.Manager, *clocktesting.FakeClock) error
	// EventuallyTimeout is Eventually's default timeout; DefaultEventuallyTimeout when zero.
	EventuallyTimeout time.Duration
	// ClockAtRealTime sets the fake clock to the real time (whole seconds) before every spec: step
	// timers and overdue steps run from the CRs' creationTimestamps, which the API server sets from
	// its own, real clock, so a clock an earlier spec left hours ahead would time a new CR out at once.
	ClockAtRealTime bool
}

// ControllerSuite declares the suite's BeforeSuite, which logs to the GinkgoWriter, sets
// Eventually's defaults and starts the control plane and the manager as o says, and its AfterSuite,
// which stops them. It returns the environment, which is ready once BeforeSuite has run. Declare it
// at package level:
//
//	var e = testutil.ControllerSuite(testutil.SuiteOptions{Configure: ..., Setup: ...})
func ControllerSuite(o SuiteOptions) *ControllerEnv {
	e := &ControllerEnv{}
	BeforeSuite(func() {
		LogToGinkgo()
		timeout := o.EventuallyTimeout
		if timeout == 0 {
			timeout = DefaultEventuallyTimeout
		}
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
		e.start(o.EnvOptions, o.Configure, o.Setup)
	})
	AfterSuite(func() { e.Stop() })
	if o.ClockAtRealTime {
		BeforeEach(func() { e.Clock.SetTime(time.Now().Truncate(time.Second)) })
	}
	return e
}

// LogToGinkgo sends controller-runtime's logs to the GinkgoWriter (shown for failed specs).
func LogToGinkgo() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
}

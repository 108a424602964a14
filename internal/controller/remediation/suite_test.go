// Package remediation_test is the operator suite (TestOperator): every controller the manager runs
// (controller.SetupWithManager: nhc, remediation, upgradeguard, decodeguard), on one manager and one
// cache, against a real API server. It lives in the remediation controller's package, but its specs
// are about the operator as a whole: how what the remediation controller does (CRs, node leases)
// and what the nhc controller reports (status, events, metrics) fit together, and what kubectl nhc
// explain answers beside them. A spec of the nhc controller alone belongs in its own suite
// (internal/controller/nhc), which runs that controller alone and plays the remediation
// controller's part; one of explain alone in internal/explain. The specs here about what the nhc
// controller reports or explain answers, which need every controller, are in operator_*_test.go,
// each Describe named "Whole operator: ...".
package remediation_test

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// returnGrace is the returning-node hold the controllers run with, on in production.
const returnGrace = time.Minute

// release is the release identity the controllers label their node leases with.
const release = "nhc-system.nhc"

// seriesGrace is how long the metric series of a node no NodeHealthCheck holds any more stay
// (nhc.DefaultSeriesGrace in the manager): short, so that specs see them go.
const seriesGrace = 2 * time.Second

var (
	// conditionTimes is the controllers' record of node condition changes.
	conditionTimes *watch.ConditionChanges
	// requests records the manager's requests to the API server.
	requests = &testutil.RequestCounter{}
	// watches holds back what the manager's watches deliver, for specs of a lagging cache.
	watches = &testutil.WatchGate{}
	// controllers are the controllers the manager runs, for specs that look into their memory.
	controllers controller.Controllers
	// Every controller runs, as in the manager: nhc reports in status, remediation acts. Every spec
	// starts with the fake clock at real time.
	e = testutil.ControllerSuite(testutil.SuiteOptions{
		EnvOptions: testutil.EnvOptions{ManagerTransport: func(rt http.RoundTripper) http.RoundTripper { return requests.Wrap(watches.Wrap(rt)) }},
		Configure:  controller.ConfigureManager,
		Setup: func(mgr ctrl.Manager, clock *clocktesting.FakeClock) error {
			// The fixtures create nodes whose conditions changed long before (a node "down for an
			// hour"): every condition time is trusted but in the specs that set a bound.
			conditionTimes = watch.NewConditionChanges(clock, watch.TrustEveryConditionTime)
			return controller.SetupWithManager(mgr, controller.Options{Clock: clock, ReturnGrace: returnGrace, RemovalHold: health.DefaultRemovalHold,
				ConditionChanges: conditionTimes, SeriesGrace: seriesGrace, Release: release, Controllers: &controllers})
		},
		ClockAtRealTime: true,
	})
)

// TestOperator runs the operator suite.
func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "operator suite: every controller as the manager runs them")
}

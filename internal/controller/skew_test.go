package controller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// shiftedClock is the manager's clock in this suite: real time shifted by an offset the specs set,
// as a manager on a host whose clock is off would read it.
type shiftedClock struct{ offset atomic.Int64 }

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *shiftedClock) shift(d time.Duration)           { c.offset.Store(int64(d)) }

// The whole operator (both controllers, one manager) with its clock skew monitor on the manager's
// transport, as cmd/manager runs it, and a clock the specs shift both ways.
var (
	clk   = &shiftedClock{}
	bound = 10 * time.Second
	skew  = clockskew.New(clk, bound)
	e     = testutil.ControllerSuite(testutil.SuiteOptions{
		EnvOptions: testutil.EnvOptions{ManagerTransport: skew.Wrap},
		Configure:  controller.ConfigureManager,
		Setup: func(mgr ctrl.Manager, _ *clocktesting.FakeClock) error {
			probe, err := clockskew.NewProbe(skew, mgr.GetConfig())
			if err != nil {
				return err
			}
			probe.Interval = 200 * time.Millisecond // an idle manager measures again soon after each shift
			if err := mgr.Add(probe); err != nil {
				return err
			}
			// A node "down for an hour" is a fixture: its condition time is trusted.
			return controller.SetupWithManager(mgr, controller.Options{Clock: clk, ClockSkew: skew,
				ConditionChanges: watch.NewConditionChanges(clk, watch.TrustEveryConditionTime)})
		},
	})
)

func TestControllersUnderClockSkew(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "clock skew suite")
}

// skewCondition returns the NodeHealthCheck's ClockSkewExceeded condition.
func skewCondition(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck) func() *metav1.Condition {
	return func() *metav1.Condition {
		return meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeClockSkewExceeded)
	}
}

var _ = Describe("Clock skew", func() {
	It("holds every remediation while the manager's clock is minutes ahead of or behind the API server's, says so, and resumes once they agree", func(ctx SpecContext) {
		e.Clock.SetTime(time.Now()) // the nodes' conditions are written at real times
		clk.shift(5 * time.Minute)
		Eventually(func() bool { return skew.Verdict().Exceeded }).Should(BeTrue())

		group := e.Unique("g")
		for range 4 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		// Ready=Unknown for 10 seconds: a manager 5 minutes ahead reads 5m10s, past the default 300s.
		brief := e.NewNode(ctx, group, corev1.ConditionUnknown, 10*time.Second)
		down := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		recovered := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group)

		Eventually(skewCondition(ctx, n)).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", remediationv1alpha1.ConditionReasonClockSkewBeyondBound),
			HaveField("Message", ContainSubstring("The manager's clock is ahead of the API server's by more than 10s"))))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonClockSkewExceeded)).Should(ContainElement(
			MatchRegexp(`^The manager's clock is (4m59|5m0)[.0-9]*s ahead of the API server's`)), "the event says by how much")
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("%s (the manager's clock is ahead of the API server's by more than 10s (--max-clock-skew))", brief.Name))
		// A CR of a node that is healthy: the remediation controller removes it (recoveries are not
		// held), a witness that it decided after the shift.
		e.NewCR(ctx, n, recovered.Name)
		Eventually(e.TestCRs(ctx, recovered.Name)).Should(BeEmpty())
		Consistently(e.TestCRs(ctx, brief.Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.TestCRs(ctx, down.Name)()).To(BeEmpty())

		By("the manager's clock 5 minutes behind: held as well")
		clk.shift(-5 * time.Minute)
		Eventually(skewCondition(ctx, n)).Should(HaveField("Message", ContainSubstring("The manager's clock is behind the API server's by more than 10s")))
		e.NewCR(ctx, n, recovered.Name)
		Eventually(e.TestCRs(ctx, recovered.Name)).Should(BeEmpty())
		Consistently(e.TestCRs(ctx, down.Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("the clocks agree again: the node down for an hour is remediated, the one down for seconds is not")
		clk.shift(0)
		Eventually(e.TestCRs(ctx, down.Name)).Should(HaveLen(1))
		Eventually(skewCondition(ctx, n)).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", remediationv1alpha1.ConditionReasonClockSkewWithinBound)))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonClockSkewResolved))
		Expect(e.TestCRs(ctx, brief.Name)()).To(BeEmpty())
	})
})

package clockskew_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

const bound = 10 * time.Second

// shifted is the real clock moved by a shift the spec may change: the manager's clock that far
// ahead of the API server's (behind, when negative).
type shifted struct{ d atomic.Int64 }

func shiftedBy(d time.Duration) *shifted {
	s := &shifted{}
	s.d.Store(int64(d))
	return s
}

func (s *shifted) Now() time.Time                  { return time.Now().Add(time.Duration(s.d.Load())) }
func (s *shifted) Since(t time.Time) time.Duration { return s.Now().Sub(t) }
func (s *shifted) set(d time.Duration)             { s.d.Store(int64(d)) }

// wrapped returns a copy of the suite's config whose requests are counted and measured by m, as
// the manager's are.
func wrapped(m *clockskew.Monitor, counter *testutil.RequestCounter) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(counter.Wrap)
	c.Wrap(m.Wrap)
	return c
}

// expectSkew checks that the verdict has measured a manager clock shift ahead of the API server's:
// the true offset, -shift, lies in Offset ± Uncertainty, which is about a second wide after one
// response (the Date header's resolution and a round trip).
func expectSkew(v clockskew.Verdict, shift time.Duration) {
	GinkgoHelper()
	Expect(v.Known).To(BeTrue(), v.Message)
	Expect(v.Uncertainty).To(BeNumerically("<=", 750*time.Millisecond), v.Message)
	Expect(v.Offset).To(BeNumerically("~", -shift, v.Uncertainty+time.Millisecond), v.Message)
	Expect(v.Offset).To(BeNumerically("~", -shift, time.Second), v.Message)
	Expect(v.Bound).To(Equal(bound))
	Expect(v.Exceeded).To(Equal(shift.Abs() > bound), v.Message)
	switch {
	case shift > bound:
		Expect(v.Message).To(ContainSubstring("ahead of the API server's"))
	case shift < -bound:
		Expect(v.Message).To(ContainSubstring("behind the API server's"))
	}
	Expect(testutil.Series(clockskew.MetricSkew, nil).GetGauge().GetValue()).To(Equal(v.Offset.Seconds()))
	Expect(testutil.Series(clockskew.MetricUncertainty, nil).GetGauge().GetValue()).To(Equal(v.Uncertainty.Seconds()))
	exceeded := 0.0
	if v.Exceeded {
		exceeded = 1
	}
	Expect(testutil.Series(clockskew.MetricExceeded, nil).GetGauge().GetValue()).To(Equal(exceeded))
}

// probes returns the probe requests among the counter's since mark.
func probes(counter *testutil.RequestCounter, mark int) []testutil.Request {
	return counter.Since(mark, func(r testutil.Request) bool { return r.Path == "/version" })
}

var _ = Describe("The clock skew monitor on a real API server", func() {
	DescribeTable("measures a manager clock shifted",
		func(ctx SpecContext, shift time.Duration) {
			m := clockskew.New(shiftedBy(shift), bound)
			changes := m.Changes()
			cs := kubernetes.NewForConfigOrDie(wrapped(m, &testutil.RequestCounter{}))
			Expect(m.Verdict().Known).To(BeFalse())
			for range 5 {
				_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(changes).To(Receive(), "becoming known is a change")
			expectSkew(m.Verdict(), shift)
		},
		Entry("5 minutes ahead", 5*time.Minute),
		Entry("5 minutes behind", -5*time.Minute),
		Entry("not at all", time.Duration(0)),
		Entry("9 seconds ahead, within the bound", 9*time.Second),
		// 12s, not 11s: one response's interval is a second and a round trip wide, so at 11s it may
		// still reach back to the bound, and the skew counts as beyond only once it certainly is.
		Entry("12 seconds behind, beyond the bound", -12*time.Second),
	)

	It("measures a watch when it starts, before any event", func(ctx SpecContext) {
		m := clockskew.New(shiftedBy(-5*time.Minute), bound)
		cs := kubernetes.NewForConfigOrDie(wrapped(m, &testutil.RequestCounter{}))
		before := time.Now().Add(-5 * time.Minute)
		w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=no-such-configmap"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		Expect(w.ResultChan()).NotTo(Receive())
		v := m.Verdict()
		expectSkew(v, -5*time.Minute)
		Expect(v.Sampled).To(BeTemporally(">=", before))
	})

	It("follows the clock both ways: Exceeded flips at the bound and the controllers are notified", func(ctx SpecContext) {
		clk := shiftedBy(0)
		m := clockskew.New(clk, bound)
		changes := m.Changes()
		cs := kubernetes.NewForConfigOrDie(wrapped(m, &testutil.RequestCounter{}))
		// request sends one API request and returns the verdict.
		request := func() clockskew.Verdict {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return m.Verdict()
		}
		exceeded := func(v clockskew.Verdict) bool { return v.Exceeded }

		By("in step")
		expectSkew(request(), 0)
		Expect(changes).To(Receive())

		for _, shift := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
			By(fmt.Sprintf("the manager's clock jumps by %s", shift))
			clk.set(shift)
			Eventually(request).Should(Satisfy(exceeded))
			expectSkew(m.Verdict(), shift)
			Expect(changes).To(Receive())

			By("and back")
			clk.set(0)
			Eventually(request).ShouldNot(Satisfy(exceeded))
			expectSkew(m.Verdict(), 0)
			Expect(changes).To(Receive())
		}

		By("a change within the bound does not notify")
		clk.set(2 * time.Second)
		Eventually(request).Should(WithTransform(func(v clockskew.Verdict) time.Duration { return v.Offset }, BeNumerically("~", -2*time.Second, time.Second)))
		Expect(changes).NotTo(Receive())
	})

	It("probes only when no other request gave a sample for a probe interval", func(ctx SpecContext) {
		m := clockskew.New(shiftedBy(5*time.Minute), bound)
		counter := &testutil.RequestCounter{}
		c := wrapped(m, counter)
		probe, err := clockskew.NewProbe(m, c)
		Expect(err).NotTo(HaveOccurred())
		Expect(probe.Interval).To(Equal(clockskew.DefaultProbeInterval))
		Expect(probe.NeedLeaderElection()).To(BeFalse(), "every replica measures its own clock")
		timers := clocktesting.NewFakeClock(time.Now())
		probe.Clock = timers
		runProbe(probe)

		By("without traffic, a probe each interval keeps the estimate current")
		Eventually(timers.HasWaiters).Should(BeTrue())
		Expect(m.Verdict().Known).To(BeFalse())
		Expect(probes(counter, 0)).To(BeEmpty())
		var last time.Time
		for i := range 3 {
			timers.Step(clockskew.DefaultProbeInterval)
			Eventually(func() []testutil.Request { return probes(counter, 0) }).Should(HaveLen(i + 1))
			Eventually(timers.HasWaiters).Should(BeTrue(), "waiting for the next interval")
			v := m.Verdict()
			expectSkew(v, 5*time.Minute)
			Expect(v.Sampled).To(BeTemporally(">", last))
			last = v.Sampled
		}

		By("with other requests in every interval, no probe")
		cs := kubernetes.NewForConfigOrDie(c)
		mark := counter.Mark()
		for range 3 {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			timers.Step(clockskew.DefaultProbeInterval)
			// The probe has looked once it waits for the next interval again.
			Eventually(timers.HasWaiters).Should(BeTrue())
		}
		Expect(probes(counter, mark)).To(BeEmpty())

		By("and once they stop, it probes again")
		timers.Step(clockskew.DefaultProbeInterval)
		Eventually(func() []testutil.Request { return probes(counter, mark) }).Should(HaveLen(1))
	})

	It("sends no probe from a manager whose leader-election renewals it measures", func(ctx SpecContext) {
		m := clockskew.New(shiftedBy(-5*time.Minute), bound)
		counter := &testutil.RequestCounter{}
		// As cmd/manager: the monitor wraps the config before the manager is created.
		mgrCfg := rest.CopyConfig(cfg)
		mgrCfg.Wrap(counter.Wrap)
		mgrCfg.Wrap(m.Wrap)
		mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			LeaderElection: true, LeaderElectionNamespace: "default", LeaderElectionID: "clockskew-test",
			LeaderElectionReleaseOnCancel: true,
		})
		Expect(err).NotTo(HaveOccurred())
		probe, err := clockskew.NewProbe(m, mgr.GetConfig())
		Expect(err).NotTo(HaveOccurred())
		timers := clocktesting.NewFakeClock(time.Now())
		probe.Clock = timers
		Expect(mgr.Add(probe)).To(Succeed())
		mgrCtx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mgrCtx)).To(Succeed())
		}()
		DeferCleanup(func() { cancel(); <-done })
		Eventually(mgr.Elected()).Should(BeClosed())

		leases := func(mark int) func() []testutil.Request {
			return func() []testutil.Request {
				return counter.Since(mark, func(r testutil.Request) bool { return strings.Contains(r.Path, "/leases/clockskew-test") })
			}
		}
		sampled := func() time.Time { return m.Verdict().Sampled }
		for range 3 {
			Eventually(timers.HasWaiters).Should(BeTrue())
			mark, last := counter.Mark(), sampled()
			Eventually(leases(mark)).ShouldNot(BeEmpty(), "the leader renews its lease")
			// The counter sees a request when it is sent; the monitor, when its response arrives.
			Eventually(sampled).Should(BeTemporally(">", last), "the renewal is measured")
			timers.Step(clockskew.DefaultProbeInterval)
		}
		Eventually(timers.HasWaiters).Should(BeTrue())
		Expect(probes(counter, 0)).To(BeEmpty())
		expectSkew(m.Verdict(), -5*time.Minute)
	})
})

// runProbe runs the probe until the spec ends.
func runProbe(p *clockskew.Probe) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(p.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() { cancel(); <-done })
}

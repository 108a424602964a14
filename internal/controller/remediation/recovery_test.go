package remediation_test

import (
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// In an incident every node's event makes its NodeHealthCheck look again, often before the cache
// shows the writes of the look before; watches.Hold makes the cache lag that way.
var _ = Describe("A cache that lags behind the controller's own writes", func() {
	It("in a mass recovery: each CR is deleted once and each delete reported once", func(ctx SpecContext) {
		// Five: bursts of more events of one reason merge into a series (internal/eventseries), and
		// each delete must show as an event of its own here.
		const healthy, sick = 9, 5
		group := e.Unique("g")
		for range healthy {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		var nodes []*corev1.Node
		for range sick {
			nodes = append(nodes, e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour))
		}
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = nil })
		for _, node := range nodes {
			Eventually(e.TestCRs(ctx, node.Name)).Should(HaveLen(1))
		}
		names := map[string]bool{}
		for _, node := range nodes {
			names[e.TestCRs(ctx, node.Name)()[0].GetName()] = true
		}
		crDeletes := func(r testutil.Request) bool {
			i := strings.LastIndex(r.Path, "/")
			return r.Method == http.MethodDelete && strings.Contains(r.Path, "/testremediations/") && names[r.Path[i+1:]]
		}
		mark := requests.Mark()

		By("the nodes come back; the manager's cache does not show its deletes of their CRs yet")
		release := watches.Hold("testremediations")
		DeferCleanup(release)
		for _, node := range nodes {
			e.SetReady(ctx, node, corev1.ConditionTrue, 0)
		}
		Eventually(func() []testutil.Request { return requests.Since(mark, crDeletes) }).Should(HaveLen(sick))
		for _, node := range nodes {
			Expect(e.TestCRs(ctx, node.Name)()).To(BeEmpty())
		}
		e.RemediationDecided(ctx, n) // a look with every CR still live in the cache
		Expect(requests.Since(mark, crDeletes)).To(HaveLen(sick), "one DELETE per CR, however stale the cache")

		By("the cache catches up")
		release()
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(BeEmpty())
		e.RemediationDecided(ctx, n)
		Expect(requests.Since(mark, crDeletes)).To(HaveLen(sick))
		Eventually(func() int {
			return len(slices.DeleteFunc(e.Events(ctx, n.Name)(), func(r string) bool { return r != remediationv1alpha1.EventReasonRemediationRemoved }))
		}).Should(Equal(sick), "one RemediationRemoved per CR")
	})

	It("when a step times out: the CR is marked once and its exhaustion reported once", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		cr := e.TestCRs(ctx, sick.Name)()[0]
		crPatches := func(r testutil.Request) bool {
			return r.Method == http.MethodPatch && strings.HasSuffix(r.Path, "/testremediations/"+cr.GetName())
		}
		mark := requests.Mark()

		release := watches.Hold("testremediations")
		DeferCleanup(release)
		// Overdue by three lease durations (a single template: 10m + 1m each).
		e.Clock.SetTime(cr.GetCreationTimestamp().Add(33*time.Minute + time.Second))
		e.Touch(ctx, n)
		Eventually(func() map[string]string { return e.TestCRs(ctx, sick.Name)()[0].GetAnnotations() }).Should(HaveKey(remediationv1alpha1.NHCTimedOutAnnotation))
		e.RemediationDecided(ctx, n) // a look with the CR unmarked in the cache
		Expect(requests.Since(mark, crPatches)).To(HaveLen(1), "one mark, however stale the cache")

		release()
		e.RemediationDecided(ctx, n)
		Expect(requests.Since(mark, crPatches)).To(HaveLen(1))
		Eventually(func() []string {
			return slices.DeleteFunc(e.Events(ctx, n.Name)(), func(r string) bool { return r != remediationv1alpha1.EventReasonNoTemplateLeft })
		}).Should(HaveLen(1))
	})
})

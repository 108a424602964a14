package remediation_test

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// maxRequestsPerFailure is issue 15's target, API requests per remediated node, events included,
// from the node's condition change to its CR listed in status (6), and the event regarding the Node
// that issue 35 added for an isolated start (eventseries.Recorder.Mirrorf), so that `kubectl
// describe node` shows it.
const maxRequestsPerFailure = 6 + 1

var _ = Describe("API requests per failure", func() {
	It(fmt.Sprintf("a node that fails costs at most %d API requests, events included, until status lists its CR", maxRequestsPerFailure), func(ctx SpecContext) {
		group := e.Unique("g")
		for range 3 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		sick := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		// The lease namespace exists, as it does once the operator has taken its first lease.
		Expect(client.IgnoreAlreadyExists(e.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodelease.DefaultNamespace}}))).To(Succeed())
		n := e.NewNHC(ctx, group)
		Eventually(func() *int { return e.Status(ctx, n)().HealthyNodes }).Should(HaveValue(Equal(4)))
		// What a failure can cost: writes of any kind, and reads of what the controllers act on. (Not
		// counted: the informers of kinds whose CRDs earlier specs deleted retry their lists in the
		// background.)
		failureCost := func(r testutil.Request) bool {
			if r.Watch {
				return false
			}
			if r.Method != http.MethodGet {
				return true
			}
			for _, prefix := range []string{"/api/v1/nodes", "/api/v1/namespaces", "/apis/coordination.k8s.io/", "/apis/test.medik8s.io/", "/apis/remediation.medik8s.io/", "/apis/events.k8s.io/"} {
				if strings.HasPrefix(r.Path, prefix) {
					return true
				}
			}
			return false
		}
		// settled waits for a second without such a request.
		settled := func() {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				mark := requests.Mark()
				g.Consistently(func() []testutil.Request { return requests.Since(mark, failureCost) }).WithTimeout(time.Second).Should(BeEmpty())
			}).WithTimeout(30 * time.Second).Should(Succeed())
		}
		// Let the NodeHealthCheck's own start settle (its status, the Enabled event), and what earlier
		// specs left in flight.
		settled()

		mark := requests.Mark()
		// The node's Ready turns Unknown (soon unhealthy: status counts it unhealthy), and its
		// duration passes.
		e.SetReady(ctx, sick, corev1.ConditionUnknown, 0)
		Eventually(func() *int { return e.Status(ctx, n)().HealthyNodes }).Should(HaveValue(Equal(3)))
		e.Step(ctx, 5*time.Minute)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Eventually(func() int {
			u := entryOf(ctx, n, sick.Name)()
			if u == nil {
				return 0
			}
			return len(u.Remediations)
		}).Should(Equal(1))
		// Events are sent in the background: wait for the ones of this failure, then until the
		// controllers have settled, so that a request that comes after them is counted too.
		Eventually(e.RelatedEvents(ctx, n.Name, sick.Name)).Should(ContainElements(remediationv1alpha1.EventReasonDetectedUnhealthy, remediationv1alpha1.EventReasonRemediationCreated))
		settled()

		made := requests.Since(mark, failureCost)
		var lines []string
		for _, r := range made {
			lines = append(lines, r.Method+" "+r.Path)
		}
		AddReportEntry("requests for one failure", strings.Join(lines, "\n"))
		events := 0
		for _, r := range made {
			if r.Method == http.MethodPost && strings.Contains(r.Path, "/events") {
				events++
			}
		}
		Expect(events).To(BeNumerically(">=", 3), "the upstream events DetectedUnhealthy and RemediationCreated, and RemediationCreated regarding the Node, were sent:\n%s", strings.Join(lines, "\n"))
		Expect(len(made)).To(BeNumerically("<=", maxRequestsPerFailure), "requests for one failure:\n%s", strings.Join(lines, "\n"))
	})
})

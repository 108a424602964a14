package remediation_test

import (
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/eventseries"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// eventWrites matches the manager's writes of events.
func eventWrites(r testutil.Request) bool {
	return !r.Watch && r.Method != http.MethodGet && strings.HasPrefix(r.Path, "/apis/events.k8s.io/")
}

var _ = Describe("Events in a mass failure", func() {
	It("merge into one series per reason beyond the first few nodes", func(ctx SpecContext) {
		// Without the series: 2 events for each failing node.
		const failing = 16
		group := e.Unique("g")
		var sick []*corev1.Node
		for i := range 2*failing + 4 {
			node := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			if i < failing {
				sick = append(sick, node)
			}
		}
		Expect(client.IgnoreAlreadyExists(e.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodelease.DefaultNamespace}}))).To(Succeed())
		n := e.NewNHC(ctx, group)
		Eventually(func() *int { return e.Status(ctx, n)().HealthyNodes }).Should(HaveValue(Equal(2*failing + 4)))
		// What earlier specs left in flight is not counted.
		eventsSettled()

		mark := requests.Mark()
		for _, node := range sick {
			e.SetReady(ctx, node, corev1.ConditionUnknown, time.Hour) // its duration passed
		}
		for _, node := range sick {
			Eventually(e.TestCRs(ctx, node.Name)).Should(HaveLen(1))
		}
		Eventually(func() int {
			st := e.Status(ctx, n)()
			return len(st.NodesWithRunningRemediation())
		}).Should(Equal(failing))
		// Every node's events were recorded, one by one or in the series.
		Eventually(func() int {
			return len(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationCreated)())
		}).Should(Equal(eventseries.DefaultBurst + 1))
		eventsSettled()

		// Per reason: the first DefaultBurst nodes' events, the series' create and its patch (and
		// one more create when the recorder's patch of the series came before its create: client-go
		// sends them from two goroutines); and the first DefaultMirror starts also regarding their
		// Node.
		writes := requests.Since(mark, eventWrites)
		var lines []string
		for _, r := range writes {
			lines = append(lines, r.Method+" "+r.Path)
		}
		var onNodes []string
		for _, node := range sick {
			for _, ev := range listEvents(ctx, node.Name, remediationv1alpha1.EventReasonRemediationCreated) {
				Expect(ev.Regarding.Kind).To(Equal("Node"))
				Expect(ev.Related).NotTo(BeNil())
				Expect(ev.Related.Name).To(Equal(n.Name))
				onNodes = append(onNodes, node.Name)
			}
		}
		Expect(onNodes).To(HaveLen(eventseries.DefaultMirror), "the first starts of the burst show in their node's events, and no more")
		Expect(len(writes)).To(BeNumerically("<=", 2*(eventseries.DefaultBurst+3)+eventseries.DefaultMirror),
			"%d nodes failing at once cost %d event writes:\n%s", failing, len(writes), strings.Join(lines, "\n"))
		for _, reason := range []string{remediationv1alpha1.EventReasonDetectedUnhealthy, remediationv1alpha1.EventReasonRemediationCreated} {
			var related, combined []eventsv1.Event
			for _, ev := range listEvents(ctx, n.Name, reason) {
				if ev.Related != nil {
					related = append(related, ev)
				} else if strings.HasPrefix(ev.Note, eventseries.CombinedPrefix) {
					combined = append(combined, ev)
				}
			}
			Expect(related).To(HaveLen(eventseries.DefaultBurst), "%s: the first nodes' events name their node", reason)
			// (The series' count is client-go's: when its patch of the series beat its create, the
			// event has no series until its next refresh.)
			Expect(combined).To(HaveLen(1), "%s: the rest are one series", reason)
		}
	})
})

// listEvents lists the events of the reason regarding the named object.
func listEvents(ctx SpecContext, regarding, reason string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	Expect(e.K8s.List(ctx, list)).To(Succeed())
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.Name == regarding && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// eventsSettled waits for a second without an event write: the recorder sends in the background.
func eventsSettled() {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		mark := requests.Mark()
		g.Consistently(func() []testutil.Request { return requests.Since(mark, eventWrites) }).WithTimeout(time.Second).Should(BeEmpty())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

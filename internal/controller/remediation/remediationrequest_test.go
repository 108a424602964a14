package remediation_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/explain"
)

// requestRemediation sets the node's remediation request to at, as kubectl annotate would, and
// returns the value.
func requestRemediation(ctx context.Context, node *corev1.Node, at time.Time) string {
	GinkgoHelper()
	value := at.UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, remediationv1alpha1.RemediationRequestAnnotation, value)
	Expect(e.K8s.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	return value
}

// nodeAnnotation returns a function reading the node's annotation, for Eventually.
func nodeAnnotation(ctx context.Context, node *corev1.Node, key string) func() string {
	return func() string {
		got := &corev1.Node{}
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(node), got)).To(Succeed())
		return got.Annotations[key]
	}
}

// healthyPool creates four healthy nodes and a NodeHealthCheck selecting them, and returns once its
// status counts them, with the node the specs ask to remediate.
func healthyPool(ctx context.Context, mutate ...func(*remediationv1alpha1.NodeHealthCheck)) (*remediationv1alpha1.NodeHealthCheck, *corev1.Node) {
	GinkgoHelper()
	group := e.Unique("g")
	for range 3 {
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	}
	asked := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	n := e.NewNHC(ctx, group, mutate...)
	e.SeenHealthy(ctx, n, 4)
	return n, asked
}

func allowRequests(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.AllowRemediationRequests = true }

var _ = Describe("Remediation requests (spec.allowRemediationRequests)", func() {
	It("remediates a healthy node on request, keeps its CR until the remediator reports, and answers the request once", func(ctx SpecContext) {
		n, asked := healthyPool(ctx, allowRequests)

		value := requestRemediation(ctx, asked, e.Clock.Now())
		Eventually(e.TestCRs(ctx, asked.Name)).Should(HaveLen(1))
		cr := e.TestCRs(ctx, asked.Name)()[0]
		Expect(cr.GetAnnotations()).To(HaveKeyWithValue(remediationv1alpha1.RemediationRequestedAtAnnotation, value))
		Expect(cr.GetAnnotations()).To(HaveKeyWithValue(remediationv1alpha1.RemediationRequestBaselineAnnotation, ContainSubstring(`"type":"Ready","status":"True"`)))
		Eventually(nodeAnnotation(ctx, asked, remediationv1alpha1.RemediationRequestHandledAnnotation)).Should(Equal(value))
		Eventually(func() *metav1.Time {
			if u := entryOf(ctx, n, asked.Name)(); u != nil {
				return u.RemediationRequested
			}
			return nil
		}).ShouldNot(BeNil())
		Eventually(e.EventNotes(ctx, asked.Name, remediationv1alpha1.EventReasonRemediationRequested)).Should(ContainElement(ContainSubstring("requested at " + value)))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonDetectedUnhealthy)).Should(ContainElement(ContainSubstring("its remediation was requested at " + value)))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationCreated)).Should(ContainElement(ContainSubstring("as requested at " + value)))

		var out bytes.Buffer
		Expect(explain.Node(ctx, e.K8s, asked.Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).To(ContainSubstring("remediation request: at %s; the node counts as unhealthy until a remediation answers it", value))
		Expect(out.String()).To(MatchRegexp(`health: unhealthy since \S+ \(remediation requested at %s`, regexp.QuoteMeta(value)), "the decision's verdict, not the conditions' (healthy)")

		By("the node's conditions stay healthy: the CR is not removed as recovered")
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, asked.Name)).WithTimeout(time.Second).Should(HaveLen(1))

		By("the remediator reports Succeeded: the CR goes, and the request, still on the node, is not acted on again")
		setCondition(ctx, &cr, map[string]any{"type": remediationv1alpha1.RemediationConditionSucceeded, "status": "True", "reason": "Done", "message": "",
			"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})
		Eventually(e.TestCRs(ctx, asked.Name)).Should(BeEmpty())
		Eventually(entryOf(ctx, n, asked.Name)).Should(BeNil())
		Expect(nodeAnnotation(ctx, asked, remediationv1alpha1.RemediationRequestAnnotation)()).To(Equal(value), "the operator leaves the request in place")
		out.Reset()
		Expect(explain.Node(ctx, e.K8s, asked.Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).To(ContainSubstring("remediation request: %s, answered (%s=%s)", value, remediationv1alpha1.RemediationRequestHandledAnnotation, value))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, asked.Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("a new request, dated a moment ahead (within the clock-skew bound): it waits for its time, then a new remediation")
		again := requestRemediation(ctx, asked, e.Clock.Now().Add(time.Second))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, asked.Name)).WithTimeout(time.Second).Should(BeEmpty())
		e.Clock.Step(time.Second)
		Eventually(e.TestCRs(ctx, asked.Name)).Should(HaveLen(1))
		Eventually(nodeAnnotation(ctx, asked, remediationv1alpha1.RemediationRequestHandledAnnotation)).Should(Equal(again))
	})

	It("ends the requested remediation when the node goes down and comes back", func(ctx SpecContext) {
		n, asked := healthyPool(ctx, allowRequests)
		// As kubectl nhc request node does.
		var out bytes.Buffer
		Expect(explain.Request(ctx, e.K8s, asked.Name, e.Clock.Now(), &out)).To(Succeed())
		Expect(out.String()).To(ContainSubstring("NodeHealthCheck %s selects it and takes requests", n.Name))
		Eventually(e.TestCRs(ctx, asked.Name)).Should(HaveLen(1))

		By("rebooting: Ready Unknown, soon unhealthy; the CR stays")
		e.SetReady(ctx, asked, corev1.ConditionUnknown, 0)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, asked.Name)).WithTimeout(time.Second).Should(HaveLen(1))

		By("back: the node is healthy by its own conditions, and its CR goes")
		e.SetReady(ctx, asked, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, asked.Name)).Should(BeEmpty())
	})

	It("ignores a request where the NodeHealthCheck does not allow them, and holds one while it is paused", func(ctx SpecContext) {
		n, asked := healthyPool(ctx)
		value := requestRemediation(ctx, asked, e.Clock.Now())
		Eventually(e.EventNotes(ctx, asked.Name, remediationv1alpha1.EventReasonRemediationRequestIgnored)).Should(ContainElement(
			ContainSubstring("NodeHealthCheck %s does not set spec.allowRemediationRequests", n.Name)))
		var out bytes.Buffer
		Expect(explain.NHC(ctx, e.K8s, n.Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).To(ContainSubstring("node %s: remediation request %q ignored: NodeHealthCheck %s does not set spec.allowRemediationRequests", asked.Name, value, n.Name))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, asked.Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("allowed, but paused: listed and held")
		Eventually(func() error {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
			n.Spec.AllowRemediationRequests, n.Spec.PauseRequests = true, []string{"maintenance"}
			return e.K8s.Update(ctx, n)
		}).Should(Succeed())
		Eventually(heldBack(ctx, n, asked.Name)).Should(BeTrue())
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("Paused"))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, asked.Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("unpaused: remediated")
		Eventually(func() error {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
			n.Spec.PauseRequests = nil
			return e.K8s.Update(ctx, n)
		}).Should(Succeed())
		Eventually(e.TestCRs(ctx, asked.Name)).Should(HaveLen(1))
		Expect(e.TestCRs(ctx, asked.Name)()[0].GetAnnotations()).To(HaveKeyWithValue(remediationv1alpha1.RemediationRequestedAtAnnotation, value))
	})

	It("under spec.maxInFlight, a requested node waits behind nodes that are really down", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 6 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		first := e.NewNode(ctx, group, corev1.ConditionUnknown, 30*time.Minute)
		waiting := e.NewNode(ctx, group, corev1.ConditionUnknown, 20*time.Minute)
		asked := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group, allowRequests, func(n *remediationv1alpha1.NodeHealthCheck) {
			one := intstr.FromInt32(1)
			n.Spec.MaxInFlight = &one
		})
		Eventually(e.TestCRs(ctx, first.Name)).Should(HaveLen(1))
		Eventually(heldBack(ctx, n, waiting.Name)).Should(BeTrue())
		requestRemediation(ctx, asked, e.Clock.Now())
		Eventually(heldBack(ctx, n, asked.Name)).Should(BeTrue())

		By("the running remediation ends: the node that is really down goes first, the request waits")
		e.SetReady(ctx, first, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, waiting.Name)).Should(HaveLen(1))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, asked.Name)).WithTimeout(time.Second).Should(BeEmpty())

		By("that one ends too: the requested node's turn")
		e.SetReady(ctx, waiting, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, asked.Name)).Should(HaveLen(1))
	})
})

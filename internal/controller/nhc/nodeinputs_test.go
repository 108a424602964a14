package nhc_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// annotateNode sets (nil: removes) annotations of the node, as its kubelet may.
func annotateNode(ctx SpecContext, node *corev1.Node, annotations map[string]*string) {
	GinkgoHelper()
	var parts []string
	for k, v := range annotations {
		if v == nil {
			parts = append(parts, fmt.Sprintf("%q:null", k))
		} else {
			parts = append(parts, fmt.Sprintf("%q:%q", k, *v))
		}
	}
	patch := `{"metadata":{"annotations":{` + strings.Join(parts, ",") + `}}}`
	Expect(e.K8s.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// maxEventNote is the longest note the API server stores for an event (events.k8s.io).
const maxEventNote = 1024

var _ = Describe("What a node writes on itself", func() {
	It("is bounded: a huge or ever-changing request costs one record and short events; a request dated ahead or a forged handled record is refused", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 3 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		hostile := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.AllowRemediationRequests = true })
		e.SeenHealthy(ctx, n, 4)
		ignored := e.EventNotes(ctx, hostile.Name, remediationv1alpha1.EventReasonRemediationRequestIgnored)
		request := remediationv1alpha1.RemediationRequestAnnotation

		By("a huge value: refused, quoted by its beginning and its length")
		huge := strings.Repeat("x", 200<<10)
		annotateNode(ctx, hostile, map[string]*string{request: &huge})
		Eventually(ignored).Should(ContainElement(ContainSubstring("(204800 bytes)")))

		By("many distinct values in a row: one record for the node, every event short")
		for i := range 30 {
			v := fmt.Sprintf("%02d", i) + strings.Repeat("y", 10<<10)
			annotateNode(ctx, hostile, map[string]*string{request: &v})
		}
		Eventually(ignored).Should(ContainElement(ContainSubstring(`"29yyy`)))
		Expect(nhc.NodeReports(reconciler, n.Name)).To(Equal(1), "one record per node and input, whatever it wrote")
		for _, note := range ignored() {
			Expect(len(note)).To(BeNumerically("<=", maxEventNote/2), note)
		}

		By("a request dated an hour ahead: refused, and the node is not listed")
		ahead := e.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		annotateNode(ctx, hostile, map[string]*string{request: &ahead})
		Eventually(ignored).Should(ContainElement(And(ContainSubstring(ahead), ContainSubstring("more than 10s (the clock-skew bound) after the operator's time"))))
		Consistently(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).WithTimeout(nhc.DefaultStatusBatch + time.Second).Should(BeEmpty())

		By("a forged handled record dated a day ahead answers nothing: a request made now is counted")
		forged, now := e.Clock.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), e.Clock.Now().UTC().Format(time.RFC3339)
		annotateNode(ctx, hostile, map[string]*string{request: &now, remediationv1alpha1.RemediationRequestHandledAnnotation: &forged})
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(hostile.Name))
		Eventually(e.EventNotes(ctx, hostile.Name, remediationv1alpha1.EventReasonInvalidNodeAnnotation)).Should(ContainElement(
			And(ContainSubstring(remediationv1alpha1.RemediationRequestHandledAnnotation), ContainSubstring("the record is forged"))))
		Expect(e.Status(ctx, n)()).To(counts(4, 4), "a node unhealthy only for its request counts as healthy for the threshold")

		By("the node leaves the NodeHealthCheck: what was recorded about it goes")
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(hostile), hostile)).To(Succeed())
		hostile.Labels[testutil.GroupLabel] = "elsewhere"
		Expect(e.K8s.Update(ctx, hostile)).To(Succeed())
		Eventually(e.Status(ctx, n)).Should(counts(3, 3))
		Eventually(func() int { return nhc.NodeReports(reconciler, n.Name) }).Should(BeZero())
	})
})

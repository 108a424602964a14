package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
)

// writeReady sets the node's Ready condition as a writer whose clock reads at would: transition and
// heartbeat at that time.
func writeReady(ctx SpecContext, n *corev1.Node, status corev1.ConditionStatus, at time.Time) {
	GinkgoHelper()
	t := metav1.NewTime(at)
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: t, LastHeartbeatTime: t, Reason: "Test"}}
		return e.K8s.Status().Update(ctx, n)
	})).To(Succeed())
}

var _ = Describe("Condition writers' clocks", func() {
	It("count a change a slow clock dates an hour back from when the operator saw it: a blip is not its whole duration at once", func(ctx SpecContext) {
		conditionTimes.SetBound(10 * time.Second) // the production bound, the clock-skew bound's default
		DeferCleanup(func() { conditionTimes.SetBound(watch.TrustEveryConditionTime) })
		group := e.Unique("g")
		for range 4 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		slow := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group)
		e.SeenHealthy(ctx, n, 5)

		By("the node's kubelet, its clock an hour slow, reports Ready=Unknown")
		writeReady(ctx, slow, corev1.ConditionUnknown, e.Clock.Now().Add(-time.Hour))
		untrusted := func() *metav1.Condition {
			return meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeConditionTimesUntrusted)
		}
		Eventually(untrusted).Should(And(Not(BeNil()), HaveField("Message", ContainSubstring("node %s's Ready counts from", slow.Name))))
		Expect(gauge(nhc.MetricUntrustedConditionTimes, map[string]string{"nhc": n.Name})).To(Equal(1.0))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, slow.Name)).WithTimeout(time.Second).Should(BeEmpty(), "an hour by its clock, seconds by the operator's")

		By("once the duration has passed since the operator saw it, the node is remediated")
		e.Step(ctx, 301*time.Second)
		e.Touch(ctx, n)
		Eventually(e.TestCRs(ctx, slow.Name)).Should(HaveLen(1))

		By("a change dated truly ends the distrust")
		writeReady(ctx, slow, corev1.ConditionTrue, e.Clock.Now())
		Eventually(untrusted).Should(BeNil())
		Eventually(func() float64 { return gauge(nhc.MetricUntrustedConditionTimes, map[string]string{"nhc": n.Name}) }).Should(BeZero())
	})
})

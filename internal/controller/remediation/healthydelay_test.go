package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

func withHealthyDelay(d time.Duration) func(*remediationv1alpha1.NodeHealthCheck) {
	return func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.HealthyDelay = &metav1.Duration{Duration: d} }
}

// entryOf returns the node's status entry, or nil.
func entryOf(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, node string) func() *remediationv1alpha1.UnhealthyNode {
	return func() *remediationv1alpha1.UnhealthyNode {
		for _, u := range e.Status(ctx, n)().UnhealthyNodes {
			if u.Name == node {
				return &u
			}
		}
		return nil
	}
}

// heldBack reports whether status lists the node without remediations, as the public operator lists
// an unhealthy node whose remediation may not start.
func heldBack(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, node string) func() bool {
	return func() bool {
		u := entryOf(ctx, n, node)()
		return u != nil && len(u.Remediations) == 0 && u.ConditionsHealthyTimestamp == nil
	}
}

func isDelayed(u *remediationv1alpha1.UnhealthyNode) bool {
	return u != nil && u.ConditionsHealthyTimestamp != nil && u.HealthyDelayed != nil && *u.HealthyDelayed
}

// remediatedThenRecovered creates workers and an NHC, waits for the sick node's CR, and lets the
// node recover.
func remediatedThenRecovered(ctx context.Context, mutate func(*remediationv1alpha1.NodeHealthCheck)) (*remediationv1alpha1.NodeHealthCheck, *corev1.Node) {
	group, sick := workers(ctx)
	n := e.NewNHC(ctx, group, mutate)
	Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
	e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
	Eventually(func() bool { return isDelayed(entryOf(ctx, n, sick.Name)()) }).Should(BeTrue())
	return n, sick
}

// failingNow adds to the node's group a healthy node and one whose Ready turns Unknown now: due
// after 5 minutes, which the healthy one keeps the budget for. The clock jumps, so the reconcile that
// creates its CR runs at the time the clock is stepped to.
func failingNow(ctx context.Context, sibling *corev1.Node) *corev1.Node {
	group := sibling.Labels[testutil.GroupLabel]
	e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	return e.NewNode(ctx, group, corev1.ConditionUnknown, 0)
}

var _ = Describe("healthyDelay", func() {
	It("keeps a recovered node's CR for the delay, marks it, and then removes it", func(ctx SpecContext) {
		n, sick := remediatedThenRecovered(ctx, withHealthyDelay(10*time.Minute))
		since := entryOf(ctx, n, sick.Name)().ConditionsHealthyTimestamp.UTC().Format(time.RFC3339)
		Eventually(func() string {
			crs := e.TestCRs(ctx, sick.Name)()
			if len(crs) != 1 {
				return ""
			}
			return crs[0].GetAnnotations()[remediationv1alpha1.HealthyDelayAnnotation]
		}).Should(Equal(since))
		Expect(e.Status(ctx, n)().HealthyNodes).To(PointTo(Equal(2)), "a delayed node does not count healthy")

		// A node failing now is due after 5m, so its CR shows the remediation controller looked
		// after the step (with one more healthy node for the budget).
		due := failingNow(ctx, sick)
		e.Step(ctx, 9*time.Minute)
		Eventually(e.TestCRs(ctx, due.Name)).Should(HaveLen(1))
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(HaveLen(1))
		e.Step(ctx, time.Minute)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
		Eventually(entryOf(ctx, n, sick.Name)).Should(BeNil())
	})

	It("with a negative delay keeps the CR until the node is confirmed, then removes the confirmation", func(ctx SpecContext) {
		_, sick := remediatedThenRecovered(ctx, withHealthyDelay(-time.Second))
		due := failingNow(ctx, sick)
		e.Step(ctx, 24*time.Hour)
		Eventually(e.TestCRs(ctx, due.Name)).Should(HaveLen(1))
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(HaveLen(1))

		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(sick), sick)).To(Succeed())
		sick.Annotations = map[string]string{remediationv1alpha1.ManuallyConfirmedHealthyAnnotation: "by admin"}
		Expect(e.K8s.Update(ctx, sick)).To(Succeed())
		Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
		Eventually(func() map[string]string {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(sick), sick)).To(Succeed())
			return sick.Annotations
		}).ShouldNot(HaveKey(remediationv1alpha1.ManuallyConfirmedHealthyAnnotation))
	})

	It("releases every delayed node when healthyDelay is set back to 0", func(ctx SpecContext) {
		n, sick := remediatedThenRecovered(ctx, withHealthyDelay(-time.Second))
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
		n.Spec.HealthyDelay = &metav1.Duration{}
		Expect(e.K8s.Update(ctx, n)).To(Succeed())
		Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
	})

	It("ends the delay when the node fails again during it", func(ctx SpecContext) {
		n, sick := remediatedThenRecovered(ctx, withHealthyDelay(time.Hour))
		Eventually(func() map[string]string {
			crs := e.TestCRs(ctx, sick.Name)()
			if len(crs) != 1 {
				return nil
			}
			return crs[0].GetAnnotations()
		}).Should(HaveKey(remediationv1alpha1.HealthyDelayAnnotation))

		e.SetReady(ctx, sick, corev1.ConditionFalse, time.Hour)
		Eventually(func() *metav1.Time {
			u := entryOf(ctx, n, sick.Name)()
			if u == nil {
				return &metav1.Time{}
			}
			return u.ConditionsHealthyTimestamp
		}).Should(BeNil())
		Eventually(func() map[string]string { return e.TestCRs(ctx, sick.Name)()[0].GetAnnotations() }).ShouldNot(HaveKey(remediationv1alpha1.HealthyDelayAnnotation))
		Expect(e.TestCRs(ctx, sick.Name)()).To(HaveLen(1), "the same remediation continues")
	})
})

package v1alpha1_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// runningRemediation is a status entry for a node with one remediation CR.
func runningRemediation(node string) remediationv1alpha1.UnhealthyNode {
	return remediationv1alpha1.UnhealthyNode{
		Name: node,
		Remediations: []remediationv1alpha1.Remediation{{
			Resource: corev1.ObjectReference{APIVersion: "test.medik8s.io/v1alpha1", Kind: "TestRemediation", Namespace: "default", Name: node},
			Started:  metav1.Now(),
		}},
	}
}

// The update rule, once for both layers that enforce it: the webhook (ValidateUpdate) and the CRD's
// transition rules on its root, alone on an API server without the webhook. While a node has a
// running remediation, what decides which nodes are remediated and how cannot change.
var _ = Describe("NodeHealthCheck updates", func() {
	for _, l := range layers {
		Context("enforced by "+l.name, func() {
			// create stores nhc and then the given status, as the nhc controller would; after the
			// spec the status is cleared (the webhook refuses to delete a NodeHealthCheck with
			// running remediations) and it is deleted.
			create := func(ctx SpecContext, nhc *remediationv1alpha1.NodeHealthCheck, unhealthy ...remediationv1alpha1.UnhealthyNode) {
				c := l.client()
				Expect(c.Create(ctx, nhc)).To(Succeed())
				DeferCleanup(func(ctx SpecContext) {
					stored := &remediationv1alpha1.NodeHealthCheck{}
					err := c.Get(ctx, client.ObjectKeyFromObject(nhc), stored)
					if apierrors.IsNotFound(err) {
						return
					}
					Expect(err).NotTo(HaveOccurred())
					stored.Status.UnhealthyNodes = nil
					Expect(c.Status().Update(ctx, stored)).To(Succeed())
					Expect(client.IgnoreNotFound(c.Delete(ctx, stored))).To(Succeed())
				})
				if unhealthy != nil {
					nhc.Status.UnhealthyNodes = unhealthy
					Expect(c.Status().Update(ctx, nhc)).To(Succeed())
				}
			}

			Context("while a remediation runs", func() {
				var nhc *remediationv1alpha1.NodeHealthCheck

				BeforeEach(func(ctx SpecContext) {
					nhc = testutil.NewNHC(uniqueName("nhc"))
					create(ctx, nhc, remediationv1alpha1.UnhealthyNode{Name: "worker-0"}, runningRemediation("worker-1"), runningRemediation("worker-2"))
				})

				DescribeTable("refuses changes that would redirect it, and says what to do",
					func(ctx SpecContext, mutate func(*remediationv1alpha1.NodeHealthCheck), paths ...string) {
						mutate(nhc)
						err := l.client().Update(ctx, nhc)
						Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
						Expect(causeFields(err)).To(ConsistOf(paths))
						Expect(err.Error()).To(And(ContainSubstring(l.runningRefusal("worker-1", "worker-2")), ContainSubstring("set spec.pauseRequests")))
					},
					Entry("selector", func(n *remediationv1alpha1.NodeHealthCheck) {
						n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
					}, "spec.selector"),
					Entry("remediationTemplate", func(n *remediationv1alpha1.NodeHealthCheck) {
						n.Spec.RemediationTemplate = ref("infrastructure.cluster.x-k8s.io/v1beta1", "Metal3RemediationTemplate", "default", "metal3-template")
					}, "spec.remediationTemplate"),
					Entry("remediationTemplate to escalatingRemediations", func(n *remediationv1alpha1.NodeHealthCheck) {
						escalation(testutil.Step("test-template", 1, time.Minute))(n)
					}, "spec.remediationTemplate", "spec.escalatingRemediations"),
				)

				DescribeTable("allows other changes",
					func(ctx SpecContext, mutate func(*remediationv1alpha1.NodeHealthCheck)) {
						mutate(nhc)
						Expect(l.client().Update(ctx, nhc)).To(Succeed())
					},
					Entry("pauseRequests", func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.PauseRequests = []string{"maintenance"} }),
					Entry("minHealthy", func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("3") }),
					Entry("healthyDelay", func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.HealthyDelay = dur(time.Minute) }),
					Entry("labels", func(n *remediationv1alpha1.NodeHealthCheck) { n.Labels = map[string]string{"team": "infra"} }),
				)

				It("allows status updates, which leave the spec as stored", func(ctx SpecContext) {
					nhc.Status.UnhealthyNodes = append(nhc.Status.UnhealthyNodes, runningRemediation("worker-3"))
					Expect(l.client().Status().Update(ctx, nhc)).To(Succeed())
					nhc.Status.UnhealthyNodes = nil
					Expect(l.client().Status().Update(ctx, nhc)).To(Succeed())
				})

				It("allows changing the selector once the remediations are gone", func(ctx SpecContext) {
					nhc.Status.UnhealthyNodes = []remediationv1alpha1.UnhealthyNode{{Name: "worker-1", Remediations: []remediationv1alpha1.Remediation{}}}
					Expect(l.client().Status().Update(ctx, nhc)).To(Succeed())
					nhc.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
					Expect(l.client().Update(ctx, nhc)).To(Succeed())
				})
			})

			Context("with escalating remediations, while a remediation runs", func() {
				var nhc *remediationv1alpha1.NodeHealthCheck

				BeforeEach(func(ctx SpecContext) {
					nhc = testutil.NewNHC(uniqueName("nhc"))
					escalation(testutil.Step("multi-a", 1, 5*time.Minute), testutil.Step("multi-b", 2, 10*time.Minute))(nhc)
					create(ctx, nhc, runningRemediation("worker-1"))
				})

				// Each change leaves a spec the webhook admits on create (multi-c exists and supports
				// several CRs per node), so the update rule alone refuses it.
				DescribeTable("refuses changing a step",
					func(ctx SpecContext, mutate func(*remediationv1alpha1.NodeHealthCheck)) {
						mutate(nhc)
						err := l.client().Update(ctx, nhc)
						Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
						Expect(causeFields(err)).To(ConsistOf("spec.escalatingRemediations"))
					},
					Entry("a timeout", func(n *remediationv1alpha1.NodeHealthCheck) {
						n.Spec.EscalatingRemediations[1].Timeout.Duration = time.Hour
					}),
					Entry("an order", func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.EscalatingRemediations[1].Order = 3 }),
					Entry("a template", func(n *remediationv1alpha1.NodeHealthCheck) {
						n.Spec.EscalatingRemediations[1].RemediationTemplate.Name = "multi-c"
					}),
					Entry("the order of the steps", func(n *remediationv1alpha1.NodeHealthCheck) {
						s := n.Spec.EscalatingRemediations
						s[0], s[1] = s[1], s[0]
					}),
					Entry("a step more", func(n *remediationv1alpha1.NodeHealthCheck) {
						n.Spec.EscalatingRemediations = append(n.Spec.EscalatingRemediations, testutil.Step("multi-c", 3, time.Minute))
					}),
				)

				It("allows writing a timeout differently (300s for 5m0s): durations are compared decoded", func(ctx SpecContext) {
					patch := []byte(`{"spec":{"escalatingRemediations":[` +
						`{"remediationTemplate":{"apiVersion":"test.medik8s.io/v1alpha1","kind":"TestRemediationTemplate","namespace":"default","name":"multi-a"},"order":1,"timeout":"300s"},` +
						`{"remediationTemplate":{"apiVersion":"test.medik8s.io/v1alpha1","kind":"TestRemediationTemplate","namespace":"default","name":"multi-b"},"order":2,"timeout":"600s"}]}}`)
					Expect(l.client().Patch(ctx, nhc, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
					Expect(nhc.Spec.EscalatingRemediations[0].Timeout.Duration).To(Equal(5 * time.Minute))
				})
			})

			It("allows changing everything when no node has a remediation, with or without status, and deletion", func(ctx SpecContext) {
				withStatus := testutil.NewNHC(uniqueName("nhc"))
				create(ctx, withStatus, remediationv1alpha1.UnhealthyNode{Name: "worker-1"})
				withoutStatus := testutil.NewNHC(uniqueName("nhc"))
				create(ctx, withoutStatus)
				for _, n := range []*remediationv1alpha1.NodeHealthCheck{withStatus, withoutStatus} {
					n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}
					escalation(testutil.Step("test-template", 1, time.Minute))(n)
					Expect(l.client().Update(ctx, n)).To(Succeed())
					Expect(l.client().Delete(ctx, n)).To(Succeed())
				}
			})
		})
	}
})

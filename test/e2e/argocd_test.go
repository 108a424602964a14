package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/argocd"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// live reads the NodeHealthCheck as Argo CD's cache holds it: unstructured, as the API server
// serves it.
func live(ctx context.Context, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck"))
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, u)).To(Succeed())
	return u
}

// liveIn reads the NodeHealthCheck until the operator has written a status of its current spec
// (status.observedGeneration) in the phase.
func liveIn(ctx context.Context, name string, phase remediationv1alpha1.NHCPhase) *unstructured.Unstructured {
	GinkgoHelper()
	var u *unstructured.Unstructured
	Eventually(func(g Gomega) {
		u = live(ctx, name)
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		g.Expect(observed).To(Equal(u.GetGeneration()), "the operator evaluated the spec")
		got, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		g.Expect(got).To(Equal(string(phase)))
	}).WithTimeout(scenarioTimeout).Should(Succeed())
	return u
}

// argoHealth runs the chart's Argo CD health check on the object.
func argoHealth(u *unstructured.Unstructured) argocd.Health {
	GinkgoHelper()
	h, err := argocd.Evaluate(u.Object)
	Expect(err).NotTo(HaveOccurred())
	return h
}

var _ = Describe("The chart's Argo CD health check", func() {
	It("reads the statuses the operator writes: Healthy, Progressing while a spec is not evaluated and while remediating, Degraded when Disabled, Suspended when Paused", func(ctx SpecContext) {
		startManager(localcluster.ManagerOptions{Args: []string{"--leader-election-id=e2e-argocd"}})
		nodes := simulatedNodes(ctx, "argo", 3)
		template := newTemplate(ctx, "e2e-argo")
		nhc := groupNHC(ctx, "argo", template, 5*time.Second)

		By("Healthy: Enabled, its spec evaluated")
		u := liveIn(ctx, nhc.Name, remediationv1alpha1.PhaseEnabled)
		Expect(argoHealth(u).Status).To(Equal(argocd.Healthy), "%v", u.Object["status"])

		By("Progressing: a new spec, as the API server stores it, before the operator evaluated it")
		Expect(unstructured.SetNestedField(u.Object, "34%", "spec", "minHealthy")).To(Succeed())
		Expect(k8s.Update(ctx, u)).To(Succeed()) // u is the API server's answer: the operator's status of the spec before
		Expect(u.GetGeneration()).To(Equal(int64(2)))
		Expect(argoHealth(u)).To(Equal(argocd.Health{Status: argocd.Progressing,
			Message: "Waiting for the operator to evaluate generation 2 (the status is of generation 1)"}))
		Expect(argoHealth(liveIn(ctx, nhc.Name, remediationv1alpha1.PhaseEnabled)).Status).To(Equal(argocd.Healthy))

		By("Degraded: Disabled, its template gone")
		tmpl := testutil.TemplateObject(template, true)
		Expect(k8s.Delete(ctx, tmpl)).To(Succeed())
		u = liveIn(ctx, nhc.Name, remediationv1alpha1.PhaseDisabled)
		Expect(argoHealth(u)).To(HaveField("Status", argocd.Degraded), "%v", u.Object["status"])
		Expect(argoHealth(u).Message).To(HavePrefix("Disabled: "+remediationv1alpha1.ConditionReasonDisabledTemplateNotFound), "%v", u.Object["status"])
		newTemplate(ctx, template)
		Expect(argoHealth(liveIn(ctx, nhc.Name, remediationv1alpha1.PhaseEnabled)).Status).To(Equal(argocd.Healthy))

		By("Progressing: a node under remediation")
		remediator.Hold(template, true)
		DeferCleanup(func() { remediator.Hold(template, false) })
		Expect(localcluster.SetHeartbeats(ctx, k8s, nodes[2], false)).To(Succeed())
		u = liveIn(ctx, nhc.Name, remediationv1alpha1.PhaseRemediating)
		reason, _, _ := unstructured.NestedString(u.Object, "status", "reason")
		Expect(reason).To(ContainSubstring(nodes[2]))
		Expect(argoHealth(u)).To(Equal(argocd.Health{Status: argocd.Progressing, Message: reason}))

		By("Suspended: paused")
		Expect(unstructured.SetNestedStringSlice(u.Object, []string{"e2e: Argo CD health"}, "spec", "pauseRequests")).To(Succeed())
		Expect(k8s.Update(ctx, u)).To(Succeed())
		u = liveIn(ctx, nhc.Name, remediationv1alpha1.PhasePaused)
		reason, _, _ = unstructured.NestedString(u.Object, "status", "reason")
		Expect(argoHealth(u)).To(Equal(argocd.Health{Status: argocd.Suspended, Message: reason}))

		By("Healthy again: resumed, the node back")
		unstructured.RemoveNestedField(u.Object, "spec", "pauseRequests")
		Expect(k8s.Update(ctx, u)).To(Succeed())
		remediator.Hold(template, false)
		Expect(argoHealth(liveIn(ctx, nhc.Name, remediationv1alpha1.PhaseEnabled)).Status).To(Equal(argocd.Healthy))
	})
})

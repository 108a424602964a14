package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// startPod runs the manager as a pod would: restarted when it exits.
func startPod(o localcluster.ManagerOptions) *localcluster.Pod {
	o.Binary, o.Output = managerBinary, GinkgoWriter
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := cluster.StartPod(ctx, o)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = p.Stop(30 * time.Second) })
	return p
}

var _ = Describe("Simulated nodes and an API server restart", func() {
	It("the operator rides out an API server restart: no crash loop, no remediation lost or duplicated", func(ctx SpecContext) {
		// The chart's two replicas, each restarted by its "kubelet" if it exits.
		const id = "e2e-restart"
		replicas := []*localcluster.Pod{
			startPod(localcluster.ManagerOptions{Args: []string{"--leader-election-id=" + id}}),
			startPod(localcluster.ManagerOptions{Args: []string{"--leader-election-id=" + id}}),
		}
		nodes := simulatedNodes(ctx, "s7", 5) // with two failing, 3 of 5 stay healthy: minHealthy 51% allows both
		template := newTemplate(ctx, "e2e-restart")
		remediator.Hold(template, true) // the remediation is running when the API server goes away
		DeferCleanup(func() { remediator.Hold(template, false) })
		// Nodes may miss a heartbeat around the restart; the duration covers that, as the default of
		// 300s does on real clusters.
		nhc := groupNHC(ctx, "s7", template, 20*time.Second)
		Eventually(phase(ctx, nhc)).WithTimeout(statusTimeout).Should(Equal(remediationv1alpha1.PhaseEnabled))

		Expect(localcluster.SetHeartbeats(ctx, k8s, nodes[0], false)).To(Succeed())
		Eventually(func() map[string]unstructured.Unstructured { return crDetails(ctx, nodes[0]) }).WithTimeout(scenarioTimeout).Should(HaveLen(1))
		before := crDetails(ctx, nodes[0])

		unavailable, err := cluster.RestartAPIServer(2 * time.Second)
		Expect(err).NotTo(HaveOccurred())
		restarted := time.Now()

		// The operator still works: a node failing after the restart is remediated.
		Expect(localcluster.SetHeartbeats(ctx, k8s, nodes[1], false)).To(Succeed())
		Eventually(func() map[string]unstructured.Unstructured { return crDetails(ctx, nodes[1]) }).WithTimeout(2 * scenarioTimeout).Should(HaveLen(1))
		restarts := replicas[0].Restarts() + replicas[1].Restarts()
		AddReportEntry("API server restart", fmt.Sprintf("unavailable for %s; operator restarts: %d; a node that failed after the restart was remediated %s later",
			unavailable.Round(100*time.Millisecond), restarts, time.Since(restarted).Round(time.Second)))
		after := crDetails(ctx, nodes[0])
		Expect(after).To(HaveLen(1), "no duplicate for the node remediated before the restart")
		for template, cr := range after {
			was := before[template]
			Expect(cr.GetUID()).To(Equal(was.GetUID()), "the remediation that ran across the restart was kept, not recreated")
		}
		for _, n := range nodes[2:] {
			Expect(crDetails(ctx, n)).To(BeEmpty(), "no healthy node was remediated")
		}
		// A leader that cannot renew its lease for 10s exits, by design, and its pod restarts once;
		// an operator that keeps exiting would be a crash loop.
		for _, r := range replicas {
			Expect(r.Restarts()).To(BeNumerically("<=", 1), "a crash loop")
		}

		remediator.Hold(template, false)
		for _, n := range nodes[:2] {
			Eventually(ready(ctx, n)).WithTimeout(scenarioTimeout).Should(Equal(corev1.ConditionTrue), "the remediator brings %s back", n)
			Eventually(func() map[string]unstructured.Unstructured { return crDetails(ctx, n) }).WithTimeout(scenarioTimeout).Should(BeEmpty())
		}
		Eventually(phase(ctx, nhc)).WithTimeout(scenarioTimeout).Should(Equal(remediationv1alpha1.PhaseEnabled))
		Expect(replicas[0].Restarts()+replicas[1].Restarts()).To(Equal(restarts), "no restart once the API server was back")
		deleteNHC(ctx, nhc) // while the webhook server runs
	})
})

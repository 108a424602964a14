package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

var _ = Describe("Cluster API MachineHealthChecks", func() {
	It("cover nodes that NodeHealthChecks leave to them: condition, events, no CR; removed, the node is remediated", func(ctx SpecContext) {
		group, sick := workers(ctx)
		pool := e.Unique("pool")
		mhc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineHealthCheck",
			"spec": map[string]any{"clusterName": "c1", "selector": map[string]any{"matchLabels": map[string]any{"pool": pool}}}}}
		mhc.SetNamespace(testutil.TemplateNamespace)
		mhc.SetName(e.Unique("mhc"))
		e.Create(ctx, mhc)
		machine := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
			"spec": map[string]any{"clusterName": "c1"}, "status": map[string]any{"nodeRef": map[string]any{"name": sick.Name}}}}
		machine.SetNamespace(testutil.TemplateNamespace)
		machine.SetName(e.Unique("machine"))
		machine.SetLabels(map[string]string{"pool": pool})
		e.Create(ctx, machine)
		// The operator saw the coverage (its event on the MachineHealthCheck) before the NodeHealthCheck comes.
		Eventually(e.Events(ctx, mhc.GetName())).Should(ContainElement(remediationv1alpha1.EventReasonConflictingMachineHealthCheck))

		n := e.NewNHC(ctx, group)
		Eventually(heldBack(ctx, n, sick.Name)).Should(BeTrue())
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring(
			"node %s is covered by Cluster API MachineHealthCheck %s/%s", sick.Name, mhc.GetNamespace(), mhc.GetName()))
		c := meta.FindStatusCondition(e.Status(ctx, n)().Conditions, remediationv1alpha1.ConditionTypeMachineHealthCheckOverlap)
		Expect(c).NotTo(BeNil())
		Expect(c.Message).To(ContainSubstring("%s/%s (1 node(s))", mhc.GetNamespace(), mhc.GetName()))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonConflictingMachineHealthCheck))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(BeEmpty())
		// kubectl nhc explain finds the coverage itself and agrees.
		d, _ := explained(ctx, n).Node(sick.Name)
		Expect(d.SkipReason).To(Equal(health.SkipCoveredByMachineHealthCheck))

		Expect(e.K8s.Delete(ctx, mhc)).To(Succeed())
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Eventually(func() *remediationv1alpha1.NodeHealthCheckStatus { st := e.Status(ctx, n)(); return &st }).Should(
			WithTransform(func(st *remediationv1alpha1.NodeHealthCheckStatus) bool {
				return meta.FindStatusCondition(st.Conditions, remediationv1alpha1.ConditionTypeMachineHealthCheckOverlap) == nil
			}, BeTrue()))
	})
})

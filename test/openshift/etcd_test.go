package openshift

import (
	"bytes"
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/explain"
	"github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

var _ = Describe("The etcd quorum guard for control-plane nodes on OpenShift", Ordered, func() {
	// The budgets and guard pods of one spec must not leak into the next.
	AfterEach(func(ctx SpecContext) {
		Expect(e.K8s.DeleteAllOf(ctx, &policyv1.PodDisruptionBudget{}, client.InNamespace(lease.EtcdNamespace))).To(Succeed())
	})

	It("remediates when the etcd disruption budget allows a disruption", func(ctx SpecContext) {
		etcdBudget(ctx, 1)
		_, cp := unhealthyControlPlane(ctx, func(node string) { guardPod(ctx, node, true) })
		Eventually(e.TestCRs(ctx, cp.Name)).Should(HaveLen(1))
	})

	It("waits while the budget allows none and the node's guard pod is ready, and retries in a minute", func(ctx SpecContext) {
		etcdBudget(ctx, 0)
		var pod *corev1.Pod
		n, cp := unhealthyControlPlane(ctx, func(node string) { pod = guardPod(ctx, node, true) })
		heldByEtcdGuard(ctx, n.Name, cp.Name)
		Consistently(e.TestCRs(ctx, cp.Name)).WithTimeout(time.Second).Should(BeEmpty())
		// Status tells what runs: the node listed without remediations, not Remediating, and why.
		Eventually(e.Status(ctx, n)).Should(And(
			HaveField("Phase", remediationv1alpha1.PhaseEnabled),
			HaveField("Reason", ContainSubstring("the etcd guard pod %s of node %s is Ready=True", pod.Name, cp.Name)),
			HaveField("UnhealthyNodes", ConsistOf(And(HaveField("Name", cp.Name), HaveField("Remediations", BeEmpty()))))))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			ContainSubstring("(EtcdQuorum): the etcd disruption budget allows no disruption")), "the status writer's event names the guard")
		// kubectl nhc explain says the same, and gives the guard's verdict.
		var out bytes.Buffer
		opts := explain.Options{Now: e.Clock.Now(), LeaseNamespace: lease.DefaultNamespace}
		Expect(explain.Node(ctx, e.K8s, cp.Name, opts, &out)).To(Succeed())
		Expect(out.String()).To(And(ContainSubstring("decision: held back (EtcdQuorum)"),
			ContainSubstring("etcd quorum guard: the etcd disruption budget allows no disruption")))

		// The node's etcd member goes down: its guard pod is not ready any more.
		setPodReady(ctx, pod, false)
		e.Step(ctx, time.Minute)
		e.Touch(ctx, n)
		Eventually(e.TestCRs(ctx, cp.Name)).Should(HaveLen(1))
		out.Reset()
		opts.Now = e.Clock.Now()
		Expect(explain.Node(ctx, e.K8s, cp.Name, opts, &out)).To(Succeed())
		Expect(out.String()).To(ContainSubstring("etcd quorum guard: disrupting the node now keeps etcd quorum"))
	})

	It("remediates when the node's guard pod is not ready (its etcd member is already down)", func(ctx SpecContext) {
		etcdBudget(ctx, 0)
		_, cp := unhealthyControlPlane(ctx, func(node string) { guardPod(ctx, node, false) })
		Eventually(e.TestCRs(ctx, cp.Name)).Should(HaveLen(1))
	})

	It("remediates when the budget allows none and the node has no guard pod (no etcd member there), as medik8s/common does", func(ctx SpecContext) {
		etcdBudget(ctx, 0)
		_, cp := unhealthyControlPlane(ctx, func(string) {})
		Eventually(e.TestCRs(ctx, cp.Name)).Should(HaveLen(1))
	})

	It("waits while the node's guard pod is Ready=Unknown: its member may still count for quorum", func(ctx SpecContext) {
		etcdBudget(ctx, 0)
		var pod *corev1.Pod
		n, cp := unhealthyControlPlane(ctx, func(node string) { pod = guardPod(ctx, node, true) })
		heldByEtcdGuard(ctx, n.Name, cp.Name)
		setPodCondition(ctx, pod, corev1.ConditionUnknown)
		e.Step(ctx, time.Minute)
		e.Touch(ctx, n)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(ContainSubstring("is Ready=Unknown")))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, cp.Name)).WithTimeout(time.Second).Should(BeEmpty())
	})

	It("waits while openshift-etcd holds no disruption budget, or more than one, and remediates once there is exactly one that allows it", func(ctx SpecContext) {
		n, cp := unhealthyControlPlane(ctx, func(node string) { guardPod(ctx, node, true) })
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(ContainSubstring("holds 0 PodDisruptionBudgets")))
		etcdBudget(ctx, 0) // alone, with the node's guard pod ready: held too
		etcdBudget(ctx, 1)
		e.Step(ctx, time.Minute)
		e.Touch(ctx, n)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(ContainSubstring("holds 2 PodDisruptionBudgets")))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, cp.Name)).WithTimeout(time.Second).Should(BeEmpty())

		Expect(e.K8s.DeleteAllOf(ctx, &policyv1.PodDisruptionBudget{}, client.InNamespace(lease.EtcdNamespace))).To(Succeed())
		etcdBudget(ctx, 1)
		e.Step(ctx, time.Minute)
		e.Touch(ctx, n)
		Eventually(e.TestCRs(ctx, cp.Name)).Should(HaveLen(1))
	})

	It("waits for a worker-labelled node whose verified Machine is a control-plane Machine", func(ctx SpecContext) {
		etcdBudget(ctx, 0)
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		node := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		machine := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
			"status": map[string]any{"nodeRef": map[string]any{"name": node.Name}}}}
		machine.SetNamespace(testutil.TemplateNamespace)
		machine.SetName(e.Unique("master"))
		machine.SetLabels(map[string]string{machines.OpenShiftMachineRoleLabel: machines.OpenShiftMasterRole})
		e.Create(ctx, machine)
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
		node.Labels["node-role.kubernetes.io/worker"] = ""
		node.Annotations = map[string]string{machines.OpenShiftMachineAnnotation: machine.GetNamespace() + "/" + machine.GetName()}
		Expect(e.K8s.Update(ctx, node)).To(Succeed())
		guardPod(ctx, node.Name, true)
		e.SetReady(ctx, node, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group)
		heldByEtcdGuard(ctx, n.Name, node.Name)
		Consistently(e.TestCRs(ctx, node.Name)).WithTimeout(time.Second).Should(BeEmpty())
	})

	It("leaves worker nodes alone", func(ctx SpecContext) {
		etcdBudget(ctx, 0)
		group := e.Unique("g")
		e.NewNode(ctx, group, "True", time.Hour)
		e.NewNode(ctx, group, "True", time.Hour)
		worker := e.NewNode(ctx, group, "Unknown", time.Hour)
		e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, worker.Name)).Should(HaveLen(1))
	})
})

// heldByEtcdGuard waits until the remediation controller says it holds the unhealthy control-plane
// node back for etcd quorum: it looked at the node, so a check that no CR appears means something.
func heldByEtcdGuard(ctx context.Context, nhc, node string) {
	Eventually(e.EventNotes(ctx, nhc, remediationv1alpha1.EventReasonRemediationSkipped)).
		Should(ContainElement(HavePrefix("Not remediating control-plane node " + node + " yet: ")))
}

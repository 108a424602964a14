package openshift

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// singleton creates (once per spec, deleted after it) or returns OpenShift's cluster-scoped
// config.openshift.io object of the kind, and sets its status.
func singleton(ctx context.Context, kind, name string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("config.openshift.io/v1")
	u.SetKind(kind)
	u.SetName(name)
	if err := e.K8s.Get(ctx, client.ObjectKeyFromObject(u), u); apierrors.IsNotFound(err) {
		e.Create(ctx, u)
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	u.Object["status"] = status
	Expect(e.K8s.Status().Update(ctx, u)).To(Succeed())
	return u
}

// clusterVersion sets the ClusterVersion's Progressing condition.
func clusterVersion(ctx context.Context, progressing string) *unstructured.Unstructured {
	return singleton(ctx, "ClusterVersion", "version", map[string]any{"conditions": []any{
		map[string]any{"type": "Available", "status": "True", "message": "Done applying 4.19.9", "lastTransitionTime": "2026-11-01T00:00:00Z"},
		map[string]any{"type": "Progressing", "status": progressing, "message": "Working towards 4.20.1: 512 of 890 done (57% complete)", "lastTransitionTime": "2026-11-22T00:00:00Z"},
	}})
}

func topology(ctx context.Context, t string) {
	singleton(ctx, "Infrastructure", "cluster", map[string]any{"controlPlaneTopology": t, "infrastructureTopology": t})
}

func machineConfig(ctx context.Context, n *corev1.Node, current, desired string) {
	Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
	n.Annotations = map[string]string{remediationv1alpha1.MachineConfigCurrentAnnotation: current, remediationv1alpha1.MachineConfigDesiredAnnotation: desired}
	Expect(e.K8s.Update(ctx, n)).To(Succeed())
}

func machineHealthCheck(ctx context.Context, conditions ...map[string]any) *unstructured.Unstructured {
	m := &unstructured.Unstructured{}
	m.SetAPIVersion("machine.openshift.io/v1beta1")
	m.SetKind("MachineHealthCheck")
	m.SetNamespace("default")
	m.SetName(e.Unique("mhc"))
	list := make([]any, 0, len(conditions))
	for _, c := range conditions {
		list = append(list, c)
	}
	Expect(unstructured.SetNestedSlice(m.Object, list, "spec", "unhealthyConditions")).To(Succeed())
	e.Create(ctx, m)
	return m
}

var _ = Describe("Upgrade awareness on OpenShift", func() {
	It("holds new remediations while the ClusterVersion is progressing; a running one ends; the waiting one starts within a second after the upgrade", func(ctx SpecContext) {
		clusterVersion(ctx, "False")
		n, nodes := e.NewPool(ctx, 5)
		running, waiting := nodes[3], nodes[4]
		e.Sicken(ctx, running)
		Eventually(e.TestCRs(ctx, running.Name)).Should(HaveLen(1))

		cv := clusterVersion(ctx, "True")
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(
			testutil.HaveCondition(metav1.ConditionTrue, remediationv1alpha1.ConditionReasonClusterVersionProgressing),
			HaveField("Message", ContainSubstring("Working towards 4.20.1"))))
		e.Sicken(ctx, waiting)
		e.SeenHealthy(ctx, n, 3)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, waiting.Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.TestCRs(ctx, running.Name)()).To(HaveLen(1), "the running remediation continues")
		e.SetReady(ctx, running, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, running.Name)).Should(BeEmpty(), "and ends when its node recovers")
		Expect(e.Status(ctx, n)().Phase).To(Equal(remediationv1alpha1.PhasePaused))

		clusterVersion(ctx, "False")
		Eventually(e.TestCRs(ctx, waiting.Name)).WithTimeout(time.Second).Should(HaveLen(1))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElements(remediationv1alpha1.EventReasonUpgradeDetected, remediationv1alpha1.EventReasonUpgradeEnded))
		Eventually(e.Events(ctx, cv.GetName())).Should(ContainElements(remediationv1alpha1.EventReasonUpgradeDetected, remediationv1alpha1.EventReasonUpgradeEnded))
	})

	DescribeTable("on OpenShift, whatever the control-plane topology, holds new remediations while a node about to be remediated is being updated by the Machine Config Operator", func(ctx SpecContext, controlPlaneTopology string) {
		topology(ctx, controlPlaneTopology)
		Eventually(func() bool { return gate.Verdict().OpenShift }).Should(BeTrue(), "the operator has seen OpenShift")
		n, nodes := e.NewPool(ctx, 5)
		updatingHealthy, updatingSick := nodes[0], nodes[4]

		By("a healthy node being updated holds nothing")
		machineConfig(ctx, updatingHealthy, "rendered-worker-1", "rendered-worker-2")
		e.Sicken(ctx, nodes[3])
		Eventually(e.TestCRs(ctx, nodes[3].Name)).Should(HaveLen(1))

		By("an unhealthy node being updated holds new remediations")
		machineConfig(ctx, updatingSick, "rendered-worker-1", "rendered-worker-2")
		e.Sicken(ctx, updatingSick)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(
			testutil.HaveCondition(metav1.ConditionTrue, remediationv1alpha1.ConditionReasonMachineConfigUpdating),
			HaveField("Message", ContainSubstring(updatingSick.Name))))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, updatingSick.Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.TestCRs(ctx, nodes[3].Name)()).To(HaveLen(1), "the running remediation continues")

		machineConfig(ctx, updatingSick, "rendered-worker-2", "rendered-worker-2")
		Eventually(e.TestCRs(ctx, updatingSick.Name)).WithTimeout(time.Second).Should(HaveLen(1))
	},
		Entry("hosted control plane (External)", "External"),
		Entry("self-hosted control plane (HighlyAvailable)", "HighlyAvailable"),
	)

	It("disables NodeHealthChecks while a custom MachineHealthCheck exists", func(ctx SpecContext) {
		n, nodes := e.NewPool(ctx, 3)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeDisabled)).Should(testutil.HaveCondition(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonEnabled))
		mhc := machineHealthCheck(ctx, map[string]any{"type": "Ready", "status": "Unknown", "timeout": "300s"})
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeDisabled)).Should(And(
			testutil.HaveCondition(metav1.ConditionTrue, remediationv1alpha1.ConditionReasonDisabledMHC),
			HaveField("Message", ContainSubstring("default/"+mhc.GetName()))))
		Expect(e.Status(ctx, n)().Phase).To(Equal(remediationv1alpha1.PhaseDisabled))
		Expect(testutil.Series(nhc.MetricCondition, map[string]string{"nhc": n.Name, "type": remediationv1alpha1.ConditionTypeDisabled})).
			To(HaveField("Gauge.Value", PointTo(Equal(1.0))))
		e.Sicken(ctx, nodes[2])
		e.SeenHealthy(ctx, n, 2)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(BeEmpty())
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonDisabled))

		Expect(e.K8s.Delete(ctx, mhc)).To(Succeed())
		Eventually(e.TestCRs(ctx, nodes[2].Name)).Should(HaveLen(1))
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeDisabled)).Should(testutil.HaveCondition(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonEnabled))
	})

	It("tolerates the termination-handler MachineHealthCheck and leaves terminating nodes to it", func(ctx SpecContext) {
		machineHealthCheck(ctx, map[string]any{"type": "Terminating", "status": "True", "timeout": "0s"})
		n, nodes := e.NewPool(ctx, 5)
		spot, plain := nodes[3], nodes[4]
		// Unhealthy and terminating in one update, as the node would be seen: never one without the other.
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(spot), spot)).To(Succeed())
		hourAgo := metav1.NewTime(e.Clock.Now().Add(-time.Hour))
		spot.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: hourAgo, LastHeartbeatTime: hourAgo, Reason: "Test"},
			{Type: "Terminating", Status: corev1.ConditionTrue, LastTransitionTime: hourAgo, Reason: "SpotInstanceTermination"},
		}
		Expect(e.K8s.Status().Update(ctx, spot)).To(Succeed())
		e.Sicken(ctx, plain)

		Eventually(e.TestCRs(ctx, plain.Name)).Should(HaveLen(1))
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(And(ContainSubstring(spot.Name), ContainSubstring("termination-handler MachineHealthCheck")))
		// As the public operator: the terminating node counts healthy and is not listed. (plain is
		// listed with its CR, in the status write after the CR: nhc.DefaultStartWait.)
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(plain.Name))
		st := e.Status(ctx, n)()
		Expect(st.HealthyNodes).To(HaveValue(Equal(4)), "3 healthy workers and the terminating node")
		Consistently(e.TestCRs(ctx, spot.Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeDisabled)()).To(testutil.HaveCondition(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonEnabled))
	})
})

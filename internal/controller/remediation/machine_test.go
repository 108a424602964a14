package remediation_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

const (
	openShiftMachine  = "machine.openshift.io/v1beta1"
	clusterAPIMachine = "cluster.x-k8s.io/v1beta1"
)

// newMachine creates a Machine of the API version in the namespace, linked to the node ("": none)
// by its controller (status.nodeRef.name), of the cluster (spec.clusterName; "": none).
func newMachine(ctx context.Context, apiVersion, namespace, node, cluster string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	machine := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	machine.SetAPIVersion(apiVersion)
	machine.SetKind("Machine")
	machine.SetNamespace(namespace)
	machine.SetName(e.Unique("machine"))
	if cluster != "" {
		Expect(unstructured.SetNestedField(machine.Object, cluster, "spec", "clusterName")).To(Succeed())
	}
	if node != "" {
		Expect(unstructured.SetNestedField(machine.Object, node, "status", "nodeRef", "name")).To(Succeed())
	}
	for _, m := range mutate {
		m(machine)
	}
	e.Create(ctx, machine)
	return machine
}

// controlPlaneMachine makes a Machine a control-plane Machine the way its kind does: OpenShift's
// master role label, Cluster API's control-plane label and KubeadmControlPlane owner.
func controlPlaneMachine(m *unstructured.Unstructured) {
	if m.GetAPIVersion() == openShiftMachine {
		m.SetLabels(map[string]string{machines.OpenShiftMachineRoleLabel: machines.OpenShiftMasterRole})
		return
	}
	m.SetLabels(map[string]string{machines.ClusterAPIControlPlaneLabel: ""})
	m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "controlplane.cluster.x-k8s.io/v1beta1", Kind: "KubeadmControlPlane",
		Name: "kcp", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}})
}

// claim annotates the node with the Machine, as Cluster API or OpenShift's Machine API annotate
// nodes (or a kubelet could); cluster is the Cluster API cluster the node names ("": none).
func claim(ctx context.Context, node *corev1.Node, machine *unstructured.Unstructured, cluster string) {
	annotations := map[string]string{remediation.MachineAnnotation: machine.GetNamespace() + "/" + machine.GetName()}
	if machine.GetAPIVersion() != openShiftMachine {
		annotations = map[string]string{remediation.ClusterAPIMachineAnnotation: machine.GetName(), remediation.ClusterAPINamespaceAnnotation: machine.GetNamespace()}
		if cluster != "" {
			annotations[machines.ClusterAPIClusterNameAnnotation] = cluster
		}
	}
	Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
	node.Annotations = annotations
	Expect(e.K8s.Update(ctx, node)).To(Succeed())
}

// linkEvents returns a function listing the MachineLinkRejected events regarding the
// NodeHealthCheck and related to the node.
func linkEvents(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, node string) func() []eventsv1.Event {
	return func() []eventsv1.Event {
		list := &eventsv1.EventList{}
		Expect(e.K8s.List(ctx, list)).To(Succeed())
		var out []eventsv1.Event
		for _, ev := range list.Items {
			if ev.Reason == remediationv1alpha1.EventReasonMachineLinkRejected && ev.Regarding.Name == n.Name && ev.Related != nil && ev.Related.Name == node {
				out = append(out, ev)
			}
		}
		return out
	}
}

// isMachine matches an owner reference to the Machine.
func isMachine(machine *unstructured.Unstructured) OmegaMatcher {
	return MatchFields(IgnoreExtras, Fields{"APIVersion": Equal(machine.GetAPIVersion()), "Kind": Equal("Machine"),
		"Name": Equal(machine.GetName()), "UID": Equal(machine.GetUID())})
}

// failsWithClaim creates three healthy nodes selected by a new NodeHealthCheck, lets link claim a
// Machine for the last one and make it unhealthy, and returns the NodeHealthCheck, the node and its
// CR. The node claims its Machine before it fails: every decision that sees it unhealthy sees the
// claim.
func failsWithClaim(ctx context.Context, link func(node *corev1.Node)) (*remediationv1alpha1.NodeHealthCheck, *corev1.Node, unstructured.Unstructured) {
	group := e.Unique("g")
	e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	node := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	link(node)
	n := e.NewNHC(ctx, group)
	e.SeenHealthy(ctx, n, 3)
	e.SetReady(ctx, node, corev1.ConditionUnknown, time.Hour)
	Eventually(e.TestCRs(ctx, node.Name)).Should(HaveLen(1))
	return n, node, e.TestCRs(ctx, node.Name)()[0]
}

var _ = Describe("Machine links", func() {
	It("a node that names another node's control-plane Machine gets a CR without that owner, not labelled control-plane, and an event says why, once", func(ctx SpecContext) {
		cp := e.NewNode(ctx, e.Unique("cp"), corev1.ConditionTrue, time.Hour)
		label(ctx, cp, remediationcr.ControlPlaneRoleLabel, "")
		var machine *unstructured.Unstructured
		n, node, cr := failsWithClaim(ctx, func(node *corev1.Node) {
			machine = newMachine(ctx, openShiftMachine, testutil.TemplateNamespace, cp.Name, "", controlPlaneMachine)
			claim(ctx, node, machine, "")
		})
		Expect(cr.GetOwnerReferences()).To(ConsistOf(HaveField("Kind", "NodeHealthCheck")), "no Machine owner: Metal3 would reboot the control-plane host")
		Expect(cr.GetLabels()).NotTo(HaveKey(remediationv1alpha1.ControlPlaneCRLabel), "the Machine's role does not count")
		Eventually(linkEvents(ctx, n, node.Name)).Should(ConsistOf(MatchFields(IgnoreExtras, Fields{
			"Type": Equal(corev1.EventTypeWarning),
			"Note": And(ContainSubstring("Node "+node.Name), ContainSubstring(testutil.TemplateNamespace+"/"+machine.GetName()),
				ContainSubstring(remediation.MachineAnnotation), ContainSubstring("status.nodeRef names node "+cp.Name)),
		})))

		// Once per node and Machine: the node recovers and fails again; its new CR shows the
		// remediation controller read the claim again. A second event would be a series (the recorder
		// merges events of one reason, action and objects).
		e.SetReady(ctx, node, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, node.Name)).Should(BeEmpty())
		e.SetReady(ctx, node, corev1.ConditionUnknown, time.Hour)
		Eventually(e.TestCRs(ctx, node.Name)).Should(ConsistOf(WithTransform(func(u unstructured.Unstructured) bool { return u.GetUID() != cr.GetUID() }, BeTrue())))
		Consistently(linkEvents(ctx, n, node.Name)).WithTimeout(time.Second).Should(ConsistOf(HaveField("Series", BeNil())))
	})

	DescribeTable("a claim its Machine does not confirm: the CR has no Machine owner, and an event says why",
		func(ctx SpecContext, apiVersion string, nodeRef func(node *corev1.Node) string, cluster, named string, missing bool, why string) {
			var machine *unstructured.Unstructured
			n, node, cr := failsWithClaim(ctx, func(node *corev1.Node) {
				if missing {
					machine = &unstructured.Unstructured{}
					machine.SetAPIVersion(apiVersion)
					machine.SetNamespace(testutil.TemplateNamespace)
					machine.SetName(e.Unique("missing"))
				} else {
					machine = newMachine(ctx, apiVersion, testutil.TemplateNamespace, nodeRef(node), cluster, controlPlaneMachine)
				}
				claim(ctx, node, machine, named)
			})
			Expect(cr.GetOwnerReferences()).To(ConsistOf(HaveField("Kind", "NodeHealthCheck")))
			Expect(cr.GetLabels()).NotTo(HaveKey(remediationv1alpha1.ControlPlaneCRLabel))
			Eventually(linkEvents(ctx, n, node.Name)).Should(ConsistOf(HaveField("Note", And(ContainSubstring(machine.GetName()), ContainSubstring(why)))))
		},
		Entry("a missing Machine", openShiftMachine, nil, "", "", true, "does not exist"),
		Entry("a Machine whose status.nodeRef names no node", openShiftMachine, func(*corev1.Node) string { return "" }, "", "", false, "status.nodeRef names no node"),
		Entry("a Cluster API Machine of another node", clusterAPIMachine, func(*corev1.Node) string { return "elsewhere" }, "c1", "c1", false, "status.nodeRef names node elsewhere"),
		Entry("a Cluster API Machine of another cluster", clusterAPIMachine, func(n *corev1.Node) string { return n.Name }, "c2", "c1", false, `cluster "c2"`),
	)

	DescribeTable("a Machine that confirms the node's claim owns its CR",
		func(ctx SpecContext, apiVersion, cluster, named string) {
			var machine *unstructured.Unstructured
			n, node, cr := failsWithClaim(ctx, func(node *corev1.Node) {
				machine = newMachine(ctx, apiVersion, testutil.TemplateNamespace, node.Name, cluster)
				claim(ctx, node, machine, named)
			})
			Expect(cr.GetOwnerReferences()).To(ContainElement(isMachine(machine)))
			Expect(cr.GetLabels()).NotTo(HaveKey(remediationv1alpha1.ControlPlaneCRLabel), "a worker Machine")
			Expect(linkEvents(ctx, n, node.Name)()).To(BeEmpty())
		},
		Entry("OpenShift", openShiftMachine, "", ""),
		Entry("Cluster API, of the cluster the node names", clusterAPIMachine, "c1", "c1"),
		Entry("Cluster API, the node names no cluster: status.nodeRef alone", clusterAPIMachine, "c1", ""),
	)

	It("a Machine in another namespace than the template's confirms the claim but owns no CR (an owner lives in its dependent's namespace)", func(ctx SpecContext) {
		elsewhere := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Unique("machines")}}
		e.Create(ctx, elsewhere)
		n, node, cr := failsWithClaim(ctx, func(node *corev1.Node) {
			claim(ctx, node, newMachine(ctx, clusterAPIMachine, elsewhere.Name, node.Name, "c1"), "c1")
		})
		Expect(cr.GetOwnerReferences()).To(ConsistOf(HaveField("Kind", "NodeHealthCheck")))
		Expect(linkEvents(ctx, n, node.Name)()).To(BeEmpty(), "not a forged claim")
	})

	DescribeTable("a worker-labelled node whose Machine is a control-plane Machine is a control-plane node: its CR is labelled so, and another failing control-plane node waits",
		func(ctx SpecContext, apiVersion string) {
			group := e.Unique("g")
			for range 3 {
				e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			}
			byMachine := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			label(ctx, byMachine, "node-role.kubernetes.io/worker", "")
			claim(ctx, byMachine, newMachine(ctx, apiVersion, testutil.TemplateNamespace, byMachine.Name, "c1", controlPlaneMachine), "c1")
			byLabel := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			label(ctx, byLabel, remediationcr.ControlPlaneRoleLabel, "")
			worker := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(1); n.Spec.MinHealthy = &v })
			e.SeenHealthy(ctx, n, 6)

			e.SetReady(ctx, byMachine, corev1.ConditionUnknown, time.Hour)
			Eventually(e.TestCRs(ctx, byMachine.Name)).Should(HaveLen(1))
			Expect(e.TestCRs(ctx, byMachine.Name)()[0].GetLabels()).To(HaveKey(remediationv1alpha1.ControlPlaneCRLabel))
			// The control-plane node fails, then a worker: the worker's CR shows the remediation
			// controller decided after both failed.
			e.SetReady(ctx, byLabel, corev1.ConditionUnknown, time.Hour)
			e.SetReady(ctx, worker, corev1.ConditionUnknown, time.Hour)
			Eventually(e.TestCRs(ctx, worker.Name)).Should(HaveLen(1))
			Consistently(e.TestCRs(ctx, byLabel.Name)).WithTimeout(time.Second).Should(BeEmpty(), "one control-plane node at a time")
			Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("control-plane node " + byMachine.Name))

			e.SetReady(ctx, byMachine, corev1.ConditionTrue, 0)
			Eventually(e.TestCRs(ctx, byLabel.Name)).Should(HaveLen(1))
		},
		Entry("Cluster API: the control-plane label and a KubeadmControlPlane owner", clusterAPIMachine),
		Entry("OpenShift: the master role label", openShiftMachine),
	)

	It("a control-plane node by its Machine holds another NodeHealthCheck's control-plane node back (the CR's label counts across NodeHealthChecks)", func(ctx SpecContext) {
		var byMachine, byLabel, worker *corev1.Node
		var nhcs []*remediationv1alpha1.NodeHealthCheck
		for i := range 2 {
			group := e.Unique("g")
			for range 2 {
				e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			}
			cp := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			if i == 0 {
				byMachine = cp
				label(ctx, cp, "node-role.kubernetes.io/worker", "")
				claim(ctx, cp, newMachine(ctx, clusterAPIMachine, testutil.TemplateNamespace, cp.Name, "c1", controlPlaneMachine), "c1")
			} else {
				byLabel = cp
				label(ctx, cp, remediationcr.ControlPlaneRoleLabel, "")
				worker = e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			}
			nhcs = append(nhcs, e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(1); n.Spec.MinHealthy = &v }))
		}
		e.SeenHealthy(ctx, nhcs[0], 3)
		e.SeenHealthy(ctx, nhcs[1], 4)

		e.SetReady(ctx, byMachine, corev1.ConditionUnknown, time.Hour)
		Eventually(e.TestCRs(ctx, byMachine.Name)).Should(HaveLen(1))
		e.SetReady(ctx, byLabel, corev1.ConditionUnknown, time.Hour)
		e.SetReady(ctx, worker, corev1.ConditionUnknown, time.Hour)
		Eventually(e.TestCRs(ctx, worker.Name)).Should(HaveLen(1), "the remediation controller decided after both failed")
		Consistently(e.TestCRs(ctx, byLabel.Name)).WithTimeout(time.Second).Should(BeEmpty(), "one control-plane node at a time, across NodeHealthChecks")
		Eventually(func() string { return e.Status(ctx, nhcs[1])().Reason }).Should(ContainSubstring("control-plane node " + byMachine.Name))

		e.SetReady(ctx, byMachine, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, byLabel.Name)).Should(HaveLen(1))
	})
})

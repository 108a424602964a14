package upgradeguard_test

import (
	"context"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// Each spec starts with the fake clock at the real time, so CRs (created at real time) and the
// controllers' clock agree however far an earlier spec stepped it.
var _ = BeforeEach(func() { e.Clock.SetTime(time.Now().Truncate(time.Second)) })

const (
	condTrue    = metav1.ConditionTrue
	condFalse   = metav1.ConditionFalse
	condUnknown = metav1.ConditionUnknown
)

// multiTemplate creates a TestRemediationTemplate whose remediator handles several CRs per node, so
// two of them can be escalation steps.
func multiTemplate(ctx context.Context) string {
	t := testutil.TemplateObject(e.Unique("template"), true)
	t.SetAnnotations(map[string]string{remediationv1alpha1.MultipleTemplatesSupportAnnotation: "true"})
	e.Create(ctx, t)
	return t.GetName()
}

func update(ctx context.Context, n *corev1.Node, change func(*corev1.Node), status bool) {
	Eventually(func() error {
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
		change(n)
		if status {
			return e.K8s.Status().Update(ctx, n)
		}
		return e.K8s.Update(ctx, n)
	}).Should(Succeed())
}

// clusterAPI creates a Cluster API object of the kind (MachineDeployment or KubeadmControlPlane,
// v1beta1) with three replicas and the status; it is deleted after the spec.
func clusterAPI(ctx context.Context, kind string, status map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(map[string]string{"MachineDeployment": "cluster.x-k8s.io/v1beta1", "KubeadmControlPlane": "controlplane.cluster.x-k8s.io/v1beta1"}[kind])
	obj.SetKind(kind)
	obj.SetNamespace("default")
	obj.SetName(e.Unique("workers"))
	Expect(unstructured.SetNestedField(obj.Object, int64(3), "spec", "replicas")).To(Succeed())
	e.Create(ctx, obj)
	setClusterAPIStatus(ctx, obj, status)
	return obj
}

// setClusterAPIStatus sets the object's status, observing its latest generation.
func setClusterAPIStatus(ctx context.Context, obj *unstructured.Unstructured, status map[string]any) {
	Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	status["observedGeneration"] = obj.GetGeneration()
	obj.Object["status"] = status
	Expect(e.K8s.Status().Update(ctx, obj)).To(Succeed())
}

// Cluster API statuses (v1beta1 counts, no conditions: the operator measures the pause from when it
// first saw the rollout).
func rollingOut() map[string]any {
	return map[string]any{"replicas": int64(4), "updatedReplicas": int64(1)}
}
func rolledOut() map[string]any {
	return map[string]any{"replicas": int64(3), "updatedReplicas": int64(3)}
}

var _ = Describe("Upgrade-aware pausing", func() {
	It("blocks new remediations while the gate is unknown, and starts them within a second once it is known", func(ctx SpecContext) {
		gate.Expect("test-detector") // enabled, never evaluated yet: unknown
		DeferCleanup(func() { gate.Report("test-detector", nil, e.Clock.Now()) })
		n, nodes := e.NewPool(ctx, 3)
		e.Sicken(ctx, nodes[2])
		// Unknown because of test-detector alone: the detectors' discovery, which the suite's first
		// spec may still wait for (seconds on a loaded machine), has ended.
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condUnknown, remediationv1alpha1.ConditionReasonUpgradeUnknown),
			HaveField("Message", ContainSubstring("test-detector: not evaluated yet")), HaveField("Message", Not(ContainSubstring("not been discovered yet")))))
		e.SeenHealthy(ctx, n, 2)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.Status(ctx, n)()).To(And(HaveField("Phase", remediationv1alpha1.PhasePaused), HaveField("Reason", ContainSubstring("not known yet"))))
		Expect(gateMetric("test-detector", "unknown")()).To(Equal(1.0))

		gate.Report("test-detector", nil, e.Clock.Now())
		Eventually(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(HaveLen(1))
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonNoUpgrade))
		Expect(gateMetric("test-detector", "open")()).To(Equal(1.0))
	})

	It("holds new remediations while the pause ConfigMap exists, and a running one's escalation; both go on within a second of the resume", func(ctx SpecContext) {
		t1, t2 := multiTemplate(ctx), multiTemplate(ctx)
		n, nodes := e.NewPool(ctx, 5, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = nil
			n.Spec.EscalatingRemediations = []remediationv1alpha1.EscalatingRemediation{testutil.Step(t1, 1, 5*time.Minute), testutil.Step(t2, 2, 5*time.Minute)}
		})
		running, waiting := nodes[3], nodes[4]
		e.Sicken(ctx, running)
		Eventually(e.TestCRs(ctx, running.Name)).Should(HaveLen(1))
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonNoUpgrade))

		cm := pauseConfigMap(ctx, "upgrading to 1.38, by @admin")
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonPauseObject),
			HaveField("Message", ContainSubstring("upgrading to 1.38, by @admin"))))
		Eventually(gateMetric(upgrade.DetectorPauseObject, "closed")).Should(Equal(1.0))
		Expect(testutil.Series(nhc.MetricCondition, map[string]string{"nhc": n.Name, "type": remediationv1alpha1.ConditionTypeUpgradeInProgress})).
			To(HaveField("Gauge.Value", PointTo(Equal(1.0))))
		e.Sicken(ctx, waiting)
		e.SeenHealthy(ctx, n, 3)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, waiting.Name)).WithTimeout(time.Second).Should(BeEmpty())
		st := e.Status(ctx, n)()
		Expect(st.Phase).To(Equal(remediationv1alpha1.PhasePaused))
		Expect(st.Reason).To(ContainSubstring("pause ConfigMap default/pause-remediation exists"))
		Expect(st.ObservedNodes).To(PointTo(Equal(5)))
		Expect(st.HealthyNodes).To(PointTo(Equal(3)), "counts stay accurate while paused")

		By("holding the running remediation's escalation: its step times out while paused")
		e.Step(ctx, 6*time.Minute) // the CR was created a few real seconds after the clock was set
		e.Touch(ctx, n)            // both controllers look again
		// The remediation controller decided after the step timed out: it says the escalation is held.
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			And(ContainSubstring("scalation of node %s held", running.Name), ContainSubstring("pause ConfigMap default/pause-remediation exists"))))
		Consistently(e.TestCRs(ctx, running.Name)).WithTimeout(time.Second).Should(HaveLen(1))
		Expect(e.TestCRs(ctx, running.Name)()[0].GetAnnotations()).NotTo(HaveKey(remediationv1alpha1.NHCTimedOutAnnotation), "the running step is not told to stop")
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("escalation of node %s held", running.Name))

		Expect(e.K8s.Delete(ctx, cm)).To(Succeed())
		By("the resume: the escalation is decided again and goes on, and the waiting one starts")
		Eventually(e.TestCRs(ctx, running.Name)).WithTimeout(time.Second).Should(HaveLen(2))
		// Its first step starts; the clock stepped past that step's timeout above, so the second
		// may follow at once.
		Eventually(e.TestCRs(ctx, waiting.Name)).WithTimeout(time.Second).ShouldNot(BeEmpty())
		Expect(e.TestCRs(ctx, waiting.Name)()).To(ContainElement(HaveField("Object", HaveKeyWithValue("metadata",
			HaveKeyWithValue("annotations", HaveKeyWithValue(remediationv1alpha1.TemplateNameAnnotation, t1))))))
		By("ending the running one when its node recovers")
		e.SetReady(ctx, running, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, running.Name)).Should(BeEmpty())
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonNoUpgrade))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElements(remediationv1alpha1.EventReasonUpgradeDetected, remediationv1alpha1.EventReasonUpgradeEnded))
		Eventually(e.Events(ctx, cm.Name)).Should(ContainElements(remediationv1alpha1.EventReasonUpgradeDetected, remediationv1alpha1.EventReasonUpgradeEnded))
		Expect(gateMetric(upgrade.DetectorPauseObject, "open")()).To(Equal(1.0))
	})

	It("pauses while a pause Lease with a duration is renewed, and resumes when it expires", func(ctx SpecContext) {
		renewed := metav1.NewMicroTime(e.Clock.Now())
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: pauseKey.Namespace, Name: pauseKey.Name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("upgrade-tool"), LeaseDurationSeconds: ptr.To[int32](600), RenewTime: &renewed}}
		e.Create(ctx, lease)
		n, nodes := e.NewPool(ctx, 3)
		e.Sicken(ctx, nodes[2])
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonPauseObject),
			HaveField("Message", ContainSubstring("held by upgrade-tool until"))))
		e.SeenHealthy(ctx, n, 2)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(BeEmpty())

		e.Clock.Step(10 * time.Minute) // the tool stopped renewing
		e.Touch(ctx, lease)
		Eventually(e.TestCRs(ctx, nodes[2].Name)).Should(HaveLen(1))
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonNoUpgrade))
	})

	It("pauses while a pause Lease without a duration exists, also beyond the maximum pause", func(ctx SpecContext) {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: pauseKey.Namespace, Name: pauseKey.Name}}
		e.Create(ctx, lease)
		n, nodes := e.NewPool(ctx, 3)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonPauseObject))
		e.Step(ctx, maxPause+time.Hour)
		e.Sicken(ctx, nodes[2]) // after the step: the controllers look at it with the stepped clock
		e.SeenHealthy(ctx, n, 2)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)()).To(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonPauseObject))
		Expect(e.K8s.Delete(ctx, lease)).To(Succeed())
		Eventually(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(HaveLen(1))
	})

	DescribeTable("holds new remediations while Cluster API rolls out",
		func(ctx SpecContext, kind string, rolling, done map[string]any) {
			obj := clusterAPI(ctx, kind, rolling)
			n, nodes := e.NewPool(ctx, 3)
			e.Sicken(ctx, nodes[2])
			Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonClusterAPIRollout),
				HaveField("Message", ContainSubstring(kind+" default/"+obj.GetName()))))
			e.SeenHealthy(ctx, n, 2)
			e.RemediationDecided(ctx, n)
			Consistently(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(BeEmpty())
			Expect(gateMetric(upgrade.DetectorClusterAPI, "closed")()).To(Equal(1.0))

			setClusterAPIStatus(ctx, obj, done)
			Eventually(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(HaveLen(1))
			Eventually(e.Events(ctx, obj.GetName())).Should(ContainElements(remediationv1alpha1.EventReasonUpgradeDetected, remediationv1alpha1.EventReasonUpgradeEnded))
		},
		Entry("MachineDeployment (v1beta1 status)", "MachineDeployment",
			map[string]any{"replicas": int64(4), "updatedReplicas": int64(1)}, map[string]any{"replicas": int64(3), "updatedReplicas": int64(3)}),
		Entry("MachineDeployment (v1beta2 status)", "MachineDeployment",
			map[string]any{"replicas": int64(3), "upToDateReplicas": int64(3), "conditions": []any{map[string]any{"type": "RollingOut", "status": "True"}}},
			map[string]any{"replicas": int64(3), "upToDateReplicas": int64(3), "conditions": []any{map[string]any{"type": "RollingOut", "status": "False"}}}),
		Entry("KubeadmControlPlane", "KubeadmControlPlane",
			map[string]any{"replicas": int64(3), "updatedReplicas": int64(2)}, map[string]any{"replicas": int64(3), "updatedReplicas": int64(3)}),
	)

	It("holds new remediations of a NodeHealthCheck while its nodes upgrade their kubelets one by one", func(ctx SpecContext) {
		n, nodes := e.NewPool(ctx, 6)
		kubelet := func(node *corev1.Node, v string) {
			update(ctx, node, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = v }, true)
		}
		cordon := func(node *corev1.Node, on bool) {
			update(ctx, node, func(n *corev1.Node) { n.Spec.Unschedulable = on }, false)
		}
		kubelet(nodes[0], "v1.38.0")
		for _, node := range nodes[1:] {
			kubelet(node, "v1.37.2")
		}
		By("mixed versions alone are no signal")
		e.Sicken(ctx, nodes[5])
		Eventually(e.TestCRs(ctx, nodes[5].Name)).Should(HaveLen(1))

		cordon(nodes[1], true)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonNodeRollingUpgrade),
			HaveField("Message", And(ContainSubstring("1.37 (5), 1.38 (1)"), ContainSubstring(nodes[1].Name+" is cordoned")))))
		Eventually(gateMetric(upgrade.DetectorNodeRollout, "closed")).Should(Equal(1.0))
		e.Sicken(ctx, nodes[4])
		e.SeenHealthy(ctx, n, 4)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[4].Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.TestCRs(ctx, nodes[5].Name)()).To(HaveLen(1), "the running remediation continues")

		cordon(nodes[1], false)
		Eventually(e.TestCRs(ctx, nodes[4].Name)).WithTimeout(time.Second).Should(HaveLen(1))
		Eventually(gateMetric(upgrade.DetectorNodeRollout, "closed")).Should(Equal(0.0))
	})

	It("measures a node-level signal's maximum pause from when the upgradeguard first saw it for the NodeHealthCheck", func(ctx SpecContext) {
		n, nodes := e.NewPool(ctx, 7)
		for i, node := range nodes {
			v := "v1.37.2"
			if i == 0 {
				v = "v1.38.0"
			}
			update(ctx, node, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = v }, true)
		}
		update(ctx, nodes[1], func(n *corev1.Node) { n.Spec.Unschedulable = true }, false)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonNodeRollingUpgrade))
		rollout := []upgrade.Signal{{Detector: upgrade.DetectorNodeRollout}}
		// The upgradeguard recorded it: the controllers read its start (unrecorded, it would begin at
		// every evaluation's now, and never expire).
		Eventually(func() time.Time { return gate.NodeSince(n.Name, rollout, time.Time{})[0].Since }).Should(BeTemporally("==", e.Clock.Now()))

		e.Step(ctx, maxPause-time.Minute)
		e.Sicken(ctx, nodes[4]) // after the step: the controllers look at it with the stepped clock
		e.SeenHealthy(ctx, n, 6)
		Consistently(e.TestCRs(ctx, nodes[4].Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)()).To(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonNodeRollingUpgrade),
			HaveField("Message", ContainSubstring("until %s at the latest", e.Clock.Now().Add(time.Minute).UTC().Format(time.RFC3339)))))

		e.Step(ctx, time.Minute)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired))
		Eventually(e.TestCRs(ctx, nodes[4].Name)).Should(HaveLen(1))

		update(ctx, nodes[1], func(n *corev1.Node) { n.Spec.Unschedulable = false }, false)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonNoUpgrade))
		Eventually(func() time.Time { return gate.NodeSince(n.Name, rollout, time.Time{})[0].Since }).Should(BeZero(), "forgotten when gone")
	})

	It("resumes with a warning after a signal's maximum pause, keeps resuming while it is stuck, and pauses again for a new signal", func(ctx SpecContext) {
		stuck := clusterAPI(ctx, "MachineDeployment", rollingOut())
		n, nodes := e.NewPool(ctx, 7) // three of them fall sick: 4 of 7 stay healthy, at least 51%
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonClusterAPIRollout),
			HaveField("Message", ContainSubstring(stuck.GetName()))))
		e.Step(ctx, maxPause-time.Minute)
		e.Sicken(ctx, nodes[3]) // after the step: the controllers look at it with the stepped clock
		e.SeenHealthy(ctx, n, 6)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[3].Name)).WithTimeout(time.Second).Should(BeEmpty())

		e.Step(ctx, time.Minute)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired),
			HaveField("Message", ContainSubstring(stuck.GetName()))))
		Eventually(e.TestCRs(ctx, nodes[3].Name)).Should(HaveLen(1))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonUpgradePauseExpired))

		e.Step(ctx, time.Hour)
		e.Sicken(ctx, nodes[5]) // a node falling sick now is remediated at once: the controllers looked after the step
		Eventually(e.TestCRs(ctx, nodes[5].Name)).Should(HaveLen(1))
		e.SeenHealthy(ctx, n, 5)
		Consistently(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).WithTimeout(500 * time.Millisecond).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired))

		By("a rollout that starts while the stuck one is still seen pauses for its own maximum pause")
		fresh := clusterAPI(ctx, "KubeadmControlPlane", rollingOut())
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonClusterAPIRollout),
			HaveField("Message", And(ContainSubstring(fresh.GetName()), ContainSubstring("has passed for: Cluster API rolls out MachineDeployment default/"+stuck.GetName())))))
		e.Step(ctx, maxPause-time.Minute)
		e.Sicken(ctx, nodes[4])
		e.SeenHealthy(ctx, n, 4)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[4].Name)).WithTimeout(time.Second).Should(BeEmpty())
		e.Step(ctx, time.Minute)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired))
		Eventually(e.TestCRs(ctx, nodes[4].Name)).Should(HaveLen(1))

		setClusterAPIStatus(ctx, stuck, rolledOut())
		setClusterAPIStatus(ctx, fresh, rolledOut())
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonNoUpgrade))
	})

	It("holds new remediations while the pause object exists, beyond the maximum pause, after another signal's pause expired", func(ctx SpecContext) {
		rollout := clusterAPI(ctx, "MachineDeployment", rollingOut())
		n, nodes := e.NewPool(ctx, 5)
		e.Sicken(ctx, nodes[3])
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonClusterAPIRollout))
		e.Step(ctx, maxPause)
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired))
		Eventually(e.TestCRs(ctx, nodes[3].Name)).Should(HaveLen(1))

		By("the pause object appears and holds for longer than the maximum pause")
		cm := pauseConfigMap(ctx, "upgrading the workers, by @admin")
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonPauseObject),
			HaveField("Message", And(ContainSubstring("upgrading the workers, by @admin"), ContainSubstring("has passed for: Cluster API rolls out")))))
		e.Step(ctx, maxPause+time.Hour)
		e.Sicken(ctx, nodes[4]) // after the step: the controllers look at it with the stepped clock
		e.SeenHealthy(ctx, n, 3)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[4].Name)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)()).To(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonPauseObject))
		Expect(e.Status(ctx, n)()).To(And(HaveField("Phase", remediationv1alpha1.PhasePaused), HaveField("Reason", ContainSubstring("pause ConfigMap default/pause-remediation exists"))))

		By("it is removed, and remediation resumes while the expired rollout is still seen")
		Expect(e.K8s.Delete(ctx, cm)).To(Succeed())
		Eventually(e.TestCRs(ctx, nodes[4].Name)).WithTimeout(time.Second).Should(HaveLen(1))
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElements(remediationv1alpha1.EventReasonUpgradeDetected, remediationv1alpha1.EventReasonUpgradePauseExpired))
		setClusterAPIStatus(ctx, rollout, rolledOut())
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonNoUpgrade))
	})

	It("turns the OpenShift ClusterVersion detector on when its CRD appears after the start", func(ctx SpecContext) {
		raw, err := os.ReadFile(testutil.Path("test", "crds", "openshift", "clusterversions.yaml"))
		Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(yaml.Unmarshal(raw, crd)).To(Succeed())
		if err := e.K8s.Create(ctx, crd); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(gate.Expected).Should(ContainElement(upgrade.DetectorClusterVersion))

		cv := &unstructured.Unstructured{}
		cv.SetAPIVersion("config.openshift.io/v1")
		cv.SetKind("ClusterVersion")
		cv.SetName("version")
		e.Create(ctx, cv)
		progressing := func(status string, since time.Time, history ...any) {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(cv), cv)).To(Succeed())
			Expect(unstructured.SetNestedSlice(cv.Object, []any{map[string]any{"type": "Progressing", "status": status,
				"message": "Working towards 4.20.1", "lastTransitionTime": since.UTC().Format(time.RFC3339)}}, "status", "conditions")).To(Succeed())
			Expect(unstructured.SetNestedSlice(cv.Object, history, "status", "history")).To(Succeed())
			Expect(e.K8s.Status().Update(ctx, cv)).To(Succeed())
		}
		progressing("True", time.Now())
		n, nodes := e.NewPool(ctx, 7) // three of them fall sick: 4 of 7 stay healthy, at least 51%
		e.Sicken(ctx, nodes[2])
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonClusterVersionProgressing),
			HaveField("Message", ContainSubstring("Working towards 4.20.1"))))
		e.SeenHealthy(ctx, n, 6)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(BeEmpty())
		progressing("False", time.Now())
		Eventually(e.TestCRs(ctx, nodes[2].Name)).WithTimeout(time.Second).Should(HaveLen(1))

		By("the pause is measured from the Progressing condition, which survives operator restarts")
		began := e.Clock.Now().Add(-maxPause - time.Minute)
		progressing("True", began, map[string]any{"state": "Partial", "startedTime": began.UTC().Format(time.RFC3339), "version": "4.20.1"})
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(And(testutil.HaveCondition(condFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired),
			HaveField("Message", ContainSubstring("Working towards 4.20.1"))))
		e.Sicken(ctx, nodes[3])
		Eventually(e.TestCRs(ctx, nodes[3].Name)).Should(HaveLen(1))

		By("an update started while the stuck one is still progressing pauses again")
		progressing("True", began, map[string]any{"state": "Partial", "startedTime": e.Clock.Now().UTC().Format(time.RFC3339), "version": "4.20.2"},
			map[string]any{"state": "Partial", "startedTime": began.UTC().Format(time.RFC3339), "version": "4.20.1"})
		Eventually(e.Condition(ctx, n, remediationv1alpha1.ConditionTypeUpgradeInProgress)).Should(testutil.HaveCondition(condTrue, remediationv1alpha1.ConditionReasonClusterVersionProgressing))
		e.Sicken(ctx, nodes[4])
		e.SeenHealthy(ctx, n, 4)
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, nodes[4].Name)).WithTimeout(time.Second).Should(BeEmpty())
		progressing("False", e.Clock.Now())
		Eventually(e.TestCRs(ctx, nodes[4].Name)).WithTimeout(time.Second).Should(HaveLen(1))
	})
})

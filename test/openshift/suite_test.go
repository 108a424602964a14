// Package openshift runs the controllers on a control plane that serves config.openshift.io, so the
// operator treats it as OpenShift: control-plane nodes are remediated only without risk to etcd
// quorum.
package openshift

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

var (
	// gate is the controllers' upgrade gate, so that specs can wait until it has seen a change.
	gate = upgrade.NewGate(false)
	e    = testutil.ControllerSuite(testutil.SuiteOptions{
		EnvOptions: testutil.EnvOptions{
			CRDDirs: []string{testutil.Path("test", "crds", "openshift")},
			BeforeStart: func(ctx context.Context, k8s client.Client) {
				Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lease.EtcdNamespace}})).To(Succeed())
			},
		},
		Configure: controller.ConfigureManager,
		Setup: func(mgr ctrl.Manager, clock *clocktesting.FakeClock) error {
			return controller.SetupWithManager(mgr, controller.Options{Clock: clock, Gate: gate,
				ConditionChanges: watch.NewConditionChanges(clock, watch.TrustEveryConditionTime)}) // fixtures backdate conditions
		},
	})
)

func TestOpenShift(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "OpenShift suite")
}

// etcdBudget creates the etcd guard PodDisruptionBudget allowing the given number of disruptions.
func etcdBudget(ctx context.Context, allowed int32) {
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: lease.EtcdNamespace, Name: e.Unique("etcd-guard-pdb")},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guard"}}},
	}
	e.Create(ctx, pdb)
	pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, ExpectedPods: 3, CurrentHealthy: 3, DesiredHealthy: 2}
	Expect(e.K8s.Status().Update(ctx, pdb)).To(Succeed())
}

// guardPod creates the node's etcd guard pod, ready or not.
func guardPod(ctx context.Context, node string, ready bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: lease.EtcdNamespace, Name: "etcd-guard-" + node, Labels: map[string]string{"app": "guard"}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "guard", Image: "guard"}}},
	}
	e.Create(ctx, pod)
	setPodReady(ctx, pod, ready)
	return pod
}

func setPodReady(ctx context.Context, pod *corev1.Pod, ready bool) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	setPodCondition(ctx, pod, status)
}

func setPodCondition(ctx context.Context, pod *corev1.Pod, ready corev1.ConditionStatus) {
	Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
	Expect(e.K8s.Status().Update(ctx, pod)).To(Succeed())
}

// unhealthyControlPlane creates two healthy workers and a control-plane node in a new group, lets
// setup prepare the node's surroundings (its guard pod) while it is healthy, as in a real cluster,
// then makes it unhealthy and creates an NHC for the group.
func unhealthyControlPlane(ctx context.Context, setup func(node string)) (*remediationv1alpha1.NodeHealthCheck, *corev1.Node) {
	group := e.Unique("g")
	e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	cp := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
	Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(cp), cp)).To(Succeed())
	cp.Labels[remediationcr.ControlPlaneRoleLabel] = ""
	Expect(e.K8s.Update(ctx, cp)).To(Succeed())
	setup(cp.Name)
	e.SetReady(ctx, cp, corev1.ConditionUnknown, time.Hour)
	return e.NewNHC(ctx, group), cp
}

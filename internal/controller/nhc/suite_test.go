package nhc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

var (
	scheme     = runtime.NewScheme()
	env        *envtest.Environment
	k8s        client.Client // uncached, for assertions
	fakeClock  *clocktesting.FakeClock
	reconciler *nhc.Reconciler
	cancel     context.CancelFunc
)

func TestNHCController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "nhc controller suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	Expect(testutil.CheckAssets()).To(Succeed())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(remediationv1alpha1.AddToScheme(scheme)).To(Succeed())

	env = testutil.NewEnvironment(nil, false)
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// API timestamps have second precision.
	fakeClock = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	opts := ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	nhc.ConfigureManager(&opts)
	mgr, err := ctrl.NewManager(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	reconciler = &nhc.Reconciler{Client: mgr.GetClient(), Clock: fakeClock, Recorder: mgr.GetEventRecorder(nhc.ControllerName)}
	Expect(reconciler.SetupWithManager(mgr)).To(Succeed())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()

	Expect(k8s.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pokeNode}})).To(Succeed())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

var counter int

func unique(prefix string) string {
	counter++
	return fmt.Sprintf("%s-%d", prefix, counter)
}

// pokeNode is a node no NodeHealthCheck selects; changing its labels makes every NodeHealthCheck
// reconcile, as any node change does. Specs poke after stepping the fake clock.
const pokeNode = "poke"

func poke(ctx context.Context) {
	n := &corev1.Node{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: pokeNode}, n)).To(Succeed())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["poke"] = fmt.Sprint(time.Now().UnixNano())
	Expect(k8s.Update(ctx, n)).To(Succeed())
}

// step advances the fake clock and makes the controllers look again.
func step(ctx context.Context, d time.Duration) {
	fakeClock.Step(d)
	poke(ctx)
}

// group labels the nodes of one spec, so each NodeHealthCheck selects only its own.
const groupLabel = "test.medik8s.io/group"

func newNode(ctx context.Context, group string, ready corev1.ConditionStatus, since time.Duration) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: unique("node"), Labels: map[string]string{groupLabel: group}}}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed()) })
	setReady(ctx, n, ready, since)
	return n
}

// setReady sets the node's Ready condition, which changed `since` before the fake clock's now.
func setReady(ctx context.Context, n *corev1.Node, status corev1.ConditionStatus, since time.Duration) {
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
	t := metav1.NewTime(fakeClock.Now().Add(-since))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: t, LastHeartbeatTime: t, Reason: "Test"}}
	Expect(k8s.Status().Update(ctx, n)).To(Succeed())
}

func templateObject(name string, withSpecTemplate bool) *unstructured.Unstructured {
	t := &unstructured.Unstructured{}
	t.SetAPIVersion("test.medik8s.io/v1alpha1")
	t.SetKind("TestRemediationTemplate")
	t.SetNamespace(testutil.TemplateNamespace)
	t.SetName(name)
	if withSpecTemplate {
		Expect(unstructured.SetNestedMap(t.Object, map[string]any{"spec": map[string]any{"strategy": "reboot"}}, "spec", "template")).To(Succeed())
	} else {
		Expect(unstructured.SetNestedField(t.Object, "x", "spec", "other")).To(Succeed())
	}
	return t
}

func newTemplate(ctx context.Context, withSpecTemplate bool) string {
	t := templateObject(unique("template"), withSpecTemplate)
	Expect(k8s.Create(ctx, t)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, t))).To(Succeed()) })
	return t.GetName()
}

// newNHC creates a NodeHealthCheck selecting the group's nodes with a fresh template.
func newNHC(ctx context.Context, group string, mutate ...func(*remediationv1alpha1.NodeHealthCheck)) *remediationv1alpha1.NodeHealthCheck {
	n := testutil.NewNHC(unique("nhc"))
	n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{groupLabel: group}}
	n.Spec.RemediationTemplate = testutil.TestTemplateRef(newTemplate(ctx, true))
	for _, m := range mutate {
		m(n)
	}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed()) })
	return n
}

// newCR creates a remediation CR for the node, owned by the NodeHealthCheck, as the remediation
// controller does.
func newCR(ctx context.Context, owner *remediationv1alpha1.NodeHealthCheck, node string) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("test.medik8s.io/v1alpha1")
	cr.SetKind("TestRemediation")
	cr.SetNamespace(testutil.TemplateNamespace)
	cr.SetName(node)
	cr.SetAnnotations(map[string]string{remediationv1alpha1.NodeNameAnnotation: node, remediationv1alpha1.TemplateNameAnnotation: owner.Spec.RemediationTemplate.Name})
	cr.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: remediationv1alpha1.GroupVersion.String(), Kind: "NodeHealthCheck", Name: owner.Name, UID: owner.UID}})
	Expect(k8s.Create(ctx, cr)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, cr))).To(Succeed()) })
	return cr
}

func status(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck) func() remediationv1alpha1.NodeHealthCheckStatus {
	return func() remediationv1alpha1.NodeHealthCheckStatus {
		got := &remediationv1alpha1.NodeHealthCheck{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
		return got.Status
	}
}

func listed(st remediationv1alpha1.NodeHealthCheckStatus) []string {
	var names []string
	for _, n := range st.UnhealthyNodes {
		names = append(names, n.Name)
	}
	return names
}

// events returns the reasons of the events about the object.
func events(ctx context.Context, regarding string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		Expect(k8s.List(ctx, list)).To(Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == regarding {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}
}

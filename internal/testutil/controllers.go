package testutil

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // test helpers
	. "github.com/onsi/gomega"    //nolint:revive // test helpers
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// ControllerEnv is a real control plane with a manager running controllers on a fake clock, and
// helpers that create objects for one spec (cleaned up after it) and read the state of the world.
type ControllerEnv struct {
	// Env is the envtest environment.
	Env *envtest.Environment
	// K8s is an uncached client, for assertions.
	K8s client.Client
	// Clock is the controllers' clock.
	Clock *clocktesting.FakeClock
	// Scheme has the core and NodeHealthCheck types.
	Scheme *runtime.Scheme

	cancel  context.CancelFunc
	counter atomic.Int64
	// cfg, o, configure and setup start a manager again (Restart); stopped is closed when the
	// running manager has stopped.
	cfg       *rest.Config
	o         EnvOptions
	configure func(*ctrl.Options)
	setup     func(ctrl.Manager, *clocktesting.FakeClock) error
	stopped   chan struct{}
}

// GroupLabel labels the nodes of one spec, so each NodeHealthCheck selects only its own.
const GroupLabel = "test.medik8s.io/group"

// EnvOptions change the control plane a ControllerSuite starts.
type EnvOptions struct {
	// NHCCRD is the NodeHealthCheck CRD to install; nil: the generated one. StructuralOnly(crd) lets
	// a suite store objects the CRD's validation would refuse.
	NHCCRD *apiextensionsv1.CustomResourceDefinition
	// CRDDirs are more folders of CRDs to install.
	CRDDirs []string
	// BeforeStart, when set, runs after the manager is set up and before it starts, with the
	// uncached client: objects it creates are there when the caches first list.
	BeforeStart func(ctx context.Context, k8s client.Client)
	// ManagerTransport, when set, wraps the transport of the manager's requests to the API server
	// (not those of K8s), for example with a RequestCounter.
	ManagerTransport func(http.RoundTripper) http.RoundTripper
}

// start starts a control plane set up by o and a manager configured by configure (the production
// manager options) and set up by setup (the controllers under test, given the fake clock).
func (e *ControllerEnv) start(o EnvOptions, configure func(*ctrl.Options), setup func(ctrl.Manager, *clocktesting.FakeClock) error) {
	Expect(CheckAssets()).To(Succeed())
	e.Scheme = Scheme()

	e.Env = NewEnvironment(o.NHCCRD, false)
	e.Env.CRDInstallOptions.Paths = append(e.Env.CRDInstallOptions.Paths, o.CRDDirs...)
	cfg, err := e.Env.Start()
	Expect(err).NotTo(HaveOccurred())
	e.K8s, err = client.New(cfg, client.Options{Scheme: e.Scheme})
	Expect(err).NotTo(HaveOccurred())

	// API timestamps have second precision.
	e.Clock = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	e.cfg, e.o, e.configure, e.setup = cfg, o, configure, setup
	e.startManager(o.BeforeStart)
}

// startManager starts a manager, as the operator's binary builds it, running the controllers under
// test; beforeStart, when set, runs before it starts.
func (e *ControllerEnv) startManager(beforeStart func(context.Context, client.Client)) {
	opts := ctrl.Options{Scheme: e.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// A restarted manager registers controllers of the same names in this process (Restart).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}}
	e.configure(&opts)
	mgrCfg := rest.CopyConfig(e.cfg)
	if e.o.ManagerTransport != nil {
		mgrCfg.Wrap(e.o.ManagerTransport)
	}
	mgr, err := ctrl.NewManager(mgrCfg, opts)
	Expect(err).NotTo(HaveOccurred())
	Expect(e.setup(mgr, e.Clock)).To(Succeed())
	if beforeStart != nil {
		beforeStart(context.Background(), e.K8s)
	}

	var ctx context.Context
	ctx, e.cancel = context.WithCancel(context.Background())
	stopped := make(chan struct{})
	e.stopped = stopped
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	go collectGarbage(ctx, e.K8s, 200*time.Millisecond)
}

// Restart stops the manager, waits until it has stopped, and starts a new one against the same API
// server: new caches (every informer lists afresh) and new controllers, whose first reconcile of
// each NodeHealthCheck comes after the start. This is a leader change: what the old leader held in
// memory is gone, what it wrote to the API stays. The fake clock is kept. whileStopped, when given,
// writes what no manager sees happen (it runs before the new one starts).
func (e *ControllerEnv) Restart(whileStopped ...func(context.Context, client.Client)) {
	GinkgoHelper()
	e.cancel()
	Eventually(e.stopped).WithTimeout(time.Minute).Should(BeClosed(), "the old manager stops")
	e.startManager(func(ctx context.Context, c client.Client) {
		for _, f := range whileStopped {
			f(ctx, c)
		}
	})
}

// Stop stops the manager and the control plane.
func (e *ControllerEnv) Stop() {
	if e == nil {
		return
	}
	if e.cancel != nil {
		e.cancel()
	}
	if e.Env != nil {
		Expect(e.Env.Stop()).To(Succeed())
	}
}

// Unique returns a name no other spec uses.
func (e *ControllerEnv) Unique(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, e.counter.Add(1))
}

// Poke makes every NodeHealthCheck reconcile in both controllers: it annotates each (a node event
// reconciles only the NodeHealthChecks that select the node). Specs poke after stepping the clock.
func (e *ControllerEnv) Poke(ctx context.Context) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheckList"))
	Expect(e.K8s.List(ctx, list)).To(Succeed())
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"test.medik8s.io/poked":"%d"}}}`, time.Now().UnixNano()))
	for i := range list.Items {
		nhc := &list.Items[i]
		nhc.SetGroupVersionKind(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck"))
		Expect(client.IgnoreNotFound(e.K8s.Patch(ctx, nhc, patch))).To(Succeed())
	}
}

// Step advances the fake clock and makes the controllers look again.
func (e *ControllerEnv) Step(ctx context.Context, d time.Duration) {
	e.Clock.Step(d)
	e.Poke(ctx)
}

// Touch changes an annotation of obj, which makes every controller watching it reconcile.
func (e *ControllerEnv) Touch(ctx context.Context, obj client.Object) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.medik8s.io/touched":"%d"}}}`, time.Now().UnixNano())
	Expect(e.K8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// NewNode creates a node of the group whose Ready condition has had status for since.
func (e *ControllerEnv) NewNode(ctx context.Context, group string, ready corev1.ConditionStatus, since time.Duration) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.Unique("node"), Labels: map[string]string{GroupLabel: group}}}
	Expect(e.K8s.Create(ctx, n)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(e.K8s.Delete(ctx, n))).To(Succeed()) })
	e.SetReady(ctx, n, ready, since)
	return n
}

// SetReady sets the node's Ready condition, which changed since before the fake clock's now.
// The operator may annotate the node meanwhile (a remediation request answered): again on a
// conflict, as a kubelet would.
func (e *ControllerEnv) SetReady(ctx context.Context, n *corev1.Node, status corev1.ConditionStatus, since time.Duration) {
	t := metav1.NewTime(e.Clock.Now().Add(-since))
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: t, LastHeartbeatTime: t, Reason: "Test"}}
		return e.K8s.Status().Update(ctx, n)
	})).To(Succeed())
}

// TemplateObject returns a TestRemediationTemplate, with spec.template.spec {strategy: reboot} or
// without spec.template.
func TemplateObject(name string, withSpecTemplate bool) *unstructured.Unstructured {
	t := &unstructured.Unstructured{}
	t.SetAPIVersion("test.medik8s.io/v1alpha1")
	t.SetKind("TestRemediationTemplate")
	t.SetNamespace(TemplateNamespace)
	t.SetName(name)
	if withSpecTemplate {
		Expect(unstructured.SetNestedMap(t.Object, map[string]any{"spec": map[string]any{"strategy": "reboot"}}, "spec", "template")).To(Succeed())
	} else {
		Expect(unstructured.SetNestedField(t.Object, "x", "spec", "other")).To(Succeed())
	}
	return t
}

// Create creates obj and deletes it after the spec.
func (e *ControllerEnv) Create(ctx context.Context, obj client.Object) {
	Expect(e.K8s.Create(ctx, obj)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(e.K8s.Delete(ctx, obj))).To(Succeed()) })
}

// NewTemplate creates a TestRemediationTemplate and returns its name.
func (e *ControllerEnv) NewTemplate(ctx context.Context, withSpecTemplate bool) string {
	t := TemplateObject(e.Unique("template"), withSpecTemplate)
	e.Create(ctx, t)
	return t.GetName()
}

// NewNHC creates a NodeHealthCheck selecting the group's nodes, with a fresh template.
func (e *ControllerEnv) NewNHC(ctx context.Context, group string, mutate ...func(*remediationv1alpha1.NodeHealthCheck)) *remediationv1alpha1.NodeHealthCheck {
	n := NewNHC(e.Unique("nhc"))
	n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{GroupLabel: group}}
	n.Spec.RemediationTemplate = TestTemplateRef(e.NewTemplate(ctx, true))
	for _, m := range mutate {
		m(n)
	}
	e.Create(ctx, n)
	return n
}

// NewPool creates n nodes of a new group, Ready for an hour, and a NodeHealthCheck selecting them
// (NewNHC, changed by mutate).
func (e *ControllerEnv) NewPool(ctx context.Context, n int, mutate ...func(*remediationv1alpha1.NodeHealthCheck)) (*remediationv1alpha1.NodeHealthCheck, []*corev1.Node) {
	group := e.Unique("g")
	var nodes []*corev1.Node
	for range n {
		nodes = append(nodes, e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour))
	}
	return e.NewNHC(ctx, group, mutate...), nodes
}

// Sicken makes the node unhealthy: Ready Unknown since an hour ago, past the default unhealthy
// conditions' durations.
func (e *ControllerEnv) Sicken(ctx context.Context, n *corev1.Node) {
	e.SetReady(ctx, n, corev1.ConditionUnknown, time.Hour)
}

// NewCR creates the remediation CR for the node from the template the NodeHealthCheck references,
// with the remediation controller's builder (remediationcr.Build), as that controller would.
func (e *ControllerEnv) NewCR(ctx context.Context, owner *remediationv1alpha1.NodeHealthCheck, node string) *unstructured.Unstructured {
	ref := owner.Spec.RemediationTemplate
	Expect(ref).NotTo(BeNil(), "NewCR builds from spec.remediationTemplate")
	template := &unstructured.Unstructured{}
	template.SetGroupVersionKind(ref.GroupVersionKind())
	Expect(e.K8s.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, template)).To(Succeed())
	target := &corev1.Node{}
	if err := e.K8s.Get(ctx, client.ObjectKey{Name: node}, target); err != nil {
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "getting node %s: %v", node, err)
		target.Name = node // a CR left for a node that is gone
	}
	cr, err := remediationcr.Build(template, owner, target, remediationcr.Machine{})
	Expect(err).NotTo(HaveOccurred())
	e.Create(ctx, cr)
	return cr
}

// Status returns a function reading the NodeHealthCheck's status, for Eventually.
func (e *ControllerEnv) Status(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck) func() remediationv1alpha1.NodeHealthCheckStatus {
	return func() remediationv1alpha1.NodeHealthCheckStatus {
		got := &remediationv1alpha1.NodeHealthCheck{}
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
		return got.Status
	}
}

// Condition returns a function reading the NodeHealthCheck's status condition of the type (the zero
// Condition while there is none), for Eventually.
func (e *ControllerEnv) Condition(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, conditionType string) func() metav1.Condition {
	return func() metav1.Condition {
		if c := meta.FindStatusCondition(e.Status(ctx, n)().Conditions, conditionType); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
}

// HaveCondition matches a condition's status and reason.
func HaveCondition(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(HaveField("Status", status), HaveField("Reason", reason))
}

// Listed returns the names in status.unhealthyNodes.
func Listed(st remediationv1alpha1.NodeHealthCheckStatus) []string {
	var names []string
	for _, n := range st.UnhealthyNodes {
		names = append(names, n.Name)
	}
	return names
}

// Events returns a function listing the reasons of the events regarding the named object.
func (e *ControllerEnv) Events(ctx context.Context, regarding string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		Expect(e.K8s.List(ctx, list)).To(Succeed())
		var reasons []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == regarding {
				reasons = append(reasons, ev.Reason)
			}
		}
		return reasons
	}
}

// RelatedEvents returns a function listing the reasons of the events regarding the named object
// and related to the named one.
func (e *ControllerEnv) RelatedEvents(ctx context.Context, regarding, related string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		Expect(e.K8s.List(ctx, list)).To(Succeed())
		var reasons []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == regarding && ev.Related != nil && ev.Related.Name == related {
				reasons = append(reasons, ev.Reason)
			}
		}
		return reasons
	}
}

// EventNotes returns a function listing the notes of the events with the reason regarding the named
// object.
func (e *ControllerEnv) EventNotes(ctx context.Context, regarding, reason string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		Expect(e.K8s.List(ctx, list)).To(Succeed())
		var notes []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == regarding && ev.Reason == reason {
				notes = append(notes, ev.Note)
			}
		}
		return notes
	}
}

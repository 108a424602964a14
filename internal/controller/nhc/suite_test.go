package nhc_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// The nhc controller runs alone here: specs create remediation CRs themselves (newCR) to play the
// remediation controller's part.
var (
	e          *testutil.ControllerEnv
	reconciler *nhc.Reconciler
)

func TestNHCController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "nhc controller suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	e = testutil.StartControllers(watch.ConfigureManager, func(mgr ctrl.Manager, clock *clocktesting.FakeClock) error {
		reconciler = &nhc.Reconciler{Client: mgr.GetClient(), Clock: clock, Recorder: mgr.GetEventRecorder(nhc.ControllerName)}
		return reconciler.SetupWithManager(mgr)
	})
})

var _ = AfterSuite(func() { e.Stop() })

// Short names for the shared helpers.
var (
	unique = func(p string) string { return e.Unique(p) }
	poke   = func(ctx context.Context) { e.Poke(ctx) }
	step   = func(ctx context.Context, d time.Duration) { e.Step(ctx, d) }
	listed = testutil.Listed
)

const groupLabel = testutil.GroupLabel

func newNode(ctx context.Context, group string, ready corev1.ConditionStatus, since time.Duration) *corev1.Node {
	return e.NewNode(ctx, group, ready, since)
}

func setReady(ctx context.Context, n *corev1.Node, status corev1.ConditionStatus, since time.Duration) {
	e.SetReady(ctx, n, status, since)
}

func newTemplate(ctx context.Context, withSpecTemplate bool) string {
	return e.NewTemplate(ctx, withSpecTemplate)
}

func newNHC(ctx context.Context, group string, mutate ...func(*remediationv1alpha1.NodeHealthCheck)) *remediationv1alpha1.NodeHealthCheck {
	return e.NewNHC(ctx, group, mutate...)
}

func newCR(ctx context.Context, owner *remediationv1alpha1.NodeHealthCheck, node string) *unstructured.Unstructured {
	return e.NewCR(ctx, owner, node)
}

func status(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck) func() remediationv1alpha1.NodeHealthCheckStatus {
	return e.Status(ctx, n)
}

func events(ctx context.Context, regarding string) func() []string { return e.Events(ctx, regarding) }

package testutil

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // test helpers
	. "github.com/onsi/gomega"    //nolint:revive // test helpers
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Witnesses: a Consistently that nothing happens proves something only after the controller that
// would act has decided with the change in view; these wait for that.

// SeenHealthy waits until the NodeHealthCheck's status counts that many healthy nodes. The nhc
// controller writes the status from the cache all controllers share, after the node changes made so
// far, so this shows that the cache holds them and that the nhc controller decided with them in
// view. It says nothing about the remediation controller: before a Consistently that it creates
// nothing, RemediationDecided follows.
func (e *ControllerEnv) SeenHealthy(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, healthy int) {
	GinkgoHelper()
	Eventually(e.Status(ctx, n)).Should(HaveField("HealthyNodes", HaveValue(Equal(healthy))), "the controllers saw the node changes")
}

// metricRemediationDecisions is remediation.MetricDecisions. (testutil cannot import the
// controllers: the internal tests of internal/targets, which they import, import testutil. A
// different name would make every RemediationDecided time out.)
const metricRemediationDecisions = "nodehealthcheck_remediation_decisions_total"

// RemediationDecisions returns how many decisions the remediation controller has carried out for
// the named NodeHealthCheck (remediation.MetricDecisions), 0 before the first.
func RemediationDecisions(name string) float64 {
	if m := Series(metricRemediationDecisions, map[string]string{"nhc": name}); m != nil {
		return m.GetCounter().GetValue()
	}
	return 0
}

// RemediationDecided returns once the remediation controller has decided the NodeHealthCheck and
// carried the decision out, in a reconcile that began after RemediationDecided was called. Call it
// once the shared cache shows the change (a witness of the nhc controller, such as SeenHealthy or a
// condition in status, since that controller reads the same cache; the upgrade gate and the fake
// clock are read from memory): a Consistently that the remediation controller creates nothing then
// follows a decision made with the change in view, and fails at once if that decision acted, since
// the count rises only after the decision's writes.
func (e *ControllerEnv) RemediationDecided(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck) {
	GinkgoHelper()
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck"))
	obj.SetName(n.Name)
	DecidedAfter(0, func() { e.Touch(ctx, obj) }, func() float64 { return RemediationDecisions(n.Name) },
		"the remediation controller decided NodeHealthCheck %s after the change", n.Name)
}

// DecidedAfter returns once a controller has ended a decision that began after the call, where
// count reads how many decisions of one object it has ended (remediation.MetricDecisions, read in
// this process or scraped from a manager) and touch makes it decide that object again (an
// annotation). Decisions of one object never overlap (the workqueue), and the count rises as each
// ends; at the call one may have begun earlier and not ended yet. So it touches, waits for one more
// decision, touches again and waits for another: that one began after the previous one ended, which
// was after the call. Each wait lasts at most timeout (0: the suite's default); description says
// what is awaited, for the failure message.
func DecidedAfter(timeout time.Duration, touch func(), count func() float64, description ...any) {
	GinkgoHelper()
	before := count()
	for i := 1; i <= 2; i++ {
		touch()
		wait := Eventually(count).WithPolling(10 * time.Millisecond)
		if timeout > 0 {
			wait = wait.WithTimeout(timeout)
		}
		wait.Should(BeNumerically(">=", before+float64(i)), description...)
	}
}

package remediation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// The uninstall of a release deletes only the node leases labelled with its identity
// (internal/plumbing/uninstall), so the operator labels those it creates, and an earlier version's at their
// next renewal; a lease another release labelled keeps its label.
var _ = Describe("Node leases of a release", func() {
	It("labels the leases it creates with the release's identity", func(ctx SpecContext) {
		group, sick := workers(ctx)
		e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Expect(nodeLease(ctx, sick.Name)().Labels).To(HaveKeyWithValue(nodelease.ReleaseLabel, release))
	})

	DescribeTable("labels an unlabelled lease of its NodeHealthCheck at its renewal, and leaves another release's label",
		func(ctx SpecContext, labels map[string]string, want string) {
			group, sick := workers(ctx)
			n := testutil.NewNHC(e.Unique("nhc"))
			n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{testutil.GroupLabel: group}}
			n.Spec.RemediationTemplate = testutil.TestTemplateRef(e.NewTemplate(ctx, true))
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodelease.DefaultNamespace}}
			Expect(client.IgnoreAlreadyExists(e.K8s.Create(ctx, ns))).To(Succeed())
			// Its NodeHealthCheck's, taken five minutes ago for the remediation's 11 minutes (by an
			// earlier process): due for renewal.
			taken := metav1.NewMicroTime(e.Clock.Now().Add(-5 * time.Minute))
			e.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: nodelease.Name(sick.Name), Labels: labels},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(nodelease.Holder(n.Name)), LeaseDurationSeconds: ptr.To[int32](11 * 60),
					AcquireTime: &taken, RenewTime: &taken}})
			e.Create(ctx, n)
			Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
			renewedNow(ctx, sick.Name)
			Expect(nodeLease(ctx, sick.Name)().Labels).To(HaveKeyWithValue(nodelease.ReleaseLabel, want))
		},
		Entry("an earlier version's lease, without the label", nil, release),
		Entry("another release's lease", map[string]string{nodelease.ReleaseLabel: "elsewhere.nhc"}, "elsewhere.nhc"),
	)
})

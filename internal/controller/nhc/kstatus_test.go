package nhc_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// kstatus computes what Helm 4's --wait, Flux and Argo CD's kstatus-based health make of the
// NodeHealthCheck as given.
func kstatus(n *remediationv1alpha1.NodeHealthCheck) status.Status {
	GinkgoHelper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck"))
	res, err := status.Compute(u)
	Expect(err).NotTo(HaveOccurred())
	return res.Status
}

var _ = Describe("Status that GitOps tools understand", func() {
	It("tells kstatus a spec the operator has evaluated from one it has not (status.observedGeneration)", func(ctx SpecContext) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group)
		get := func() *remediationv1alpha1.NodeHealthCheck {
			got := &remediationv1alpha1.NodeHealthCheck{}
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
			return got
		}
		Eventually(func() int64 { return get().Status.ObservedGeneration }).Should(Equal(int64(1)))
		Expect(kstatus(get())).To(Equal(status.CurrentStatus))

		By("a new spec: in progress until the operator has evaluated it")
		changed := get()
		v := intstr.FromInt32(1)
		changed.Spec.MinHealthy = &v
		Expect(e.K8s.Update(ctx, changed)).To(Succeed()) // changed is the API server's answer
		Expect(changed.Generation).To(Equal(int64(2)))
		Expect(kstatus(changed)).To(Equal(status.InProgressStatus))
		Eventually(func() status.Status { return kstatus(get()) }).Should(Equal(status.CurrentStatus))
		Expect(get().Status.ObservedGeneration).To(Equal(int64(2)))
	})
})

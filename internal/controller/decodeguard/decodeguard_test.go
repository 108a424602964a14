package decodeguard_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// patch merges raw JSON into the NodeHealthCheck.
func patch(ctx context.Context, name, raw string) (resourceVersion string) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(remediationv1alpha1.GroupVersion.String())
	u.SetKind("NodeHealthCheck")
	u.SetName(name)
	Expect(e.K8s.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(raw)))).To(Succeed())
	return u.GetResourceVersion()
}

// anyHealthy lets the NodeHealthCheck remediate however few of its nodes are healthy.
func anyHealthy(n *remediationv1alpha1.NodeHealthCheck) {
	zero := intstr.FromInt32(0)
	n.Spec.MinHealthy = &zero
}

// storedStatus returns a function reading the NodeHealthCheck's status through an unstructured
// read, which works while its spec cannot be decoded.
func storedStatus(ctx context.Context, name string) func() remediationv1alpha1.NodeHealthCheckStatus {
	return func() remediationv1alpha1.NodeHealthCheckStatus {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck"))
		Expect(e.K8s.Get(ctx, client.ObjectKey{Name: name}, u)).To(Succeed())
		st := remediationv1alpha1.NodeHealthCheckStatus{}
		if raw, ok := u.Object["status"].(map[string]any); ok {
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st)).To(Succeed())
		}
		return st
	}
}

var _ = Describe("A NodeHealthCheck the operator cannot decode", func() {
	It("is reported and skipped at start; the cache syncs and the others are evaluated and remediate", func(ctx SpecContext) {
		By("the typed client cannot list NodeHealthChecks at all")
		Expect(e.K8s.List(ctx, &remediationv1alpha1.NodeHealthCheckList{})).NotTo(Succeed())

		By("the manager's NodeHealthCheck informer syncs")
		informer, err := mgr.GetCache().GetInformer(ctx, &remediationv1alpha1.NodeHealthCheck{}, cache.BlockUntilSynced(false))
		Expect(err).NotTo(HaveOccurred())
		Eventually(informer.HasSynced).Should(BeTrue())
		Expect(cached(ctx, brokenAtStart)()).To(BeFalse())

		By("a good NodeHealthCheck is evaluated and remediates its unhealthy node")
		group := e.Unique("group")
		healthy := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		sick := e.NewNode(ctx, group, corev1.ConditionFalse, time.Hour)
		good := e.NewNHC(ctx, group, anyHealthy)
		Eventually(func(g Gomega) {
			st := e.Status(ctx, good)()
			g.Expect(st.ObservedNodes).To(HaveValue(Equal(2)))
			g.Expect(testutil.Listed(st)).To(ConsistOf(sick.Name))
		}).Should(Succeed())
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Expect(e.TestCRs(ctx, healthy.Name)()).To(BeEmpty())

		By("the broken one is reported: event, metric, registry, and it has no status")
		Eventually(e.Events(ctx, brokenAtStart)).Should(ContainElement(remediationv1alpha1.EventReasonInvalidSpec))
		Eventually(undecodableGauge(brokenAtStart)).Should(Equal(1.0))
		entry, ok := registry().Get(brokenAtStart)
		Expect(ok).To(BeTrue())
		Expect(entry.Error).To(HavePrefix("spec.minHealthy: "))
		Expect(storedStatus(ctx, brokenAtStart)()).To(BeZero())
	})

	It("is dropped when an update breaks it, keeps its remediation CRs, and comes back once fixed", func(ctx SpecContext) {
		group, control := e.Unique("group"), e.Unique("group")
		node := e.NewNode(ctx, group, corev1.ConditionFalse, time.Hour)
		controlNode := e.NewNode(ctx, control, corev1.ConditionFalse, time.Hour)
		nhc := e.NewNHC(ctx, group, anyHealthy)
		controlNHC := e.NewNHC(ctx, control, anyHealthy)
		Eventually(e.TestCRs(ctx, node.Name)).Should(HaveLen(1))
		Eventually(e.TestCRs(ctx, controlNode.Name)).Should(HaveLen(1))
		Eventually(e.Status(ctx, nhc)).Should(WithTransform(testutil.Listed, ConsistOf(node.Name)))

		By("an update the Go type cannot hold drops it from the cache")
		patch(ctx, nhc.Name, `{"spec":{"healthyDelay":"99999999999h"}}`)
		Eventually(cached(ctx, nhc.Name)).Should(BeFalse())
		Eventually(e.Events(ctx, nhc.Name)).Should(ContainElement(remediationv1alpha1.EventReasonInvalidSpec))
		Eventually(undecodableGauge(nhc.Name)).Should(Equal(1.0))
		entry, ok := registry().Get(nhc.Name)
		Expect(ok).To(BeTrue())
		Expect(entry.Error).To(HavePrefix("spec.healthyDelay: "))
		Expect(entry.UID).To(Equal(nhc.UID))

		By("both nodes recover: only the NodeHealthCheck still decoded acts on it")
		e.SetReady(ctx, controlNode, corev1.ConditionTrue, 0)
		e.SetReady(ctx, node, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, controlNode.Name)).Should(BeEmpty())
		Eventually(e.Status(ctx, controlNHC)).Should(WithTransform(testutil.Listed, BeEmpty()))
		Expect(e.TestCRs(ctx, node.Name)()).To(HaveLen(1), "the dropped NodeHealthCheck's CR is left alone")
		st := storedStatus(ctx, nhc.Name)()
		Expect(testutil.Listed(st)).To(ConsistOf(node.Name))
		Expect(st.UnhealthyNodes[0].ConditionsHealthyTimestamp).To(BeNil(), "the dropped NodeHealthCheck is not evaluated")

		By("fixing it brings it back: it is evaluated again and clears the recovered node's CR")
		patch(ctx, nhc.Name, `{"spec":{"healthyDelay":"0s"}}`)
		Eventually(cached(ctx, nhc.Name)).Should(BeTrue())
		Eventually(undecodableGauge(nhc.Name)).Should(Equal(-1.0))
		_, ok = registry().Get(nhc.Name)
		Expect(ok).To(BeFalse())
		e.Poke(ctx)
		Eventually(e.TestCRs(ctx, node.Name)).Should(BeEmpty())
		Eventually(e.Status(ctx, nhc)).Should(WithTransform(testutil.Listed, BeEmpty()))
	})

	It("is forgotten when it is deleted", func(ctx SpecContext) {
		name := e.Unique("broken")
		bad := undecodable(testutil.NewNHC(name), "", "spec", "healthyDelay") // a valid spec but for the condition's duration
		unstructured.RemoveNestedField(bad.Object, "spec", "healthyDelay")
		bad.Object["spec"].(map[string]any)["unhealthyConditions"].([]any)[0].(map[string]any)["duration"] = "99999999999h"
		e.Create(ctx, bad)
		Eventually(undecodableGauge(name)).Should(Equal(1.0))
		Eventually(e.Events(ctx, name)).Should(ContainElement(remediationv1alpha1.EventReasonInvalidSpec))
		entry, _ := registry().Get(name)
		Expect(entry.Error).To(HavePrefix("spec.unhealthyConditions: "))

		Expect(e.K8s.Delete(ctx, bad)).To(Succeed())
		Eventually(undecodableGauge(name)).Should(Equal(-1.0))
		_, ok := registry().Get(name)
		Expect(ok).To(BeFalse())
		Expect(cached(ctx, name)()).To(BeFalse())
	})

	It("never reaches the cache, whichever field breaks it", func(ctx SpecContext) {
		for i, bad := range []struct {
			value any
			path  []string
		}{
			{int64(2147483648), []string{"spec", "maxUnhealthy"}},
			{"forever", []string{"spec", "stormCooldownDuration"}},
			{int64(99999999999), []string{"spec", "minHealthy"}},
		} {
			name := fmt.Sprintf("%s-%d", e.Unique("shape"), i)
			nhc := testutil.NewNHC(name)
			if bad.path[1] == "maxUnhealthy" {
				nhc.Spec.MinHealthy = nil
			}
			e.Create(ctx, undecodable(nhc, bad.value, bad.path...))
			Eventually(undecodableGauge(name)).Should(Equal(1.0))
			Expect(cached(ctx, name)()).To(BeFalse())
		}
	})
})

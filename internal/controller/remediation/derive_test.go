package remediation_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// delayedWitness waits for the node's CR, lets the node recover, and returns once the
// NodeHealthCheck's healthyDelay (1h) keeps the CR: the witness forge needs.
func delayedWitness(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, witness *corev1.Node) {
	Eventually(e.TestCRs(ctx, witness.Name)).Should(HaveLen(1))
	e.SetReady(ctx, witness, corev1.ConditionTrue, 0)
	Eventually(func() bool { return isDelayed(entryOf(ctx, n, witness.Name)()) }).Should(BeTrue())
}

// forge writes status entries for the nodes as a stray status writer would (listed, without
// remediations), and in the same write moves the witness's conditionsHealthyTimestamp back past its
// healthyDelay. Status orders nothing, but it is the memory of that one timer: the witness's CR is
// deleted once the remediation controller has read this status version, which forge waits for.
// A Consistently that nothing happened to the forged nodes can follow.
func forge(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, witness string, nodes ...string) {
	long := metav1.NewTime(e.Clock.Now().Add(-2 * time.Hour))
	Eventually(func() error {
		got := &remediationv1alpha1.NodeHealthCheck{}
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
		for _, node := range nodes {
			if !slices.Contains(testutil.Listed(got.Status), node) {
				got.Status.UnhealthyNodes = append(got.Status.UnhealthyNodes, remediationv1alpha1.UnhealthyNode{Name: node})
			}
		}
		for i := range got.Status.UnhealthyNodes {
			if got.Status.UnhealthyNodes[i].Name == witness {
				got.Status.UnhealthyNodes[i].ConditionsHealthyTimestamp = &long
			}
		}
		return e.K8s.Status().Update(ctx, got)
	}).Should(Succeed())
	Eventually(e.TestCRs(ctx, witness)).Should(BeEmpty(), "the remediation controller read the forged status")
}

// pause sets the NodeHealthCheck's pauseRequests (none: resumes it) with a merge patch, which the
// controllers' status writes cannot make conflict.
func pause(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, requests ...string) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"pauseRequests": requests}})
	Expect(err).NotTo(HaveOccurred())
	Expect(e.K8s.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

var _ = Describe("Status is a report, not a command", func() {
	It("creates no CR for a forged status entry of a healthy, an unselected or an excluded node", func(ctx SpecContext) {
		group, witness := workers(ctx)
		healthy := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		healthy2 := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		excluded := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		label(ctx, excluded, remediationv1alpha1.ExcludeFromRemediationLabel, "true")
		elsewhere := e.NewNode(ctx, e.Unique("other"), corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromInt32(1)
			n.Spec.MinHealthy = &v
			n.Spec.HealthyDelay = &metav1.Duration{Duration: time.Hour}
		})
		delayedWitness(ctx, n, witness)
		e.SetReady(ctx, excluded, corev1.ConditionUnknown, time.Hour)
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ContainElement(excluded.Name),
			"an excluded unhealthy node is listed, without remediations")

		forge(ctx, n, witness.Name, healthy.Name, healthy2.Name, excluded.Name, elsewhere.Name)
		Consistently(func() int {
			return len(e.TestCRs(ctx, healthy.Name)()) + len(e.TestCRs(ctx, excluded.Name)()) + len(e.TestCRs(ctx, elsewhere.Name)()) +
				len(e.TestCRs(ctx, healthy2.Name)())
		}).WithTimeout(time.Second).Should(BeZero())
	})

	It("starts no remediation beyond the budget, however many entries the status lists", func(ctx SpecContext) {
		group := e.Unique("g")
		var healthy []*corev1.Node
		for range 4 {
			healthy = append(healthy, e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour))
		}
		witness := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromInt32(4)
			n.Spec.MinHealthy = &v
			n.Spec.MaxUnhealthy = nil
			n.Spec.HealthyDelay = &metav1.Duration{Duration: time.Hour}
		})
		Eventually(e.TestCRs(ctx, witness.Name)).Should(HaveLen(1))
		// Two nodes over the budget: the witness's recovery (counted healthy once its CR is gone)
		// does not bring it back.
		e.SetReady(ctx, healthy[2], corev1.ConditionUnknown, time.Hour)
		e.SetReady(ctx, healthy[3], corev1.ConditionUnknown, time.Hour)
		sick := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		delayedWitness(ctx, n, witness)
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("2 of 6 selected nodes are healthy, 4 required"))
		Expect(testutil.Listed(e.Status(ctx, n)())).To(ContainElements(healthy[2].Name, healthy[3].Name, sick.Name),
			"the held-back nodes are listed")

		forge(ctx, n, witness.Name, healthy[2].Name, healthy[3].Name, sick.Name)
		Consistently(func() int {
			return len(e.TestCRs(ctx, healthy[2].Name)()) + len(e.TestCRs(ctx, healthy[3].Name)()) + len(e.TestCRs(ctx, sick.Name)())
		}).WithTimeout(time.Second).Should(BeZero())
	})

	It("re-derives the decision when a node recovered after the status listed it", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 2 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		node := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		witness := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.HealthyDelay = &metav1.Duration{Duration: time.Hour}
		})
		delayedWitness(ctx, n, witness)
		pause(ctx, n, "hold")
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhasePaused))
		// Unhealthy and held back by the pause: its CR shows the remediation controller looked once
		// the pause ended.
		held := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		// An entry written while the node was unhealthy, then the node recovered and the pause ended.
		forge(ctx, n, witness.Name, node.Name)
		pause(ctx, n)
		Eventually(e.TestCRs(ctx, held.Name)).Should(HaveLen(1), "the remediation controller looked once the pause ended")
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(held.Name))
		Consistently(e.TestCRs(ctx, node.Name)).WithTimeout(time.Second).Should(BeEmpty())
	})
})

var _ = Describe("Across NodeHealthChecks", func() {
	It("never starts a second remediator on a node another NodeHealthCheck remediates with another kind", func(ctx SpecContext) {
		snr := snrTemplate(ctx)
		_, sick, own, first, second := firstAndSecond(ctx, func(*remediationv1alpha1.NodeHealthCheck) *corev1.ObjectReference { return snr })
		Eventually(func() string { return e.Status(ctx, second)().Reason }).Should(ContainSubstring("remediated by NodeHealthCheck " + first.Name))
		Eventually(e.CRsOf(ctx, own.Name, testutil.SelfNodeRemediationKind)).Should(HaveLen(1), "the remediation controller reconciled the second NodeHealthCheck")
		Consistently(e.CRsOf(ctx, sick.Name, testutil.SelfNodeRemediationKind)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(heldBack(ctx, second, sick.Name)()).To(BeTrue(), "listed in the second's status without remediations")
		// The first's status lists the CR once its batched write is made.
		Eventually(entryOf(ctx, first, sick.Name)).Should(HaveField("Remediations", HaveLen(1)), "and with its CR in the first's")
	})

	It("remediates one control-plane node at a time across NodeHealthChecks", func(ctx SpecContext) {
		var cps, spares []*corev1.Node
		var nhcs []*remediationv1alpha1.NodeHealthCheck
		for range 2 {
			group := e.Unique("g")
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			cp := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			label(ctx, cp, remediationcr.ControlPlaneRoleLabel, "")
			cps = append(cps, cp)
			spares = append(spares, e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour))
			nhcs = append(nhcs, e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(1); n.Spec.MinHealthy = &v }))
		}
		for _, cp := range cps {
			e.SetReady(ctx, cp, corev1.ConditionUnknown, time.Hour)
		}
		crCount := func() int { return len(e.TestCRs(ctx, cps[0].Name)()) + len(e.TestCRs(ctx, cps[1].Name)()) }
		Eventually(crCount).Should(Equal(1))
		waiting := 1
		if len(e.TestCRs(ctx, cps[0].Name)()) == 0 {
			waiting = 0
		}
		Eventually(func() string { return e.Status(ctx, nhcs[waiting])().Reason }).Should(ContainSubstring("waits until the remediation of control-plane node " + cps[1-waiting].Name))
		// A worker of the waiting NodeHealthCheck fails: its CR shows the remediation controller
		// reconciled that NodeHealthCheck after the other's control-plane CR was created.
		e.SetReady(ctx, spares[waiting], corev1.ConditionUnknown, time.Hour)
		Eventually(e.TestCRs(ctx, spares[waiting].Name)).Should(HaveLen(1))
		Consistently(crCount).WithTimeout(time.Second).Should(Equal(1), "never both at once")
		e.SetReady(ctx, cps[1-waiting], corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, cps[waiting].Name)).Should(HaveLen(1))
	})
})

var _ = Describe("A template change during a remediation", func() {
	It("keeps the running CR, found by ownership, starts no second remediator, and removes it when the node recovers", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		old := e.TestCRs(ctx, sick.Name)()[0]

		// The status does not list the CR yet (a stale report), so the CRD's transition rule lets the
		// template change through, to another kind. The nhc controller rewrites the status meanwhile
		// (a conflict, or a refusal once it lists the CR again): both writes are tried again together.
		snr := snrTemplate(ctx)
		Eventually(func() error {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), n)).To(Succeed())
			n.Status.UnhealthyNodes = nil
			if err := e.K8s.Status().Update(ctx, n); err != nil {
				return err
			}
			n.Spec.RemediationTemplate = snr
			return e.K8s.Update(ctx, n)
		}).Should(Succeed())

		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			And(ContainSubstring(old.GetName()), ContainSubstring("which the spec no longer references"))))
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(sick.Name), "the status lists the node with its CR, found by ownership")
		Expect(e.Status(ctx, n)().UnhealthyNodes[0].Remediations).To(HaveLen(1))
		Consistently(e.CRsOf(ctx, sick.Name, testutil.SelfNodeRemediationKind)).WithTimeout(time.Second).Should(BeEmpty())
		Expect(e.TestCRs(ctx, sick.Name)()).To(HaveLen(1))

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
	})
})

var _ = Describe("Errors", func() {
	It("a node whose action fails keeps neither its own retry nor the others' deadlines from the result", func(ctx SpecContext) {
		group := e.Unique("g")
		for range 3 {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		broken := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		soon := e.NewNode(ctx, group, corev1.ConditionUnknown, 290*time.Second) // due in 10s
		// Paused for the suite's manager; the reconciler below reads it without the pause.
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.PauseRequests = []string{"not for the suite's manager"}
		})
		Eventually(func() remediationv1alpha1.NHCPhase { return e.Status(ctx, n)().Phase }).Should(Equal(remediationv1alpha1.PhasePaused))

		// A reconciler whose creates fail for one node, on the real API server.
		withWatch, err := client.NewWithWatch(e.Env.Config, client.Options{Scheme: e.Scheme})
		Expect(err).NotTo(HaveOccurred())
		failing := interceptor.NewClient(withWatch, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				err := c.Get(ctx, key, obj, opts...)
				if got, ok := obj.(*remediationv1alpha1.NodeHealthCheck); ok {
					got.Spec.PauseRequests = nil
				}
				return err
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if u, ok := obj.(*unstructured.Unstructured); ok && remediationcr.NodeName(u) == broken.Name {
					return errors.New("injected")
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		r := remediation.Standalone(failing, e.Clock, e.Unique("leases"), nil)
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(n)})
		Expect(err).NotTo(HaveOccurred(), "an error would make controller-runtime drop the deadlines")
		Expect(res.RequeueAfter).To(BeNumerically(">", 0))
		Expect(res.RequeueAfter).To(BeNumerically("<=", time.Second), "the failed node is retried soon")
		Expect(e.TestCRs(ctx, broken.Name)()).To(BeEmpty())

		// The retry backs off, but never past the other node's deadline.
		for range 8 {
			res, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(n)})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(res.RequeueAfter).To(Equal(10*time.Second), "%s becomes unhealthy in 10s", soon.Name)
	})
})

// snrTemplate creates a SelfNodeRemediationTemplate and returns its reference.
func snrTemplate(ctx context.Context) *corev1.ObjectReference {
	t := &unstructured.Unstructured{}
	t.SetAPIVersion("self-node-remediation.medik8s.io/v1alpha1")
	t.SetKind("SelfNodeRemediationTemplate")
	t.SetNamespace(testutil.TemplateNamespace)
	t.SetName(e.Unique("snr"))
	Expect(unstructured.SetNestedMap(t.Object, map[string]any{"spec": map[string]any{"remediationStrategy": "Automatic"}}, "spec", "template")).To(Succeed())
	e.Create(ctx, t)
	return &corev1.ObjectReference{APIVersion: t.GetAPIVersion(), Kind: t.GetKind(), Namespace: t.GetNamespace(), Name: t.GetName()}
}

var _ = Describe("A CR name that is taken", func() {
	It("is explained once, and the object that holds it is left alone", func(ctx SpecContext) {
		group, sick := workers(ctx)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour) // the budget, with the node failing below
		// An object of the remediation kind named after the node, which no NodeHealthCheck controls
		// (left by hand, or by another tool), built as the remediation controller would build its CR.
		foreign, err := remediationcr.Build(testutil.TemplateObject("foreign", true), testutil.NewNHC("someone"), sick, remediationcr.Machine{})
		Expect(err).NotTo(HaveOccurred())
		foreign.SetOwnerReferences(nil)
		e.Create(ctx, foreign)

		n := e.NewNHC(ctx, group)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			ContainSubstring("Node " + sick.Name + ": cannot create TestRemediation " + testutil.TemplateNamespace + "/" + sick.Name + ": an object of that name that no NodeHealthCheck controls exists")))
		// Another node fails: its CR shows the remediation controller looked again, and tried sick's too.
		next := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		Eventually(e.TestCRs(ctx, next.Name)).Should(HaveLen(1))
		// (Counted among this explanation's notes: the nhc controller may have reported the template
		// missing at its first look, before its cache showed the template created a moment before.)
		explanations := func() []string {
			var out []string
			for _, note := range e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)() {
				if strings.Contains(note, "cannot create TestRemediation") {
					out = append(out, note)
				}
			}
			return out
		}
		Consistently(explanations).WithTimeout(time.Second).Should(HaveLen(1), "once")
		got := e.TestCRs(ctx, sick.Name)()
		Expect(got).To(HaveLen(1))
		Expect(got[0].GetUID()).To(Equal(foreign.GetUID()))
		Expect(got[0].GetOwnerReferences()).To(BeEmpty())
	})
})

var _ = Describe("A control-plane CR of a node that is gone", func() {
	It("holds the other control-plane nodes until it is gone", func(ctx SpecContext) {
		// Another NodeHealthCheck's CR for a control-plane node that is being reprovisioned: the Node
		// is gone, and the remediator's finalizer keeps the CR while it works. Labelled
		// isControlPlaneNode, it counts whatever its node is now.
		other := e.NewNHC(ctx, e.Unique("nothing"))
		gone := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.Unique("gone-cp"), Labels: map[string]string{remediationcr.ControlPlaneRoleLabel: ""}}}
		template := &unstructured.Unstructured{}
		template.SetGroupVersionKind(other.Spec.RemediationTemplate.GroupVersionKind())
		Expect(e.K8s.Get(ctx, client.ObjectKey{Namespace: other.Spec.RemediationTemplate.Namespace, Name: other.Spec.RemediationTemplate.Name}, template)).To(Succeed())
		held, err := remediationcr.Build(template, other, gone, remediationcr.Machine{})
		Expect(err).NotTo(HaveOccurred())
		Expect(held.GetLabels()).To(HaveKey(remediationv1alpha1.ControlPlaneCRLabel))
		held.SetFinalizers([]string{"test.medik8s.io/remediator"})
		e.Create(ctx, held)
		release := func(ctx context.Context) {
			Eventually(func() error {
				Expect(client.IgnoreNotFound(e.K8s.Get(ctx, client.ObjectKeyFromObject(held), held))).To(Succeed())
				held.SetFinalizers(nil)
				return client.IgnoreNotFound(e.K8s.Update(ctx, held))
			}).Should(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) { release(ctx) })
		// Not selected by its NodeHealthCheck (the node is gone): deleted as an orphan, kept by the finalizer.
		Eventually(func() bool {
			Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(held), held)).To(Succeed())
			return held.GetDeletionTimestamp() != nil
		}).Should(BeTrue())

		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		cp := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		label(ctx, cp, remediationcr.ControlPlaneRoleLabel, "")
		worker := e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(1); n.Spec.MinHealthy = &v })
		Eventually(e.TestCRs(ctx, worker.Name)).Should(HaveLen(1)) // it works, and workers are not held
		e.SetReady(ctx, cp, corev1.ConditionUnknown, time.Hour)
		Eventually(func() string { return e.Status(ctx, n)().Reason }).Should(ContainSubstring("control-plane node " + gone.Name))
		e.RemediationDecided(ctx, n)
		Consistently(e.TestCRs(ctx, cp.Name)).WithTimeout(time.Second).Should(BeEmpty())

		release(ctx)
		Eventually(e.TestCRs(ctx, cp.Name)).Should(HaveLen(1))
	})
})

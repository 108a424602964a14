package remediation_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	commonlease "github.com/medik8s/common/pkg/lease"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

func nodeLease(ctx context.Context, node string) func() *coordinationv1.Lease {
	return func() *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		err := e.K8s.Get(ctx, client.ObjectKey{Namespace: nodelease.DefaultNamespace, Name: "node-" + node}, l)
		if apierrors.IsNotFound(err) {
			return nil
		}
		Expect(err).NotTo(HaveOccurred())
		return l
	}
}

// renewedNow waits until the node's lease was renewed at the fake clock's time. The remediation
// controller renews the lease of a running remediation with its clock once a third of the lease's
// duration has passed, so this shows it reconciled the NodeHealthCheck after the clock was last set,
// with the node's CR in view.
func renewedNow(ctx context.Context, node string) {
	GinkgoHelper()
	Eventually(func() time.Time {
		l := nodeLease(ctx, node)()
		if l == nil || l.Spec.RenewTime == nil {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}).Should(BeTemporally("==", e.Clock.Now()), "the remediation controller renewed the lease of node %s at the clock's time", node)
}

var _ = Describe("Node leases", func() {
	It("takes the node's lease before remediating, owned by the node, and releases it when the node is healthy", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Eventually(nodeLease(ctx, sick.Name)).Should(PointTo(MatchFields(IgnoreExtras, Fields{
			"ObjectMeta": MatchFields(IgnoreExtras, Fields{"OwnerReferences": ConsistOf(MatchFields(IgnoreExtras, Fields{
				"Kind": Equal("Node"), "Name": Equal(sick.Name), "UID": Equal(sick.UID)}))}),
			"Spec": MatchFields(IgnoreExtras, Fields{
				"HolderIdentity":       PointTo(Equal("NodeHealthCheck-" + n.Name)),
				"LeaseDurationSeconds": PointTo(BeEquivalentTo(11 * 60)), // a single template: 10m + 1m
			}),
		})))

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
		Eventually(nodeLease(ctx, sick.Name)).Should(BeNil())
	})

	It("releases, after a leader change, a lease the old leader left on a node whose CR went while no leader ran", func(ctx SpecContext) {
		group, sick := workers(ctx)
		e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Eventually(nodeLease(ctx, sick.Name)).ShouldNot(BeNil())
		e.Restart(func(ctx context.Context, c client.Client) {
			// No leader sees the node come back and its remediator delete its CR: only the new
			// leader's sweep of the leases its NodeHealthChecks hold (a List of the lease cache) can
			// find the lease.
			e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
			for _, cr := range e.TestCRs(ctx, sick.Name)() {
				Expect(c.Delete(ctx, &cr)).To(Succeed())
			}
			Eventually(e.TestCRs(ctx, sick.Name)).Should(BeEmpty())
		})
		Eventually(nodeLease(ctx, sick.Name)).Should(BeNil(), "the new leader released the lease the old one left")
	})

	It("waits while another party holds a valid lease on the node, and remediates once it expires", func(ctx SpecContext) {
		group, sick := workers(ctx)
		// Due when the foreign lease has a second left (with one more healthy node for the budget):
		// its CR shows the remediation controller looked at that time.
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		soon := e.NewNode(ctx, group, corev1.ConditionUnknown, 181*time.Second)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodelease.DefaultNamespace}}
		Expect(client.IgnoreAlreadyExists(e.K8s.Create(ctx, ns))).To(Succeed())
		holder, seconds := "node-maintenance-operator", int32(120)
		foreign := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "node-" + sick.Name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds,
				AcquireTime: &metav1.MicroTime{Time: e.Clock.Now()}, RenewTime: &metav1.MicroTime{Time: e.Clock.Now()}},
		}
		Expect(e.K8s.Create(ctx, foreign)).To(Succeed())
		// Only the lease may hold the node back: while the upgrade gate does not know the cluster's
		// state yet (this spec running first), nothing would start anyway.
		Eventually(func() bool { return controllers.Gate.Verdict().Known }).Should(BeTrue(), "the upgrade gate knows the cluster's state")

		n := e.NewNHC(ctx, group)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			ContainSubstring("Node " + sick.Name + " is leased by " + holder)))
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(BeEmpty())
		// Listed without remediations once the status write has waited its moment for the first CR
		// (nhc.DefaultStartWait).
		Eventually(heldBack(ctx, n, sick.Name)).Should(BeTrue(), "listed without remediations while the lease holds it back")
		// Status tells what runs: no remediation, and who holds the node.
		st := e.Status(ctx, n)()
		Expect(st.Phase).To(Equal(remediationv1alpha1.PhaseEnabled), st.Reason)
		Expect(st.Reason).To(ContainSubstring("node %s is leased by %s until", sick.Name, holder))
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			ContainSubstring("(%s): node %s is leased by %s", "NodeLeased", sick.Name, holder)), "the status writer's event names the holder too")

		e.Step(ctx, 119*time.Second)
		e.Touch(ctx, n)
		Eventually(e.TestCRs(ctx, soon.Name)).Should(HaveLen(1), "the remediation controller looked 119s later")
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(BeEmpty())
		e.Step(ctx, time.Second)
		e.Touch(ctx, n)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Expect(nodeLease(ctx, sick.Name)().Spec.HolderIdentity).To(PointTo(Equal("NodeHealthCheck-" + n.Name)))
	})

	It("times the remediation out when its step is overdue by three lease durations", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Eventually(nodeLease(ctx, sick.Name)).ShouldNot(BeNil())
		// The step started when its CR was created (the API server's clock), whatever the lease's
		// acquireTime says: the public operator's leases keep the first step's.
		started := e.TestCRs(ctx, sick.Name)()[0].GetCreationTimestamp().Time
		timedOut := func() map[string]string { return e.TestCRs(ctx, sick.Name)()[0].GetAnnotations() }

		e.Clock.SetTime(started.Add(33 * time.Minute)) // 3 x 11m: not beyond yet
		e.Touch(ctx, n)
		renewedNow(ctx, sick.Name)
		Consistently(timedOut).WithTimeout(time.Second).ShouldNot(HaveKey(remediationv1alpha1.NHCTimedOutAnnotation))
		e.Clock.SetTime(started.Add(33*time.Minute + time.Second))
		e.Touch(ctx, n)
		Eventually(timedOut).Should(HaveKey(remediationv1alpha1.NHCTimedOutAnnotation))
		Eventually(e.Events(ctx, n.Name)).Should(ContainElement(remediationv1alpha1.EventReasonNoTemplateLeft))
	})
})

// Renewals read the lease cache, never the API server: at 1,000 nodes with 134 running remediations,
// reading each lease around the cache cost about 4 GETs a second.
var _ = Describe("Node lease reads", func() {
	leaseReads := func(r testutil.Request) bool {
		return r.Method == http.MethodGet && !r.Watch &&
			strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/v1/namespaces/"+nodelease.DefaultNamespace+"/leases")
	}
	leaseWatch := func(r testutil.Request) bool {
		return r.Method == http.MethodGet && r.Watch && r.Path == "/apis/coordination.k8s.io/v1/namespaces/"+nodelease.DefaultNamespace+"/leases"
	}
	leaseUpdates := func(r testutil.Request) bool {
		return r.Method == http.MethodPut && strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/v1/namespaces/"+nodelease.DefaultNamespace+"/leases/")
	}

	It("renews the leases of running remediations without reading a lease from the API server", func(ctx SpecContext) {
		const sick, healthy, periods = 4, 5, 3 // 5 of 9 healthy: within the default minHealthy of 51%
		group := e.Unique("g")
		for range healthy {
			e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		}
		var nodes []*corev1.Node
		for range sick {
			nodes = append(nodes, e.NewNode(ctx, group, corev1.ConditionUnknown, time.Hour))
		}
		n := e.NewNHC(ctx, group)
		for _, node := range nodes {
			Eventually(e.TestCRs(ctx, node.Name)).Should(HaveLen(1))
			Eventually(nodeLease(ctx, node.Name)).ShouldNot(BeNil())
		}

		mark := requests.Mark()
		for p := 1; p <= periods; p++ {
			// A single template's lease lasts 11m and is renewed once a third of it has passed.
			e.Clock.Step(11*time.Minute/3 + time.Second)
			e.Touch(ctx, n)
			for _, node := range nodes {
				renewedNow(ctx, node.Name)
			}
		}
		Expect(requests.Since(0, leaseWatch)).NotTo(BeEmpty(), "the manager watches the leases in the lease namespace: the renewals were decided from its cache")
		updates := requests.Since(mark, leaseUpdates)
		Expect(len(updates)).To(BeNumerically(">=", sick*periods), "every running remediation renewed its lease in every period")
		Expect(requests.Since(mark, leaseReads)).To(BeEmpty(), "no lease was read around the cache while %d remediations renewed their leases %d times", sick, len(updates))
		for _, node := range nodes {
			Expect(e.TestCRs(ctx, node.Name)()).To(HaveLen(1), "still running")
		}
		AddReportEntry("lease requests while renewing", fmt.Sprintf("%d remediations, %d renewal periods: %d lease updates, %d lease reads around the cache",
			sick, periods, len(updates), len(requests.Since(mark, leaseReads))))
	})

	It("renews a lease the cache shows stale: the write conflicts, and the lease is read again and renewed", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Eventually(nodeLease(ctx, sick.Name)).ShouldNot(BeNil())
		stale := nodeLease(ctx, sick.Name)()

		// Someone else writes the lease (it stays ours): the copy the cache showed is stale now.
		current := stale.DeepCopy()
		current.Annotations = map[string]string{"test.medik8s.io/written": "elsewhere"}
		Expect(e.K8s.Update(ctx, current)).To(Succeed())

		var conflicts int
		counting := interceptor.NewClient(withWatch(), interceptor.Funcs{
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				err := c.Update(ctx, obj, opts...)
				if _, lease := obj.(*coordinationv1.Lease); lease && apierrors.IsConflict(err) {
					conflicts++
				}
				return err
			},
		})
		// The renewal is due on the clock of the reconciler under test only: the manager's controller,
		// on e.Clock, may look at any moment (a status write, the lease event above) and must not
		// renew the lease between the re-read and the renewal (it did, a flake).
		clock := clocktesting.NewFakeClock(e.Clock.Now().Add(11*time.Minute/3 + time.Second))
		r := remediation.Standalone(counting, clock, "", staleLeases{Reader: e.K8s, lease: stale})
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(n)})
		Expect(err).NotTo(HaveOccurred())
		Expect(conflicts).To(BeNumerically(">=", 1), "the renewal of the stale copy conflicted")
		Expect(res.RequeueAfter).To(BeNumerically(">", time.Minute), "no failure is retried: the renewal succeeded after the conflict")
		renewed := nodeLease(ctx, sick.Name)()
		Expect(renewed.Spec.RenewTime.Time).To(BeTemporally("==", clock.Now()))
		Expect(renewed.Annotations).To(HaveKeyWithValue("test.medik8s.io/written", "elsewhere"), "renewed from the lease read again, not from the stale copy")
	})
})

// staleLeases shows a fixed, stale copy of one lease, as a lease cache that is behind would.
type staleLeases struct {
	client.Reader
	lease *coordinationv1.Lease
}

func (s staleLeases) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if l, ok := obj.(*coordinationv1.Lease); ok && key == client.ObjectKeyFromObject(s.lease) {
		s.lease.DeepCopyInto(l)
		return nil
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

func withWatch() client.WithWatch {
	GinkgoHelper()
	c, err := client.NewWithWatch(e.Env.Config, client.Options{Scheme: e.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// The lease manager of github.com/medik8s/common is what node maintenance and self node remediation
// take node leases with: its leases and ours must hold each other off, in both directions.
var _ = Describe("Node leases with medik8s/common's lease manager", func() {
	nodeObject := func(n *corev1.Node) *corev1.Node {
		obj := n.DeepCopy()
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
		return obj
	}

	It("a lease node maintenance took holds remediation back until it is released", func(ctx SpecContext) {
		group, sick := workers(ctx)
		maintenance, err := commonlease.NewManager(e.K8s, "node-maintenance")
		Expect(err).NotTo(HaveOccurred())
		Expect(maintenance.RequestLease(ctx, nodeObject(sick), time.Hour)).To(Succeed())

		n := e.NewNHC(ctx, group)
		Eventually(e.EventNotes(ctx, n.Name, remediationv1alpha1.EventReasonRemediationSkipped)).Should(ContainElement(
			ContainSubstring("Node " + sick.Name + " is leased by node-maintenance")))
		Consistently(e.TestCRs(ctx, sick.Name)).WithTimeout(time.Second).Should(BeEmpty())

		Expect(maintenance.InvalidateLease(ctx, nodeObject(sick))).To(Succeed())
		e.Touch(ctx, n)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Expect(nodeLease(ctx, sick.Name)().Spec.HolderIdentity).To(PointTo(Equal("NodeHealthCheck-" + n.Name)))
	})

	It("a lease this operator holds is respected by that manager", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		Expect(nodeLease(ctx, sick.Name)().Spec.HolderIdentity).To(PointTo(Equal("NodeHealthCheck-" + n.Name)))

		maintenance, err := commonlease.NewManager(e.K8s, "node-maintenance")
		Expect(err).NotTo(HaveOccurred())
		err = maintenance.RequestLease(ctx, nodeObject(sick), time.Hour)
		var held commonlease.AlreadyHeldError
		Expect(errors.As(err, &held)).To(BeTrue(), "want AlreadyHeldError, got %v", err)
		Expect(nodeLease(ctx, sick.Name)().Spec.HolderIdentity).To(PointTo(Equal("NodeHealthCheck-" + n.Name)))
	})
})

package nhc_test

import (
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// statusWrites matches the manager's writes of the NodeHealthCheck's status.
func statusWrites(n *remediationv1alpha1.NodeHealthCheck) func(testutil.Request) bool {
	return func(r testutil.Request) bool {
		return !r.Watch && r.Method != http.MethodGet && strings.HasSuffix(r.Path, "/nodehealthchecks/"+n.Name+"/status")
	}
}

var _ = Describe("Status writes", func() {
	// failing is how many nodes of one NodeHealthCheck fail together; maxWrites how many status
	// writes may list them (one per StatusBatch while they keep coming, as their updates reach the
	// API server one after the other).
	const failing, maxWrites = 10, 3

	It("lists many nodes failing together in few writes, and writes no status equal to the last one", func(ctx SpecContext) {
		group := e.Unique("g")
		var sick []*corev1.Node
		for i := range 2 * failing {
			node := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
			if i < failing {
				sick = append(sick, node)
			}
		}
		n := e.NewNHC(ctx, group)
		Eventually(e.Status(ctx, n)).Should(counts(2*failing, 2*failing))

		mark := requests.Mark()
		var names []string
		for _, node := range sick {
			e.SetReady(ctx, node, corev1.ConditionUnknown, time.Hour) // its duration passed
			names = append(names, node.Name)
		}
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(names))
		Expect(len(requests.Since(mark, statusWrites(n)))).To(BeNumerically("<=", maxWrites),
			"%d nodes failing one after the other are listed in at most %d status writes", failing, maxWrites)

		// Reconciles that find nothing new write nothing; the failure of one more node, written
		// after them, shows that the controller got past them.
		mark = requests.Mark()
		for range 3 {
			e.Touch(ctx, n)
		}
		last := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.SetReady(ctx, last, corev1.ConditionUnknown, time.Hour)
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ContainElement(last.Name))
		Expect(requests.Since(mark, statusWrites(n))).To(HaveLen(1), "only the new failure is written")
	})

	// recorded waits until the reconciler has recorded the status write the spec saw last: it does
	// so once the API server has answered the write, maybe after the spec read the new status, and
	// counts the batch from then (the wall's time then): the wall moved before would not end it.
	recorded := func(ctx SpecContext, n *remediationv1alpha1.NodeHealthCheck) {
		got := &remediationv1alpha1.NodeHealthCheck{}
		Expect(e.K8s.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
		Eventually(func() string { return nhc.LastWrittenVersion(reconciler, n.Name) }).Should(Equal(got.ResourceVersion))
	}

	// quietPool returns a pool of three healthy nodes (its group label), one of them, and their
	// NodeHealthCheck, quiet for a StatusBatch since its last status write. The wall stands still
	// from there to the end of the spec, moved only by its Step: a write held for a batch comes only
	// once the spec moves the wall past the batch, however long the machine takes.
	quietPool := func(ctx SpecContext) (string, *corev1.Node, *remediationv1alpha1.NodeHealthCheck) {
		group := e.Unique("g")
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		sick := e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		n := e.NewNHC(ctx, group)
		Eventually(e.Status(ctx, n)).Should(counts(3, 3))
		recorded(ctx, n)
		wall.Stop()
		DeferCleanup(wall.Resume)
		wall.Step(nhc.DefaultStatusBatch)
		return group, sick, n
	}

	It("writes an isolated failure at once, in one write", func(ctx SpecContext) {
		_, sick, n := quietPool(ctx)
		mark := requests.Mark()
		e.SetReady(ctx, sick, corev1.ConditionUnknown, time.Hour)
		// A write held for the batch would never come: the wall stands still.
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(sick.Name))
		Expect(requests.Since(mark, statusWrites(n))).To(HaveLen(1))
		Eventually(e.RelatedEvents(ctx, n.Name, sick.Name)).Should(ContainElement(remediationv1alpha1.EventReasonDetectedUnhealthy))
	})

	It("writes an isolated change of the counts within a StatusBatch of the last write, not the burst's longer wait", func(ctx SpecContext) {
		group, sick, n := quietPool(ctx)
		// An isolated failure, written at once (the wall standing still): a write that was not
		// held, no burst.
		e.SetReady(ctx, sick, corev1.ConditionUnknown, time.Hour)
		Eventually(func() []string { return testutil.Listed(e.Status(ctx, n)()) }).Should(ConsistOf(sick.Name))
		recorded(ctx, n)

		// A node labelled into the selector right after it changes the counts alone. The wall
		// moved past the StatusBatch since that write, and short of a burst's wait for the counts
		// (countsOnlyBatches StatusBatches), lets that change be written; held for a burst, it
		// would never come.
		mark := requests.Mark()
		e.NewNode(ctx, group, corev1.ConditionTrue, time.Hour)
		wall.Step(nhc.DefaultStatusBatch + nhc.DefaultStatusBatch/2)
		Eventually(e.Status(ctx, n)).Should(counts(4, 3))
		Expect(requests.Since(mark, statusWrites(n))).To(HaveLen(1))
	})
})

package remediation_test

import (
	"bytes"
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/explain"
	"github.com/medik8s/node-healthcheck/internal/health"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// explained returns kubectl nhc explain's snapshot of the NodeHealthCheck, gathered from the API
// server as the plugin gathers it.
func explained(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck) *targets.Snapshot {
	checks, err := explain.Gather(ctx, e.K8s, explainOptions())
	Expect(err).NotTo(HaveOccurred())
	for _, c := range checks {
		if c.Snapshot.Stored.Name == n.Name {
			return c.Snapshot
		}
	}
	Fail("NodeHealthCheck " + n.Name + " not explained")
	return nil
}

func explainOptions() explain.Options {
	return explain.Options{Now: e.Clock.Now(), LeaseNamespace: nodelease.DefaultNamespace, ReturnGrace: returnGrace}
}

// agrees reports how explain's decision differs from what the operator did and reported: the counts
// and the nodes listed in status, and which nodes have CRs (empty: they agree).
func agrees(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, pool []*corev1.Node) func() []string {
	return func() []string {
		var diffs []string
		s := explained(ctx, n)
		st := e.Status(ctx, n)()
		if st.ObservedNodes == nil || *st.ObservedNodes != s.Decision.Observed || *st.HealthyNodes != s.Decision.Healthy {
			diffs = append(diffs, "counts")
		}
		var listed, reported []string
		for _, d := range s.Decision.Nodes {
			if d.Listed() {
				listed = append(listed, d.Name)
			}
		}
		for _, u := range st.UnhealthyNodes {
			reported = append(reported, u.Name)
		}
		slices.Sort(listed)
		slices.Sort(reported)
		if !slices.Equal(listed, reported) {
			diffs = append(diffs, "listed nodes")
		}
		for _, node := range pool {
			d, _ := s.Node(node.Name)
			remediating := d.Action == health.StartRemediation || d.Action == health.ContinueRemediation
			if remediating != (len(e.TestCRs(ctx, node.Name)()) > 0) {
				diffs = append(diffs, "CRs of "+node.Name)
			}
		}
		return diffs
	}
}

// Whole-operator specs about kubectl nhc explain: it must decide as the running operator decides, and
// answer from what the user may read; the controllers make the CRs, leases and status it reads
// here. Reading the settings the operator publishes needs no controller: internal/explain's
// TestFindSettings.
var _ = Describe("Whole operator: kubectl nhc explain", func() {
	It("decides as the operator does on the same cluster, and says why a node is held back", func(ctx SpecContext) {
		n, _, nodes := poolOfFour(ctx, func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromInt32(2)
			n.Spec.MinHealthy = &v
		})
		label(ctx, nodes[1], remediationv1alpha1.ExcludeFromRemediationLabel, "true")
		e.SetReady(ctx, nodes[0], corev1.ConditionUnknown, 0)
		e.SetReady(ctx, nodes[1], corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(e.TestCRs(ctx, nodes[0].Name)).Should(HaveLen(1))
		Eventually(heldBack(ctx, n, nodes[1].Name)).Should(BeTrue())
		Eventually(agrees(ctx, n, nodes)).Should(BeEmpty())
		// The label holds it back once nothing holds the whole NodeHealthCheck: at the suite's start
		// the upgrade gate may not be known yet (ClusterUpgrading), which explain reads from status.
		Eventually(func() health.SkipReason {
			d, _ := explained(ctx, n).Node(nodes[1].Name)
			return d.SkipReason
		}).Should(Equal(health.SkipExcluded))

		var out bytes.Buffer
		Expect(explain.Node(ctx, e.K8s, nodes[1].Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).To(And(ContainSubstring("NodeHealthCheck "+n.Name), ContainSubstring("decision: held back (ExcludedFromRemediation)"),
			ContainSubstring("health: unhealthy since"), ContainSubstring("budget: 2 of 4 selected nodes healthy, 2 required")))
		out.Reset()
		Expect(explain.Node(ctx, e.K8s, nodes[0].Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).To(And(ContainSubstring("decision: remediating"), ContainSubstring("remediation: TestRemediation"),
			ContainSubstring("lease "+nodelease.DefaultNamespace+"/node-"+nodes[0].Name+": held by this NodeHealthCheck")))

		By("over the threshold: both hold the new failures back, for the same reason")
		e.SetReady(ctx, nodes[2], corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(heldBack(ctx, n, nodes[2].Name)).Should(BeTrue())
		Eventually(agrees(ctx, n, nodes)).Should(BeEmpty())
		d, _ := explained(ctx, n).Node(nodes[2].Name)
		Expect(d.SkipReason).To(Equal(health.SkipThreshold))
		Expect(e.Status(ctx, n)().Reason).To(ContainSubstring("1 of 4 selected nodes are healthy, 2 required"))
		out.Reset()
		Expect(explain.NHC(ctx, e.K8s, n.Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).To(And(ContainSubstring("node "+nodes[2].Name+": held back (HealthyNodeThreshold)"),
			ContainSubstring("node "+nodes[0].Name+": remediating"), ContainSubstring("budget: 1 of 4 selected nodes healthy, 2 required")))
	})

	It("answers with a note of what it could not read when the user may not list one kind, instead of failing", func(ctx SpecContext) {
		_, _, nodes := poolOfFour(ctx)
		e.SetReady(ctx, nodes[0], corev1.ConditionUnknown, 0)
		e.Step(ctx, 5*time.Minute)
		Eventually(e.TestCRs(ctx, nodes[0].Name)).Should(HaveLen(1))
		Eventually(nodeLease(ctx, nodes[0].Name)).ShouldNot(BeNil())

		// A user who may read NodeHealthChecks, nodes and the remediators' kinds, but no leases.
		user := e.Unique("explainer")
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{remediationv1alpha1.GroupVersion.Group}, Resources: []string{"nodehealthchecks"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
		}}
		e.Create(ctx, role)
		e.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}})
		cfg := rest.CopyConfig(e.Env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool { // RBAC's cache has the binding
			return c.List(ctx, &remediationv1alpha1.NodeHealthCheckList{}) == nil
		}).Should(BeTrue())

		var out bytes.Buffer
		Expect(explain.Node(ctx, c, nodes[0].Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).To(And(ContainSubstring("decision: remediating"), ContainSubstring("remediation: TestRemediation"),
			ContainSubstring("Partial answer: you may not read Lease.coordination.k8s.io")))
		out.Reset()
		Expect(explain.Node(ctx, e.K8s, nodes[0].Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).NotTo(ContainSubstring("Partial answer"), "an administrator reads everything")

		By("without the NodeHealthChecks there is nothing to explain: it fails, naming them")
		role.Rules = role.Rules[:1]
		Expect(e.K8s.Update(ctx, role)).To(Succeed())
		Eventually(func() error { return explain.NHC(ctx, c, "any", explainOptions(), &out) }).Should(MatchError(ContainSubstring("nodehealthchecks")))
	})
})

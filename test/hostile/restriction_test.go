package hostile

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// restrictedLabel is a label in the node-restriction.kubernetes.io/ namespace, which NodeRestriction
// keeps every node from setting, changing or removing on its own Node: the suite selects nodes by
// such labels, so the hostile node cannot choose which NodeHealthChecks select it.
const restrictedLabel = "node-restriction.kubernetes.io/hostile-suite"

// nodeLeaseNamespace holds the kubelets' heartbeat Leases.
const nodeLeaseNamespace = "kube-node-lease"

// newNode creates a Node (as the admin) with the labels and a Ready=True condition, and deletes it
// after the spec.
func newNode(ctx context.Context, name string, labels map[string]string) *corev1.Node {
	GinkgoHelper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed()) })
	setReady(ctx, name, corev1.ConditionTrue, time.Now().Add(-time.Hour))
	return n
}

// setReady writes the node's Ready condition as the node lifecycle controller would (the admin
// client), keeping its other conditions.
func setReady(ctx context.Context, node string, status corev1.ConditionStatus, since time.Time) {
	GinkgoHelper()
	t := metav1.NewTime(since)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":"Test","message":"set by the test","lastTransitionTime":%q,"lastHeartbeatTime":%q}]}}`,
		status, t.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
	Expect(k8s.Status().Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
}

// permission is one thing a node's credentials were asked to do, and the API server's answer.
type permission struct {
	what    string
	allowed bool
	err     error
}

// permissions collects what a node may and may not do.
type permissions []permission

func (p *permissions) try(what string, err error) {
	*p = append(*p, permission{what: what, allowed: err == nil, err: err})
}

// table prints the answers, one line each.
func (p permissions) table() string {
	var b strings.Builder
	for _, r := range p {
		answer := "allowed"
		if !r.allowed {
			answer = "refused: " + firstLine(r.err.Error(), 160)
		}
		fmt.Fprintf(&b, "%-72s %s\n", r.what, answer)
	}
	return b.String()
}

func (p permissions) answer(what string) permission {
	for _, r := range p {
		if r.what == what {
			return r
		}
	}
	Fail("no answer recorded for " + what)
	return permission{}
}

func firstLine(s string, limit int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return s
}

func mergePatch(ctx context.Context, cs kubernetes.Interface, node, patch string, subresources ...string) error {
	_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, subresources...)
	return err
}

var _ = Describe("NodeRestriction in force", func() {
	It("lets a node's own credentials change its own Node, status and Lease, within limits, and nothing of another node's", func(ctx SpecContext) {
		self, other := "restricted-self", "restricted-other"
		newNode(ctx, self, map[string]string{restrictedLabel: "self"})
		newNode(ctx, other, map[string]string{restrictedLabel: "other"})
		Expect(k8s.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: self}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"taints":[{"key":"admin.example.com/set","effect":"NoSchedule"}]}}`)))).To(Succeed())
		kubelet, cfg := kubeletOf(self)

		var p permissions
		p.try("annotate its own Node", mergePatch(ctx, kubelet, self, `{"metadata":{"annotations":{"hostile.example.com/a":"x"}}}`))
		p.try("annotate its own Node with the operator's keys", mergePatch(ctx, kubelet, self, fmt.Sprintf(`{"metadata":{"annotations":{%q:"2020-01-01T00:00:00Z",%q:"now",%q:"x"}}}`,
			remediationv1alpha1.RemediationRequestAnnotation, remediationv1alpha1.RepairBudgetResetAnnotation, remediationv1alpha1.ManuallyConfirmedHealthyAnnotation)))
		p.try("annotate another node's Node", mergePatch(ctx, kubelet, other, `{"metadata":{"annotations":{"hostile.example.com/a":"x"}}}`))
		p.try("annotations of 256 KiB in all on its own Node (the API's limit)", mergePatch(ctx, kubelet, self,
			fmt.Sprintf(`{"metadata":{"annotations":{"hostile.example.com/big":%q}}}`, strings.Repeat("x", annotationLimit-len("hostile.example.com/big")-annotationsSize(ctx, self, "hostile.example.com/big")))))
		p.try("annotations of 256 KiB and 1 byte on its own Node", mergePatch(ctx, kubelet, self,
			fmt.Sprintf(`{"metadata":{"annotations":{"hostile.example.com/big":%q}}}`, strings.Repeat("x", annotationLimit+1-len("hostile.example.com/big")-annotationsSize(ctx, self, "hostile.example.com/big")))))
		Expect(mergePatch(ctx, kubelet, self, `{"metadata":{"annotations":{"hostile.example.com/big":null}}}`)).To(Succeed())

		p.try("label its own Node topology.kubernetes.io/zone", mergePatch(ctx, kubelet, self, `{"metadata":{"labels":{"topology.kubernetes.io/zone":"elsewhere"}}}`))
		p.try("label its own Node with a key outside kubernetes.io and k8s.io", mergePatch(ctx, kubelet, self, `{"metadata":{"labels":{"hostile.example.com/role":"anything"}}}`))
		p.try("label its own Node "+remediationv1alpha1.ExcludeFromRemediationLabel, mergePatch(ctx, kubelet, self,
			fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, remediationv1alpha1.ExcludeFromRemediationLabel)))
		p.try("label its own Node node-role.kubernetes.io/control-plane", mergePatch(ctx, kubelet, self, `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`))
		p.try("label its own Node node-restriction.kubernetes.io/x", mergePatch(ctx, kubelet, self, `{"metadata":{"labels":{"node-restriction.kubernetes.io/x":"y"}}}`))
		p.try("remove its own node-restriction.kubernetes.io/ label", mergePatch(ctx, kubelet, self, fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, restrictedLabel)))
		p.try("label another node's Node topology.kubernetes.io/zone", mergePatch(ctx, kubelet, other, `{"metadata":{"labels":{"topology.kubernetes.io/zone":"elsewhere"}}}`))

		p.try("add a taint to its own Node", mergePatch(ctx, kubelet, self, `{"spec":{"taints":[{"key":"admin.example.com/set","effect":"NoSchedule"},{"key":"hostile.example.com/t","effect":"NoSchedule"}]}}`))
		p.try("remove a taint from its own Node", mergePatch(ctx, kubelet, self, `{"spec":{"taints":null}}`))
		p.try("cordon its own Node (spec.unschedulable)", mergePatch(ctx, kubelet, self, `{"spec":{"unschedulable":true}}`))
		p.try("cordon another node's Node", mergePatch(ctx, kubelet, other, `{"spec":{"unschedulable":true}}`))

		future := time.Now().Add(100 * 365 * 24 * time.Hour).UTC().Format(time.RFC3339)
		p.try("write its own conditions (any type, Ready=False, a transition time a century ahead, a 64 KiB message)", mergePatch(ctx, kubelet, self,
			fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"False","lastTransitionTime":%q,"reason":"Hostile","message":%q},{"type":"HostileCondition","status":"True","lastTransitionTime":%q}]}}`,
				future, strings.Repeat("m", 64<<10), future), "status"))
		p.try("write a condition status that is not True, False or Unknown", mergePatch(ctx, kubelet, self,
			`{"status":{"conditions":[{"type":"Ready","status":"Maybe","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}`, "status"))
		p.try("write another node's conditions", mergePatch(ctx, kubelet, other,
			`{"status":{"conditions":[{"type":"Ready","status":"False","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}`, "status"))

		_, err := kubelet.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
		p.try("get another node's Node", err)
		_, err = kubelet.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		p.try("list all Nodes", err)

		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: self, Namespace: nodeLeaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(strings.Repeat("h", 4096)), LeaseDurationSeconds: ptr.To[int32](1 << 30),
				RenewTime: &metav1.MicroTime{Time: time.Now().Add(100 * 365 * 24 * time.Hour)}}}
		_, err = kubelet.CoordinationV1().Leases(nodeLeaseNamespace).Create(ctx, lease, metav1.CreateOptions{})
		p.try("create its own Lease in kube-node-lease (a 4 KiB holder, renewed a century ahead)", err)
		p.try("update its own Lease", leaseUpdate(ctx, kubelet, self))
		p.try("delete its own Lease", kubelet.CoordinationV1().Leases(nodeLeaseNamespace).Delete(ctx, self, metav1.DeleteOptions{}))
		_, err = kubelet.CoordinationV1().Leases(nodeLeaseNamespace).Create(ctx,
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: other, Namespace: nodeLeaseNamespace}}, metav1.CreateOptions{})
		p.try("create another node's Lease in kube-node-lease", err)
		_, err = kubelet.CoordinationV1().Leases(localclusterLeaseNamespace).Create(ctx,
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-" + self, Namespace: localclusterLeaseNamespace}}, metav1.CreateOptions{})
		p.try("create a Lease in the operator's lease namespace", err)

		nodeClient, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		p.try("list NodeHealthChecks", nodeClient.List(ctx, &remediationv1alpha1.NodeHealthCheckList{}))
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(testutil.TestRemediationKind)
		cr.SetNamespace(testutil.TemplateNamespace)
		cr.SetName(self)
		p.try("create a remediation CR", nodeClient.Create(ctx, cr))

		p.try("delete its own Node", kubelet.CoreV1().Nodes().Delete(ctx, self, metav1.DeleteOptions{}))
		// Gone for another reason (deleted by a cloud controller, an administrator), the node
		// registers again as a kubelet does.
		Expect(k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: self}})).To(Succeed())
		_, err = kubelet.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: self,
			Labels: map[string]string{restrictedLabel: "self"}}}, metav1.CreateOptions{})
		p.try("create its own Node with a node-restriction.kubernetes.io/ label", err)
		_, err = kubelet.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: self,
			Labels: map[string]string{"topology.kubernetes.io/zone": "z", "hostile.example.com/role": "anything"}}}, metav1.CreateOptions{})
		p.try("create its own Node with labels it may set", err)
		_, err = kubelet.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "restricted-stranger"}}, metav1.CreateOptions{})
		p.try("create a Node of another name", err)
		p.try("delete another node's Node", kubelet.CoreV1().Nodes().Delete(ctx, other, metav1.DeleteOptions{}))

		AddReportEntry("What NodeRestriction lets a node do (system:node:<name>, group system:nodes, client certificate)", p.table())
		GinkgoWriter.Print(p.table())

		// What the suite relies on, and what the trust table (docs/architecture.md) says.
		want := map[string]bool{
			"annotate its own Node":                                                                                 true,
			"annotate its own Node with the operator's keys":                                                        true,
			"annotate another node's Node":                                                                          false,
			"annotations of 256 KiB in all on its own Node (the API's limit)":                                       true,
			"annotations of 256 KiB and 1 byte on its own Node":                                                     false,
			"label its own Node topology.kubernetes.io/zone":                                                        true,
			"label its own Node with a key outside kubernetes.io and k8s.io":                                        true,
			"label its own Node " + remediationv1alpha1.ExcludeFromRemediationLabel:                                 true,
			"label its own Node node-role.kubernetes.io/control-plane":                                              false,
			"label its own Node node-restriction.kubernetes.io/x":                                                   false,
			"remove its own node-restriction.kubernetes.io/ label":                                                  false,
			"label another node's Node topology.kubernetes.io/zone":                                                 false,
			"add a taint to its own Node":                                                                           false,
			"remove a taint from its own Node":                                                                      false,
			"cordon another node's Node":                                                                            false,
			"write its own conditions (any type, Ready=False, a transition time a century ahead, a 64 KiB message)": true,
			"write another node's conditions":                                                                       false,
			"create its own Lease in kube-node-lease (a 4 KiB holder, renewed a century ahead)":                     true,
			"update its own Lease":                                                                                  true,
			"delete its own Lease":                                                                                  true,
			"create another node's Lease in kube-node-lease":                                                        false,
			"create a Lease in the operator's lease namespace":                                                      false,
			"list NodeHealthChecks":                                                                                 false,
			"create a remediation CR":                                                                               false,
			"create its own Node with a node-restriction.kubernetes.io/ label":                                      false,
			"create its own Node with labels it may set":                                                            true,
			"create a Node of another name":                                                                         false,
			"delete its own Node":                                                                                   false,
			"cordon its own Node (spec.unschedulable)":                                                              true,
			"write a condition status that is not True, False or Unknown":                                           true,
			"get another node's Node":                                                                               false,
			"list all Nodes":                                                                                        false,
			"delete another node's Node":                                                                            false,
		}
		for what, allowed := range want {
			r := p.answer(what)
			Expect(r.allowed).To(Equal(allowed), "%s: allowed=%t, want %t (%v)", what, r.allowed, allowed, r.err)
			if !allowed {
				Expect(apierrors.IsForbidden(r.err) || apierrors.IsInvalid(r.err)).To(BeTrue(), "%s: refused for another reason: %v", what, r.err)
			}
		}
	})
})

// localclusterLeaseNamespace is where the chart's operator keeps its node leases (the chart's
// default leases.namespace: the release namespace).
const localclusterLeaseNamespace = "node-healthcheck"

// annotationLimit is the API server's bound on a object's annotations: keys and values together
// (apimachinery's TotalAnnotationSizeLimitB).
const annotationLimit = 256 << 10

// annotationsSize returns the size of the node's annotations (keys and values) but the one named.
func annotationsSize(ctx context.Context, node, except string) int {
	GinkgoHelper()
	n := &corev1.Node{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	size := 0
	for k, v := range n.Annotations {
		if k != except {
			size += len(k) + len(v)
		}
	}
	return size
}

func leaseUpdate(ctx context.Context, cs kubernetes.Interface, node string) error {
	l, err := cs.CoordinationV1().Leases(nodeLeaseNamespace).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(0, 0)}
	_, err = cs.CoordinationV1().Leases(nodeLeaseNamespace).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

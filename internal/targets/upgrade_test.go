package targets

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

var upgradeNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// upgradeNode returns a node of pool "a" with the kubelet version, cordoned or not, Ready Unknown
// since the given time (zero: Ready True), and being updated by the Machine Config Operator when
// updating is set.
func upgradeNode(name, kubelet string, cordoned bool, unknownSince time.Time, updating bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"}}}
	n.Spec.Unschedulable = cordoned
	n.Status.NodeInfo.KubeletVersion = kubelet
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(upgradeNow.Add(-24 * time.Hour))}
	if !unknownSince.IsZero() {
		ready.Status, ready.LastTransitionTime = corev1.ConditionUnknown, metav1.NewTime(unknownSince)
	}
	n.Status.Conditions = []corev1.NodeCondition{ready}
	if updating {
		n.Annotations = map[string]string{remediationv1alpha1.MachineConfigCurrentAnnotation: "rendered-1", remediationv1alpha1.MachineConfigDesiredAnnotation: "rendered-2"}
	}
	return n
}

func describeSignals(signals []upgrade.Signal) string {
	var out []string
	for _, s := range signals {
		what := s.Detector
		if s.Object != nil {
			what += "/" + s.Object.Name
		}
		out = append(out, what)
	}
	return fmt.Sprint(out)
}

func TestNodeSignals(t *testing.T) {
	conditions := []remediationv1alpha1.UnhealthyCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Duration: metav1.Duration{Duration: 5 * time.Minute}}}
	sick, soon := upgradeNow.Add(-time.Hour), upgradeNow.Add(-time.Minute)
	nodes := []*corev1.Node{
		upgradeNode("healthy-updating", "v1.38.0", false, time.Time{}, true),
		upgradeNode("sick-updating", "v1.37.2", false, sick, true),
		upgradeNode("sick-updating-remediated", "v1.37.2", false, sick, true),
		upgradeNode("soon-updating", "v1.37.2", true, soon, true),
		upgradeNode("sick", "v1.37.2", false, sick, false),
	}
	crs := map[string][]unstructured.Unstructured{"sick-updating-remediated": {{}}}
	for _, tt := range []struct {
		name     string
		v        upgrade.Verdict
		nodes    []*corev1.Node
		want     string
		wantNext time.Time
	}{
		{name: "no node-level detector on", v: upgrade.Verdict{Known: true}, nodes: nodes, want: "[]"},
		{name: "kubelet rolling upgrade: two minors, one cordoned", v: upgrade.Verdict{NodeRollout: true}, nodes: nodes, want: "[noderollout]"},
		{name: "two minors, none cordoned", v: upgrade.Verdict{NodeRollout: true}, nodes: nodes[:3], want: "[]"},
		{name: "OpenShift: an unhealthy node being updated without a CR of its own; when the next one becomes unhealthy",
			v: upgrade.Verdict{OpenShift: true}, nodes: nodes, want: "[machineconfig/sick-updating]", wantNext: soon.Add(5 * time.Minute)},
		{name: "both, even while the gate is unknown", v: upgrade.Verdict{OpenShift: true, NodeRollout: true}, nodes: nodes,
			want: "[noderollout machineconfig/sick-updating]", wantNext: soon.Add(5 * time.Minute)},
		{name: "nothing selected", v: upgrade.Verdict{OpenShift: true, NodeRollout: true}, want: "[]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, next := nodeSignals(tt.v, tt.nodes, crs, conditions, upgradeNow)
			if describeSignals(got) != tt.want || !next.Equal(tt.wantNext) {
				t.Fatalf("signals %s, next %v; want %s, %v", describeSignals(got), next, tt.want, tt.wantNext)
			}
			for _, s := range got {
				if !s.Since.IsZero() {
					t.Fatalf("the gate dates node-level signals, not nodeSignals: %+v", s)
				}
			}
		})
	}
}

// UpgradeNodeSignals, the upgradeguard's gathering, finds the signals upgradeOutcome finds in a
// snapshot: the same selected nodes, the same remediation CRs of the NodeHealthCheck, its
// conditions with defaults applied.
func TestUpgradeNodeSignals(t *testing.T) {
	ctx := context.Background()
	if got, next, err := (&Gatherer{}).UpgradeNodeSignals(ctx, &remediationv1alpha1.NodeHealthCheck{}, upgrade.Verdict{Known: true}, upgradeNow); got != nil || !next.IsZero() || err != nil {
		t.Fatalf("no node-level detector on: nothing is read (no Reader here), got %v, %v, %v", got, next, err)
	}
	scheme := testutil.Scheme()
	nhc := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: "pool-a", UID: "uid-pool-a"},
		Spec: remediationv1alpha1.NodeHealthCheckSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			RemediationTemplate: &corev1.ObjectReference{APIVersion: "test.medik8s.io/v1alpha1", Kind: "TestRemediationTemplate", Namespace: "default", Name: "t"}}}
	cr := func(node, owner string, uid types.UID) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("test.medik8s.io/v1alpha1")
		u.SetKind("TestRemediation")
		u.SetNamespace("default")
		u.SetName(node)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: remediationv1alpha1.GroupVersion.String(), Kind: "NodeHealthCheck", Name: owner, UID: uid, Controller: ptr.To(true)}})
		return u
	}
	sick := upgradeNow.Add(-time.Hour) // beyond the default Ready=Unknown duration
	other := upgradeNode("other-pool-updating", "v1.37.2", false, sick, true)
	other.Labels["pool"] = "b"
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nhc,
		upgradeNode("sick-updating", "v1.38.0", false, sick, true),
		upgradeNode("sick-updating-remediated", "v1.37.2", true, sick, true),
		upgradeNode("sick-updating-remediated-elsewhere", "v1.37.2", false, sick, true),
		other,
		cr("sick-updating-remediated", "pool-a", "uid-pool-a"),
		cr("sick-updating-remediated-elsewhere", "pool-b", "uid-pool-b"),
	).Build()
	got, next, err := (&Gatherer{Reader: reader}).UpgradeNodeSignals(ctx, nhc, upgrade.Verdict{OpenShift: true, NodeRollout: true}, upgradeNow)
	want := "[noderollout machineconfig/sick-updating machineconfig/sick-updating-remediated-elsewhere]"
	if err != nil || describeSignals(got) != want || !next.IsZero() {
		t.Fatalf("signals %s, next %v, %v; want %s", describeSignals(got), next, err, want)
	}
	bad := nhc.DeepCopy()
	bad.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}
	if got, _, err := (&Gatherer{Reader: reader}).UpgradeNodeSignals(ctx, bad, upgrade.Verdict{OpenShift: true, NodeRollout: true}, upgradeNow); got != nil || err != nil {
		t.Fatalf("a selector that does not parse selects nothing, as in Gather: %v, %v", got, err)
	}
}

package health

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

func selecting(name string, sel metav1.LabelSelector) remediationv1alpha1.NodeHealthCheck {
	return remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: remediationv1alpha1.NodeHealthCheckSpec{Selector: sel}}
}

func TestOverlaps(t *testing.T) {
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"pool": "a", "zone": "1"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w2", Labels: map[string]string{"pool": "a", "zone": "2"}}},
	}
	deleted := selecting("deleted", metav1.LabelSelector{})
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	got := Overlaps("self", nodes, []remediationv1alpha1.NodeHealthCheck{
		selecting("self", metav1.LabelSelector{}),
		selecting("zone-2", metav1.LabelSelector{MatchLabels: map[string]string{"zone": "2"}}),
		selecting("everything", metav1.LabelSelector{}),
		selecting("pool-b", metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}),
		selecting("invalid", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}),
		deleted,
	})
	want := []Overlap{{NHC: "everything", Nodes: 2}, {NHC: "zone-2", Nodes: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Overlaps = %v, want %v (sorted; not itself, a disjoint, an invalid or a deleted one)", got, want)
	}
}

package targets

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// TestOtherDomains: the domains a node was seen in lately count besides its current one: for
// DomainMemory once it is healthy, for as long as it is in trouble, and the one its CRs recorded.
func TestOtherDomains(t *testing.T) {
	const key = "topology.kubernetes.io/zone"
	rules := []remediationv1alpha1.UnhealthyCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Duration: metav1.Duration{Duration: time.Minute}}}
	ready := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, LastTransitionTime: metav1.NewTime(assembleNow.Add(-time.Hour))}}
	}
	g := &Gatherer{}
	step := func(at time.Time, domain string, status corev1.ConditionStatus, crs map[string][]unstructured.Unstructured) []string {
		in := health.Input{UnhealthyConditions: rules, Nodes: []health.Node{{Name: "n", Domain: domain, Conditions: ready(status)}}}
		g.otherDomains(&in, key, crs, at)
		got := in.Nodes[0].OtherDomains
		slices.Sort(got)
		return got
	}
	now := assembleNow
	if got := step(now, "a", corev1.ConditionTrue, nil); len(got) != 0 {
		t.Fatalf("a node that never moved: %v", got)
	}
	if got := step(now.Add(time.Minute), "b", corev1.ConditionTrue, nil); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("moved from a to b: %v", got)
	}
	if got := step(now.Add(DomainMemory+2*time.Minute), "b", corev1.ConditionTrue, nil); len(got) != 0 {
		t.Fatalf("healthy, a is forgotten after DomainMemory: %v", got)
	}
	// In trouble, a domain it left stays for as long as the trouble lasts.
	step(now.Add(3*time.Hour), "a", corev1.ConditionUnknown, nil)
	step(now.Add(3*time.Hour+time.Minute), "b", corev1.ConditionUnknown, nil)
	if got := step(now.Add(6*time.Hour), "b", corev1.ConditionUnknown, nil); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("unhealthy for hours after leaving a: %v", got)
	}
	// The domain its CRs recorded counts, even in a gatherer that never saw it there (a restart).
	cr := unstructured.Unstructured{}
	cr.SetAnnotations(map[string]string{remediationv1alpha1.FailureDomainAnnotation: remediationcr.FailureDomainValue(key, "c")})
	fresh := &Gatherer{}
	in := health.Input{UnhealthyConditions: rules, Nodes: []health.Node{{Name: "n", Domain: "b", Remediating: true}}}
	fresh.otherDomains(&in, key, map[string][]unstructured.Unstructured{"n": {cr}}, now)
	if got := in.Nodes[0].OtherDomains; !slices.Equal(got, []string{"c"}) {
		t.Fatalf("the CR's recorded domain: %v", got)
	}
	// A recorded domain of another key is not read.
	cr.SetAnnotations(map[string]string{remediationv1alpha1.FailureDomainAnnotation: remediationcr.FailureDomainValue("rack", "c")})
	in = health.Input{UnhealthyConditions: rules, Nodes: []health.Node{{Name: "n", Domain: "b", Remediating: true}}}
	(&Gatherer{}).otherDomains(&in, key, map[string][]unstructured.Unstructured{"n": {cr}}, now)
	if got := in.Nodes[0].OtherDomains; len(got) != 0 {
		t.Fatalf("another key's recorded domain: %v", got)
	}
	// Memory per node is bounded.
	for i := range 100 {
		step(now.Add(7*time.Hour+time.Duration(i)*time.Second), string(rune('A'+i%50))+"x", corev1.ConditionUnknown, nil)
	}
	if n := len(g.domains.seen[key]["n"]); n > maxDomainsPerNode {
		t.Fatalf("%d domains remembered for one node", n)
	}
}

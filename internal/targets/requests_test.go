package targets

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// TestRemediationRequest: which request annotations are pending, answered or ignored (and why).
func TestRemediationRequest(t *testing.T) {
	at := func(ago time.Duration) string { return assembleNow.Add(-ago).UTC().Format(time.RFC3339) }
	for _, tc := range []struct {
		name        string
		allow       bool
		dryRun      bool
		request     string // "" : none
		handled     string
		crRequested string // on w1's CR; "" : no CR
		pending     bool
		running     bool
		due         bool // waits for its time, a moment ahead
		ignored     string
		rule        string
		refused     string // a refused handled record's reason
	}{
		{name: "none", allow: true},
		{name: "pending", allow: true, request: at(time.Minute), pending: true},
		{name: "a moment ahead, within the skew bound: waits for its time", allow: true, request: at(-5 * time.Second), due: true},
		{name: "in the future beyond the skew bound: refused", allow: true, request: at(-time.Hour), rule: RefusedFuture,
			ignored: "more than 10s (the clock-skew bound) after the operator's time"},
		{name: "not allowed", request: at(time.Minute), rule: RefusedNotAllowed, ignored: "does not set spec.allowRemediationRequests"},
		{name: "not allowed: not even parsed", request: "now", rule: RefusedNotAllowed, ignored: "does not set spec.allowRemediationRequests"},
		{name: "dry run", allow: true, dryRun: true, request: at(time.Minute), rule: RefusedDryRun, ignored: "dry run"},
		{name: "not a time", allow: true, request: "now", rule: RefusedNotATime, ignored: "not an RFC 3339 time"},
		{name: "too long to be a time", allow: true, request: strings.Repeat("2", 100), rule: RefusedNotATime, ignored: "too long for an RFC 3339 time"},
		{name: "answered: the handled annotation", allow: true, request: at(time.Hour), handled: at(time.Hour)},
		{name: "answered by the running remediation", allow: true, request: at(time.Hour), crRequested: at(time.Hour), running: true},
		{name: "a newer request than the handled one", allow: true, request: at(time.Minute), handled: at(time.Hour), pending: true},
		{name: "a forged handled record in the future answers nothing, and is refused", allow: true, request: at(time.Minute), handled: at(-24 * time.Hour),
			pending: true, refused: "the record is forged"},
		{name: "a handled record that is no time answers nothing", allow: true, request: at(time.Minute), handled: "yes", pending: true, refused: "not an RFC 3339 time"},
		{name: "expired", allow: true, request: at(25 * time.Hour), rule: RefusedExpired, ignored: "older than 24h0m0s"},
		{name: "expired but answered: nothing to say", allow: true, request: at(25 * time.Hour), handled: at(25 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testReading(t, func(r *reading) {
				r.nhc.Spec.AllowRemediationRequests, r.nhc.Spec.DryRun = tc.allow, tc.dryRun
				n := r.nodes[0].DeepCopy()
				n.Annotations = map[string]string{}
				if tc.request != "" {
					n.Annotations[remediationv1alpha1.RemediationRequestAnnotation] = tc.request
				}
				if tc.handled != "" {
					n.Annotations[remediationv1alpha1.RemediationRequestHandledAnnotation] = tc.handled
				}
				r.nodes[0] = n
				if tc.crRequested != "" {
					cr := testCR(t, r.stored, "w1")
					annotate(&cr, remediationv1alpha1.RemediationRequestedAtAnnotation, tc.crRequested)
					r.crs = sortByOwner([]unstructured.Unstructured{cr}, r.stored.UID, r.nodes)
				}
			})
			s, in := assemble(r, Acting, 0)
			n := inputNode(t, in, "w1")
			if got := !n.Requested.IsZero(); got != tc.pending {
				t.Errorf("pending %v (%v), want %v", got, n.Requested, tc.pending)
			}
			if got := !n.RunningRequest.IsZero(); got != tc.running {
				t.Errorf("running %v, want %v", got, tc.running)
			}
			if _, got := s.RequestBaseline("w1"); got != tc.pending {
				t.Errorf("a baseline for the first CR %v, want one with a pending request (%v)", got, tc.pending)
			}
			if got := !s.inputDue.IsZero(); got != tc.due {
				t.Errorf("due %v (%v), want %v", got, s.inputDue, tc.due)
			}
			ignored, _ := s.RefusedInput("w1", remediationv1alpha1.RemediationRequestAnnotation)
			if (tc.ignored == "") != (ignored.Why == "") || !strings.Contains(ignored.Why, tc.ignored) || ignored.Rule != tc.rule {
				t.Errorf("ignored %+v, want %q (%s)", ignored, tc.ignored, tc.rule)
			}
			if len(ignored.Value) > 80 {
				t.Errorf("the refusal quotes %d bytes of the value: %s", len(ignored.Value), ignored.Value)
			}
			refused, _ := s.RefusedInput("w1", remediationv1alpha1.RemediationRequestHandledAnnotation)
			if (tc.refused == "") != (refused.Why == "") || !strings.Contains(refused.Why, tc.refused) {
				t.Errorf("handled record refused %+v, want %q", refused, tc.refused)
			}
		})
	}
}

// TestRequestBaselineAtAssembly: the node as the snapshot read it is the baseline the first CR of a
// requested remediation records; a node whose CRs record one gets none.
func TestRequestBaselineAtAssembly(t *testing.T) {
	requested := func(r *reading) {
		r.nhc.Spec.AllowRemediationRequests = true
		n := r.nodes[0].DeepCopy()
		n.Annotations = map[string]string{remediationv1alpha1.RemediationRequestAnnotation: assembleNow.Add(-time.Minute).UTC().Format(time.RFC3339)}
		r.nodes[0] = n
	}
	s, _ := assemble(testReading(t, requested), Acting, 0)
	b, ok := s.RequestBaseline("w1")
	ready := slices.IndexFunc(b.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
	if !ok || !b.At.Equal(assembleNow) || ready < 0 {
		t.Fatalf("baseline %+v (%v), want the node's Ready condition as read at %v", b, ok, assembleNow)
	}
	s, _ = assemble(testReading(t, func(r *reading) {
		requested(r)
		cr := testCR(t, r.stored, "w1")
		annotate(&cr, remediationv1alpha1.RemediationRequestBaselineAnnotation, remediationcr.EncodeBaseline(b))
		r.crs = sortByOwner([]unstructured.Unstructured{cr}, r.stored.UID, r.nodes)
	}), Acting, 0)
	if b, ok := s.RequestBaseline("w1"); ok {
		t.Fatalf("baseline %+v for a node whose CR records one", b)
	}
}

// TestAnsweredRequest: what the handled annotation must say before a remediation's CRs go.
func TestAnsweredRequest(t *testing.T) {
	at := func(ago time.Duration) string { return assembleNow.Add(-ago).UTC().Format(time.RFC3339) }
	r := testReading(t, func(r *reading) { r.nhc.Spec.AllowRemediationRequests = true })
	cr := testCR(t, r.stored, "w1")
	annotate(&cr, remediationv1alpha1.RemediationRequestedAtAnnotation, at(time.Hour))
	node := func(annotations map[string]string) *corev1.Node {
		n := r.nodes[0].DeepCopy()
		n.Annotations = annotations
		return n
	}
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		crs   bool
		want  string
		write bool
	}{
		{name: "no request: nothing", node: node(nil)},
		{name: "the CR's request", node: node(nil), crs: true, want: at(time.Hour), write: true},
		{name: "already recorded", node: node(map[string]string{remediationv1alpha1.RemediationRequestHandledAnnotation: at(time.Hour)}), crs: true},
		{name: "a request made while it ran is answered too",
			node: node(map[string]string{remediationv1alpha1.RemediationRequestAnnotation: at(time.Minute)}), crs: true, want: at(time.Minute), write: true},
		{name: "a request dated after now is not",
			node: node(map[string]string{remediationv1alpha1.RemediationRequestAnnotation: at(-time.Minute)}), crs: true, want: at(time.Hour), write: true},
		{name: "a remediation found by conditions answers the request made meanwhile",
			node: node(map[string]string{remediationv1alpha1.RemediationRequestAnnotation: at(time.Minute)}), want: at(time.Minute), write: true},
		{name: "a forged record dated ahead is overwritten with the answer",
			node: node(map[string]string{remediationv1alpha1.RemediationRequestHandledAnnotation: at(-24 * time.Hour)}), crs: true, want: at(time.Hour), write: true},
		{name: "a record within the skew bound ahead stands",
			node: node(map[string]string{remediationv1alpha1.RemediationRequestHandledAnnotation: at(-5 * time.Second)}), crs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var crs []unstructured.Unstructured
			if tc.crs {
				crs = append(crs, cr)
			}
			s, _ := assemble(r, Acting, 0)
			got, write := s.AnsweredRequest(tc.node, crs)
			if got != tc.want || write != tc.write {
				t.Errorf("%q, %v; want %q, %v", got, write, tc.want, tc.write)
			}
		})
	}
}

func annotate(cr *unstructured.Unstructured, key, value string) {
	a := cr.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	cr.SetAnnotations(a)
}

// TestBaselineRoundTrip: the baseline a CR records reads back as it was, the earliest CR's first,
// and one that does not parse is no baseline.
func TestBaselineRoundTrip(t *testing.T) {
	r := testReading(t, nil)
	ltt := metav1.NewTime(assembleNow.Add(-time.Hour))
	b := health.RequestBaseline{At: assembleNow, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: ltt}}}
	later := testCR(t, r.stored, "w1")
	annotate(&later, remediationv1alpha1.RemediationRequestBaselineAnnotation, remediationcr.EncodeBaseline(health.RequestBaseline{At: assembleNow.Add(time.Minute)}))
	first := testCR(t, r.stored, "w1")
	annotate(&first, remediationv1alpha1.RemediationRequestBaselineAnnotation, remediationcr.EncodeBaseline(b))
	broken := testCR(t, r.stored, "w1")
	annotate(&broken, remediationv1alpha1.RemediationRequestBaselineAnnotation, `{"at":`)
	got := remediationcr.BaselineOf([]unstructured.Unstructured{later, broken, first})
	if got == nil || !got.At.Equal(b.At) || len(got.Conditions) != 1 || got.Conditions[0].Status != corev1.ConditionTrue ||
		!got.Conditions[0].LastTransitionTime.Equal(&ltt) {
		t.Fatalf("read back %+v, want %+v", got, b)
	}
	if remediationcr.BaselineOf([]unstructured.Unstructured{broken}) != nil {
		t.Fatal("a baseline that does not parse counted")
	}
}

// TestRepairBudgetResets: the reset is read from the NodeHealthCheck (entries per node or for every
// node), never from the node, and bounded in time.
func TestRepairBudgetResets(t *testing.T) {
	at := func(ago time.Duration) string { return assembleNow.Add(-ago).UTC().Format(time.RFC3339) }
	for _, tc := range []struct {
		name, nhc, node string
		reset           time.Duration // ago; 0: none
		refused         string        // of the NodeHealthCheck's annotation
		nodeRefused     bool
	}{
		{name: "none"},
		{name: "an entry for the node", nhc: "w1=" + at(time.Hour), reset: time.Hour},
		{name: "entries for others", nhc: "w2=" + at(time.Hour) + ", w3=" + at(time.Minute)},
		{name: "a bare time for every node", nhc: at(2 * time.Hour), reset: 2 * time.Hour},
		{name: "the latest counts", nhc: at(2*time.Hour) + " w1=" + at(time.Hour), reset: time.Hour},
		{name: "not a time", nhc: "w1=yesterday", refused: "is not an RFC 3339 time"},
		{name: "dated ahead beyond the skew bound", nhc: "w1=" + at(-time.Hour), refused: "more than 10s (the clock-skew bound)"},
		{name: "the node's own annotation is not trusted", node: at(time.Minute), nodeRefused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testReading(t, func(r *reading) {
				r.nhc.Spec.RepairBudget = &remediationv1alpha1.RepairBudget{MaxRemediations: 1, Window: metav1.Duration{Duration: 24 * time.Hour}}
				if tc.nhc != "" {
					r.stored.Annotations = map[string]string{remediationv1alpha1.RepairBudgetResetAnnotation: tc.nhc}
				}
				if tc.node != "" {
					n := r.nodes[0].DeepCopy()
					n.Annotations = map[string]string{remediationv1alpha1.RepairBudgetResetAnnotation: tc.node}
					r.nodes[0] = n
				}
			})
			s, _ := assemble(r, Acting, 0)
			reset, ok := s.repairReset(r.nodes[0])
			if want := assembleNow.Add(-tc.reset); ok != (tc.reset != 0) || (ok && !reset.Equal(want)) {
				t.Errorf("reset %v (%v), want %v ago", reset, ok, tc.reset)
			}
			refused := strings.Join(s.ResetRefusals(), "; ")
			if (tc.refused == "") != (refused == "") || !strings.Contains(refused, tc.refused) {
				t.Errorf("refused %q, want %q", refused, tc.refused)
			}
			if _, got := s.RefusedInput("w1", remediationv1alpha1.RepairBudgetResetAnnotation); got != tc.nodeRefused {
				t.Errorf("the node's annotation refused: %v, want %v", got, tc.nodeRefused)
			}
		})
	}
}

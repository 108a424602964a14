package targets

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// A remediation request (spec.allowRemediationRequests) is the node's
// remediation.medik8s.io/request-remediation annotation, a time. It is answered once: by the
// remediation whose CRs carry it (remediation.medik8s.io/requested-at), and, once those CRs are
// gone, by the node's remediation-request-handled annotation, which the remediation controller
// writes (AnsweredRequest). The operator never removes the request itself.

// IgnoredRequest is a node's remediation request that is not acted on, and why.
type IgnoredRequest struct {
	// Value is the annotation's value; Why says why it is ignored.
	Value, Why string
}

// request returns the node's pending remediation request (zero: none) and the request its running
// remediation answers (zero: none), and records a request it ignores (IgnoredRequests).
func (s *Snapshot) request(n *corev1.Node) (pending, running time.Time) {
	running = RequestOf(s.CRs[n.Name])
	v, ok := n.Annotations[remediationv1alpha1.RemediationRequestAnnotation]
	if !ok {
		return time.Time{}, running
	}
	ignore := func(format string, args ...any) {
		if s.ignoredRequests == nil {
			s.ignoredRequests = map[string]IgnoredRequest{}
		}
		s.ignoredRequests[n.Name] = IgnoredRequest{Value: v, Why: fmt.Sprintf(format, args...)}
	}
	at, err := time.Parse(time.RFC3339, v)
	switch {
	case err != nil:
		ignore("it is not an RFC 3339 time (for example %s)", s.Now.UTC().Format(time.RFC3339))
	case !s.NHC.Spec.AllowRemediationRequests:
		ignore("NodeHealthCheck %s does not set spec.allowRemediationRequests", s.Stored.Name)
	case s.DryRun():
		ignore("NodeHealthCheck %s is a dry run (spec.dryRun), which does not simulate requests", s.Stored.Name)
	case !at.After(Later(handledRequest(n), running)):
		// answered
	case s.Now.Sub(at) > remediationv1alpha1.RemediationRequestMaxAge:
		ignore("it is older than %s and was not answered; set a new time to ask again", remediationv1alpha1.RemediationRequestMaxAge)
	default:
		pending = at
	}
	return pending, running
}

// IgnoredRequests returns, by selected node, the remediation requests the decision does not act on,
// with why (nil: none).
func (s *Snapshot) IgnoredRequests() map[string]IgnoredRequest { return s.ignoredRequests }

// RequestOf returns the latest request time the CRs answer (their requested-at annotations; zero:
// none).
func RequestOf(crs []unstructured.Unstructured) time.Time {
	var latest time.Time
	for i := range crs {
		if v, ok := remediationcr.Annotation(&crs[i], remediationv1alpha1.RemediationRequestedAtAnnotation); ok {
			if at, err := time.Parse(time.RFC3339, v); err == nil {
				latest = Later(latest, at)
			}
		}
	}
	return latest
}

// handledRequest returns the time in the node's remediation-request-handled annotation (zero: none
// or not a time).
func handledRequest(n *corev1.Node) time.Time {
	at, _ := time.Parse(time.RFC3339, n.Annotations[remediationv1alpha1.RemediationRequestHandledAnnotation])
	return at
}

// AnsweredRequest returns the value the node's remediation-request-handled annotation must have
// before its remediation's CRs go, and whether it must be written: the latest of the request the
// CRs answer and the node's request as of now (a request made while the remediation ran is
// answered by it), when it is later than the annotation's. Requests dated after now are not
// answered yet.
func AnsweredRequest(n *corev1.Node, crs []unstructured.Unstructured, now time.Time) (string, bool) {
	answered := RequestOf(crs)
	if at, err := time.Parse(time.RFC3339, n.Annotations[remediationv1alpha1.RemediationRequestAnnotation]); err == nil && !at.After(now) {
		answered = Later(answered, at)
	}
	if answered.IsZero() || !answered.After(handledRequest(n)) {
		return "", false
	}
	return answered.UTC().Format(time.RFC3339), true
}

// Later returns the later of two times.
func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// baseline is a health.RequestBaseline as the request-baseline annotation holds it.
type baseline struct {
	At         time.Time           `json:"at"`
	Conditions []baselineCondition `json:"conditions"`
}

type baselineCondition struct {
	Type               corev1.NodeConditionType `json:"type"`
	Status             corev1.ConditionStatus   `json:"status"`
	LastTransitionTime time.Time                `json:"lastTransitionTime"`
}

// EncodeBaseline returns the request-baseline annotation's value for the baseline.
func EncodeBaseline(b health.RequestBaseline) string {
	v := baseline{At: b.At.UTC().Truncate(time.Second), Conditions: []baselineCondition{}}
	for _, c := range b.Conditions {
		v.Conditions = append(v.Conditions, baselineCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime.UTC()})
	}
	out, _ := json.Marshal(v) // plain strings and times: never fails
	return string(out)
}

// BaselineOf returns the baseline recorded on the CRs (the earliest one's; nil: none that parses).
func BaselineOf(crs []unstructured.Unstructured) *health.RequestBaseline {
	var out *health.RequestBaseline
	for i := range crs {
		v, ok := remediationcr.Annotation(&crs[i], remediationv1alpha1.RemediationRequestBaselineAnnotation)
		if !ok {
			continue
		}
		var b baseline
		if err := json.Unmarshal([]byte(v), &b); err != nil || b.At.IsZero() {
			continue
		}
		if out != nil && !b.At.Before(out.At) {
			continue
		}
		out = &health.RequestBaseline{At: b.At}
		for _, c := range b.Conditions {
			out.Conditions = append(out.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: metav1.NewTime(c.LastTransitionTime)})
		}
	}
	return out
}

package targets

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/nodeinput"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// A remediation request (spec.allowRemediationRequests) is the node's
// remediation.medik8s.io/request-remediation annotation, a time. It is answered once: by the
// remediation whose CRs carry it (remediation.medik8s.io/requested-at), and, once those CRs are
// gone, by the node's remediation-request-handled annotation, which the remediation controller
// writes (AnsweredRequest). The operator never removes the request itself.

// RefusedInput is a value a node can write itself (an annotation of its own Node) that the decision
// does not act on, and why. Events and explain quote it; memory keeps only its hash.
type RefusedInput struct {
	// Node is the node's name, Annotation the annotation's key.
	Node, Annotation string
	// Value is the value, quoted and cut to a short prefix (nodeinput.Quote); Hash is the short hash of
	// the value as read (nodeinput.Hash), which tells one value from the next.
	Value, Hash string
	// Rule names the rule that refuses it (one of a few words, stable while the value is), Why says
	// why in a sentence.
	Rule, Why string
}

// Rules that refuse a node-written value (RefusedInput.Rule).
const (
	RefusedNotAllowed = "not-allowed"
	RefusedDryRun     = "dry-run"
	RefusedNotATime   = "not-a-time"
	RefusedFuture     = "future"
	RefusedExpired    = "expired"
	RefusedUntrusted  = "untrusted"
)

// DefaultFutureBound is how far after now a time a node wrote may be dated and still be taken as
// meant, when the manager's skew bound is not set (--max-clock-skew=0): the flag's default, within
// which time-synchronised clocks agree.
const DefaultFutureBound = 10 * time.Second

// FutureBound is how far after now a time that a node, a person or another client wrote may be dated
// before it is refused as forged or written by a clock that runs ahead: the manager's skew bound.
func (s *Snapshot) FutureBound() time.Duration {
	if s.Skew != nil && s.Skew.Bound > 0 {
		return s.Skew.Bound
	}
	return DefaultFutureBound
}

// refuse records a node-written value the decision does not act on (RefusedInputs).
func (s *Snapshot) refuse(node, annotation, value, rule, format string, args ...any) {
	s.refused = append(s.refused, RefusedInput{Node: node, Annotation: annotation, Value: nodeinput.Quote(value), Hash: nodeinput.Hash(value),
		Rule: rule, Why: fmt.Sprintf(format, args...)})
}

// RefusedInputs returns the values the selected nodes wrote that the decision does not act on, with
// why, in the order of the nodes: remediation requests it ignores, repair-budget resets and handled
// records it refuses.
func (s *Snapshot) RefusedInputs() []RefusedInput { return s.refused }

// RefusedInput returns the refusal of the node's annotation, if there is one.
func (s *Snapshot) RefusedInput(node, annotation string) (RefusedInput, bool) {
	for _, r := range s.refused {
		if r.Node == node && r.Annotation == annotation {
			return r, true
		}
	}
	return RefusedInput{}, false
}

// request returns the node's pending remediation request (zero: none), the request its running
// remediation answers (zero: none), and when a request dated a moment ahead becomes pending (zero:
// none); it records a request it ignores (RefusedInputs). The annotation is read only where
// spec.allowRemediationRequests is set (elsewhere only its presence is reported), parsed once and
// bounded: a value that is no time, one dated after now beyond the skew bound (a forged request, or a
// client whose clock runs ahead, would poison every later request until that date) or one older than
// RemediationRequestMaxAge is ignored; one dated after now within the bound waits for its time.
func (s *Snapshot) request(n *corev1.Node) (pending, running, due time.Time) {
	running = remediationcr.RequestOf(s.CRs[n.Name])
	v, ok := n.Annotations[remediationv1alpha1.RemediationRequestAnnotation]
	if !ok {
		return time.Time{}, running, time.Time{}
	}
	ignore := func(rule, format string, args ...any) {
		s.refuse(n.Name, remediationv1alpha1.RemediationRequestAnnotation, v, rule, format, args...)
	}
	switch {
	case !s.NHC.Spec.AllowRemediationRequests:
		ignore(RefusedNotAllowed, "NodeHealthCheck %s does not set spec.allowRemediationRequests", s.Stored.Name)
		return time.Time{}, running, time.Time{}
	case s.DryRun():
		ignore(RefusedDryRun, "NodeHealthCheck %s is a dry run (spec.dryRun), which does not simulate requests", s.Stored.Name)
		return time.Time{}, running, time.Time{}
	}
	at, err := nodeinput.Time(v)
	switch {
	case err != nil:
		ignore(RefusedNotATime, "it is %v (for example %s)", err, s.Now.UTC().Format(time.RFC3339))
	case at.After(s.Now.Add(s.FutureBound())):
		ignore(RefusedFuture, "it is dated %s, more than %s (the clock-skew bound) after the operator's time %s: a forged request, or one from a clock that runs ahead, is refused; set the current time to ask",
			at.UTC().Format(time.RFC3339), s.FutureBound(), s.Now.UTC().Format(time.RFC3339))
	case !at.After(Later(s.handledRequest(n), running)):
		// answered
	case at.After(s.Now):
		due = at // a moment ahead, within the skew bound: pending from its time on
	case s.Now.Sub(at) > remediationv1alpha1.RemediationRequestMaxAge:
		ignore(RefusedExpired, "it is older than %s and was not answered; set a new time to ask again", remediationv1alpha1.RemediationRequestMaxAge)
	default:
		pending = at
	}
	return pending, running, due
}

// handledRequest returns the time in the node's remediation-request-handled annotation (zero: none),
// and records a value it refuses (handledTime).
func (s *Snapshot) handledRequest(n *corev1.Node) time.Time {
	at, rule, why := handledTime(n, s.Now, s.FutureBound())
	if why != "" {
		s.refuse(n.Name, remediationv1alpha1.RemediationRequestHandledAnnotation, n.Annotations[remediationv1alpha1.RemediationRequestHandledAnnotation], rule, "%s", why)
	}
	return at
}

// handledTime returns the time in the node's remediation-request-handled annotation (zero: none or
// refused) and, for a value it refuses, the rule and why. The operator writes it, never later than its own time;
// a node can write it too. A value that is not a time, or one dated after now beyond the skew bound
// (which would mark every request until that date as answered), counts as none.
func handledTime(n *corev1.Node, now time.Time, bound time.Duration) (time.Time, string, string) {
	v, ok := n.Annotations[remediationv1alpha1.RemediationRequestHandledAnnotation]
	if !ok {
		return time.Time{}, "", ""
	}
	at, err := nodeinput.Time(v)
	switch {
	case err != nil:
		return time.Time{}, RefusedNotATime, fmt.Sprintf("is %v", err)
	case at.After(now.Add(bound)):
		return time.Time{}, RefusedFuture, fmt.Sprintf("is dated %s, more than %s (the clock-skew bound) after the operator's time %s, "+
			"and the operator never records a request before it answers it: the record is forged",
			at.UTC().Format(time.RFC3339), bound, now.UTC().Format(time.RFC3339))
	}
	return at, "", ""
}

// AnsweredRequest returns the value the node's remediation-request-handled annotation must have
// before its remediation's CRs go, and whether it must be written: the latest of the request the
// CRs answer and the node's request as of now (a request made while the remediation ran is
// answered by it), when it is later than the annotation's (a refused annotation counts as none,
// and is overwritten). Requests dated after now are not answered yet, and nothing later than now is
// ever written. n is the node as read now (the snapshot's may be older).
func (s *Snapshot) AnsweredRequest(n *corev1.Node, crs []unstructured.Unstructured) (string, bool) {
	answered := remediationcr.RequestOf(crs)
	if v, ok := n.Annotations[remediationv1alpha1.RemediationRequestAnnotation]; ok && s.NHC.Spec.AllowRemediationRequests {
		if at, err := nodeinput.Time(v); err == nil && !at.After(s.Now) {
			answered = Later(answered, at)
		}
	}
	if answered.After(s.Now) {
		answered = s.Now
	}
	handled, _, _ := handledTime(n, s.Now, s.FutureBound())
	if answered.IsZero() || !answered.After(handled) {
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

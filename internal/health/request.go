package health

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// requestedHealth applies the node's remediation request (spec.allowRemediationRequests) to its
// verdict h from its conditions:
//   - a node with a pending request (Node.Requested) and no remediation is unhealthy since the
//     request, as if one of its unhealthy conditions had matched for its duration: every rule that
//     holds a new remediation holds it too;
//   - a node whose running remediation answers a request (Node.RunningRequest) stays unhealthy
//     until the remediation is answered (requestAnswered), so that its CR is not removed as
//     "recovered" at once, before its remediator acted;
//   - a node unhealthy by its conditions keeps that verdict, noting the request.
//
// A pending request of a node whose conditions find it healthy is ByRequest: the node counts as
// healthy where a decision weighs other nodes (threshold, storm, failure domain) and waits behind
// nodes that are really down, since the node itself can write the request; its own start takes the
// threshold's headroom (limitRequests). Once its remediation runs, it counts as any remediation does.
func requestedHealth(in Input, n Node, h NodeHealth) NodeHealth {
	at := n.Requested
	if n.Remediating {
		at = n.RunningRequest
	}
	switch {
	case at.IsZero():
		return h
	case h.State == Unhealthy:
		h.Requested = at
		return h
	case n.Remediating && requestAnswered(in, n):
		return h
	}
	since := at
	if since.After(in.Now) {
		since = in.Now // the gatherer passes no request dated ahead; were one, it counts from now
	}
	reason := fmt.Sprintf("remediation requested at %s (annotation %s)", at.UTC().Format(time.RFC3339), remediationv1alpha1.RemediationRequestAnnotation)
	if n.Remediating {
		reason += "; its remediator has not reported yet"
	}
	return NodeHealth{State: Unhealthy, UnhealthySince: since, Reason: reason, Requested: at, ByRequest: h.State == Healthy && !n.Remediating}
}

// requestAnswered reports whether a running remediation that answers a request is over as far as
// the request goes, so the node's own conditions decide again: a CR reports Succeeded=True, a
// condition of a type the unhealthy conditions name changed since the remediation started (the node
// went down, and maybe came back), or every step has timed out or failed (each step's timeout, or
// lease.Overdue of a single template's step, bounds the wait for a remediator that never reports).
//
// A change is judged against the node's baseline (Node.RequestBaseline): its conditions' status
// and lastTransitionTime as the remediation found them, compared with what the node reports now
// (the node's own timestamps with each other, so a node whose clock is off is no different), or a
// change this process's watch saw after the baseline was taken (the same clock). Without a
// baseline, a lastTransitionTime or a change seen after the first CR's creation counts.
func requestAnswered(in Input, n Node) bool {
	if len(n.CRs) == 0 {
		return true
	}
	first := n.CRs[0].Created
	for _, c := range n.CRs {
		if c.Succeeded == metav1.ConditionTrue {
			return true
		}
		if c.Created.Before(first) {
			first = c.Created
		}
	}
	named := func(t corev1.NodeConditionType) bool {
		return slices.ContainsFunc(in.UnhealthyConditions, func(u remediationv1alpha1.UnhealthyCondition) bool { return u.Type == t })
	}
	since := first
	if b := n.RequestBaseline; b != nil {
		since = b.At
		was := map[corev1.NodeConditionType]corev1.NodeCondition{}
		for _, c := range b.Conditions {
			was[c.Type] = c
		}
		for _, c := range n.Conditions {
			if !named(c.Type) {
				continue
			}
			before, ok := was[c.Type]
			if !ok || before.Status != c.Status || !before.LastTransitionTime.Equal(&c.LastTransitionTime) {
				return true
			}
			delete(was, c.Type)
		}
		if len(was) > 0 {
			return true // a condition the node had is gone
		}
	}
	for _, c := range n.Conditions {
		if !named(c.Type) {
			continue
		}
		changed := n.SeenChanging[c.Type]
		if n.RequestBaseline == nil && c.LastTransitionTime.After(changed) {
			changed = c.LastTransitionTime.Time
		}
		if changed.After(since) {
			return true
		}
	}
	return Escalate(EscalationInput{Steps: in.Steps, CRs: n.CRs, Now: in.Now, Unhealthy: true}).Exhausted
}

// Baseline returns the node's baseline for a remediation that answers its request, at now: its
// conditions of the types the unhealthy conditions name.
func Baseline(rules []remediationv1alpha1.UnhealthyCondition, conditions []corev1.NodeCondition, now time.Time) RequestBaseline {
	b := RequestBaseline{At: now}
	for _, c := range conditions {
		if slices.ContainsFunc(rules, func(u remediationv1alpha1.UnhealthyCondition) bool { return u.Type == c.Type }) {
			b.Conditions = append(b.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		}
	}
	return b
}

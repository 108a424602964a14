package health

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// State is a node's health under a NodeHealthCheck's unhealthy conditions.
type State int

const (
	// Healthy: no unhealthy condition matches the node.
	Healthy State = iota
	// SoonUnhealthy: an unhealthy condition matches but its duration has not passed yet. The node is
	// not healthy (its remediation CRs stay) and not yet due for a new remediation. A rebooting node
	// whose Ready goes from Unknown to False is in this state until the False entry's duration passes.
	SoonUnhealthy
	// Unhealthy: an unhealthy condition has matched for at least its duration.
	Unhealthy
)

func (s State) String() string {
	switch s {
	case Healthy:
		return "Healthy"
	case SoonUnhealthy:
		return "SoonUnhealthy"
	case Unhealthy:
		return "Unhealthy"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// NodeHealth is the verdict on one node.
type NodeHealth struct {
	// State is the node's health.
	State State
	// UnhealthySince is when the node became Unhealthy: the earliest time a matching entry's
	// duration passed. Zero unless State is Unhealthy.
	UnhealthySince time.Time
	// Next is the earliest time the state changes without any new event: when a matching entry's
	// duration passes. Zero when nothing is pending.
	Next time.Time
	// Reason names the matching condition, for example "Ready=Unknown for 300s"; empty when healthy.
	Reason string
	// Matched is the unhealthy condition that matched (Reason's); zero when healthy or when only a
	// remediation request makes the node unhealthy.
	Matched remediationv1alpha1.UnhealthyCondition
	// Requested is the time of the remediation request (Node.Requested, Node.RunningRequest) the
	// verdict notes: the node is unhealthy for it, or unhealthy anyway with a request pending; zero
	// when no request applies.
	Requested time.Time
	// ByRequest is set when the node is unhealthy only for its pending remediation request: its
	// conditions find it healthy and no remediation runs yet. Whoever may patch the Node can write the
	// request (its own kubelet too), so such a node counts as healthy for the threshold, storm
	// recovery and its failure domain, starts only within the threshold's headroom, and waits behind
	// nodes that are really down under maxInFlight: a request moves no decision about another node.
	ByRequest bool
}

// EvaluateNode applies the unhealthy conditions (a logical OR) to the node's conditions at now. A
// condition matches when its type and status equal an entry's; it has matched since its
// lastTransitionTime. A lastTransitionTime in the future (clock skew) counts as now.
func EvaluateNode(rules []remediationv1alpha1.UnhealthyCondition, conditions []corev1.NodeCondition, now time.Time) NodeHealth {
	var h NodeHealth
	for _, rule := range rules {
		for i := range conditions {
			c := &conditions[i]
			if c.Type != rule.Type || c.Status != rule.Status {
				continue
			}
			since := c.LastTransitionTime.Time
			if since.After(now) || since.IsZero() {
				since = now
			}
			due := since.Add(rule.Duration.Duration)
			if !due.After(now) {
				if h.State != Unhealthy || due.Before(h.UnhealthySince) {
					h.UnhealthySince = due
					h.Reason = fmt.Sprintf("%s=%s for %s", c.Type, c.Status, rule.Duration.Duration)
					h.Matched = rule
				}
				h.State = Unhealthy
				continue
			}
			if h.State == Healthy {
				h.State = SoonUnhealthy
				h.Reason = fmt.Sprintf("%s=%s, unhealthy after %s", c.Type, c.Status, rule.Duration.Duration)
				h.Matched = rule
			}
			h.Next = Earliest(h.Next, due)
		}
	}
	if h.State == Unhealthy {
		h.Next = time.Time{} // nothing pending changes an unhealthy verdict on its own
	}
	return h
}

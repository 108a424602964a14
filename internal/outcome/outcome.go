package outcome

import (
	"cmp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// Node is what an ended remediation's outcome depends on besides status: the node as the status
// writer's snapshot shows it.
type Node struct {
	// Exists is true while the node object exists.
	Exists bool
	// Created is when the node object was created (zero: not known).
	Created time.Time
	// Selected is true while the NodeHealthCheck selects the node.
	Selected bool
	// Healthy is true when the node is selected and simply healthy: no unhealthy condition
	// matches it, not even for less than its duration, and it has no remediation CR.
	Healthy bool
}

// Ended is one ended remediation of a node.
type Ended struct {
	// Node is the node's name.
	Node string
	remediationv1alpha1.EndedRemediation
}

// Derive returns the remediations that end when the status entries before (the stored status)
// are replaced by those after (the status about to be written), in node order:
//
//   - a node whose entry had remediation CRs and has none after (or no entry), or whose CRs after
//     are a new remediation (none of the earlier CRs is left and the first one is of the first
//     step: a CR deleted by someone else and created anew), ended, with the outcome nodeOf's facts
//     tell (see outcomeOf), unless every step had timed out before: that was recorded as
//     StepsExhausted when it happened;
//   - a node whose remediation is exhausted after (Exhausted) and was not before ended with
//     StepsExhausted, once.
//
// nodeOf is asked only about the nodes whose remediation ended. now is the write's time; the
// record keeps it at the API's precision (whole seconds).
func Derive(before, after []remediationv1alpha1.UnhealthyNode, steps []health.Step, nodeOf func(name string) Node, now time.Time) []Ended {
	old := map[string]*remediationv1alpha1.UnhealthyNode{}
	for i := range before {
		old[before[i].Name] = &before[i]
	}
	seen := map[string]bool{}
	var out []Ended
	for i := range after {
		a := &after[i]
		seen[a.Name] = true
		out = append(out, derive(a.Name, old[a.Name], a, steps, nodeOf, now)...)
	}
	for i := range before {
		if b := &before[i]; !seen[b.Name] {
			out = append(out, derive(b.Name, b, nil, steps, nodeOf, now)...)
		}
	}
	slices.SortStableFunc(out, func(x, y Ended) int { return strings.Compare(x.Node, y.Node) })
	return out
}

// derive returns what ended for one node (before or after may be nil: no entry).
func derive(name string, before, after *remediationv1alpha1.UnhealthyNode, steps []health.Step, nodeOf func(string) Node, now time.Time) []Ended {
	var had, has []remediationv1alpha1.Remediation
	if before != nil {
		had = before.Remediations
	}
	if after != nil {
		has = after.Remediations
	}
	var out []Ended
	if len(had) > 0 && (len(has) == 0 || restarted(had, has, steps)) {
		if !Exhausted(had, steps) {
			out = append(out, ended(name, outcomeOf(before, nodeOf(name)), had, metav1.NewTime(now.Truncate(time.Second))))
		}
		had = nil // what is after is a new remediation, if anything
	}
	if Exhausted(has, steps) && !Exhausted(had, steps) {
		last := has[len(has)-1]
		out = append(out, ended(name, remediationv1alpha1.OutcomeStepsExhausted, has, *last.TimedOut))
	}
	return out
}

// ended is the record of the remediation whose CRs were rems.
func ended(name string, o remediationv1alpha1.RemediationOutcome, rems []remediationv1alpha1.Remediation, at metav1.Time) Ended {
	return Ended{Node: name, EndedRemediation: remediationv1alpha1.EndedRemediation{Outcome: o, Step: len(rems),
		Template: rems[len(rems)-1].TemplateName, Started: rems[0].Started, Ended: at}}
}

// outcomeOf tells how the remediation of the entry ended, its CRs being gone: the node object is
// gone (NodeDeleted), or was recreated after the first CR (NodeReplaced when it is healthy,
// otherwise NodeDeleted: the remediated object is gone, the new one gets its own remediation);
// it is no longer selected (NodeLeftSelector); it was reported healthy again while its CRs were
// kept, or is healthy now (Healthy); otherwise Stopped.
func outcomeOf(before *remediationv1alpha1.UnhealthyNode, n Node) remediationv1alpha1.RemediationOutcome {
	switch first := before.Remediations[0].Started.Time; {
	case !n.Exists:
		return remediationv1alpha1.OutcomeNodeDeleted
	case n.Created.After(first) && n.Healthy:
		return remediationv1alpha1.OutcomeNodeReplaced
	case n.Created.After(first):
		return remediationv1alpha1.OutcomeNodeDeleted
	case !n.Selected:
		return remediationv1alpha1.OutcomeNodeLeftSelector
	case before.ConditionsHealthyTimestamp != nil || n.Healthy:
		return remediationv1alpha1.OutcomeHealthy
	}
	return remediationv1alpha1.OutcomeStopped
}

// restarted reports whether the CRs after are a new remediation rather than the one of the CRs
// before: none of the CRs before is among them, and the first of them is of the first step. (An
// escalation step that needs the name of a timed-out CR replaces it, but with a later step's.)
func restarted(had, has []remediationv1alpha1.Remediation, steps []health.Step) bool {
	for _, h := range had {
		if slices.ContainsFunc(has, func(r remediationv1alpha1.Remediation) bool { return sameCR(h, r) }) {
			return false
		}
	}
	first, _ := firstAndLast(steps)
	return len(steps) > 0 && stepOf(has[0]) == first
}

// sameCR reports whether two status records are of one CR: by uid, or, where the status has none
// (written by another tool), by kind, namespace, name and creation.
func sameCR(a, b remediationv1alpha1.Remediation) bool {
	if a.Resource.UID != "" || b.Resource.UID != "" {
		return a.Resource.UID == b.Resource.UID
	}
	return a.Resource.Kind == b.Resource.Kind && a.Resource.Namespace == b.Resource.Namespace && a.Resource.Name == b.Resource.Name &&
		a.Started.Equal(&b.Started)
}

// Exhausted reports whether a node's remediation CRs (in status order) say that every escalation
// step timed out or failed: every CR is marked timed out, and the latest is of the spec's last
// step, so no step follows. (A step whose CR reports Succeeded=True is never marked, so a
// remediation whose last step succeeded while the node stays unhealthy is not exhausted.)
func Exhausted(rems []remediationv1alpha1.Remediation, steps []health.Step) bool {
	if len(rems) == 0 || len(steps) == 0 {
		return false
	}
	for _, r := range rems {
		if r.TimedOut == nil {
			return false
		}
	}
	_, last := firstAndLast(steps)
	return stepOf(rems[len(rems)-1]) == last
}

// firstAndLast returns the keys of the first and last steps (by order); zero keys without steps.
func firstAndLast(steps []health.Step) (first, last health.StepKey) {
	if len(steps) == 0 {
		return health.StepKey{}, health.StepKey{}
	}
	sorted := slices.Clone(steps)
	slices.SortStableFunc(sorted, func(a, b health.Step) int { return cmp.Compare(a.Order, b.Order) })
	return sorted[0].StepKey, sorted[len(sorted)-1].StepKey
}

// stepOf is the step a CR's status record is of: its kind's template and the template name.
func stepOf(r remediationv1alpha1.Remediation) health.StepKey {
	return health.StepKey{TemplateKind: r.Resource.Kind + remediationv1alpha1.TemplateSuffix, TemplateName: r.TemplateName}
}

// Deadline returns when the node's running remediation should have ended by its steps' timeouts:
// its first CR's creation plus the sum of every step's timeout. ok is false when there is none to
// report: no CR, the node is healthy again (its CRs are only kept, by healthyDelay), or a step
// without a timeout (a single remediationTemplate, which runs until the node recovers).
func Deadline(entry *remediationv1alpha1.UnhealthyNode, steps []health.Step) (deadline time.Time, ok bool) {
	if len(entry.Remediations) == 0 || entry.ConditionsHealthyTimestamp != nil || len(steps) == 0 {
		return time.Time{}, false
	}
	var total time.Duration
	for _, s := range steps {
		if s.Timeout <= 0 {
			return time.Time{}, false
		}
		total += s.Timeout
	}
	return entry.Remediations[0].Started.Add(total), true
}

// Record returns a copy of the record of the last outcomes with the ended remediations added
// (record, which may be shared with a cache, is not changed and shares no memory with the result):
// each node's outcomes newest last, at most remediationv1alpha1.MaxOutcomesPerNode of them, and
// at most remediationv1alpha1.MaxOutcomeNodes nodes, those whose newest outcome ended last (then
// by name); sorted by node name. Nil when there is none.
func Record(record []remediationv1alpha1.NodeRemediationOutcomes, ended []Ended) []remediationv1alpha1.NodeRemediationOutcomes {
	if len(record) == 0 && len(ended) == 0 {
		return nil
	}
	out := make([]remediationv1alpha1.NodeRemediationOutcomes, 0, len(record)+len(ended))
	index := map[string]int{}
	for _, r := range record {
		index[r.Name] = len(out)
		out = append(out, remediationv1alpha1.NodeRemediationOutcomes{Name: r.Name, Outcomes: slices.Clone(r.Outcomes)})
	}
	for _, e := range ended {
		i, ok := index[e.Node]
		if !ok {
			i, index[e.Node] = len(out), len(out)
			out = append(out, remediationv1alpha1.NodeRemediationOutcomes{Name: e.Node})
		}
		outcomes := append(out[i].Outcomes, e.EndedRemediation)
		out[i].Outcomes = outcomes[max(0, len(outcomes)-remediationv1alpha1.MaxOutcomesPerNode):]
	}
	if len(out) > remediationv1alpha1.MaxOutcomeNodes {
		slices.SortStableFunc(out, func(a, b remediationv1alpha1.NodeRemediationOutcomes) int {
			if c := newest(b).Compare(newest(a)); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		out = out[:remediationv1alpha1.MaxOutcomeNodes]
	}
	slices.SortFunc(out, func(a, b remediationv1alpha1.NodeRemediationOutcomes) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// newest is when the node's newest outcome ended.
func newest(n remediationv1alpha1.NodeRemediationOutcomes) time.Time {
	var t time.Time
	for _, o := range n.Outcomes {
		if o.Ended.After(t) {
			t = o.Ended.Time
		}
	}
	return t
}

// Of returns the node's last outcomes in the record, oldest first (nil: none).
func Of(record []remediationv1alpha1.NodeRemediationOutcomes, node string) []remediationv1alpha1.EndedRemediation {
	for _, r := range record {
		if r.Name == node {
			return r.Outcomes
		}
	}
	return nil
}

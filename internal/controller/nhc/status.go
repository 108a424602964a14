package nhc

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/outcome"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// buildStatus turns a decision into the NodeHealthCheck's next status. It keeps what only the old
// status knows (when a node turned healthy, timeouts recorded for CRs, the outcomes of ended
// remediations) and sets lastUpdateTime only when something else changed. It also returns the
// remediations that end with this status (recorded in it): the caller counts them once the status
// is written.
func buildStatus(snap *targets.Snapshot) (remediationv1alpha1.NodeHealthCheckStatus, []outcome.Ended) {
	nhc, d, crs, problem, up, now := snap.Stored, snap.Decision, snap.CRs, snap.Problem, snap.Upgrade, snap.Now
	old := &nhc.Status
	st := remediationv1alpha1.NodeHealthCheckStatus{
		ObservedGeneration: nhc.Generation,
		ObservedNodes:      ptr.To(d.Observed),
		HealthyNodes:       ptr.To(d.Healthy),
		Conditions:         slices.Clone(old.Conditions),
	}

	stepOrder := map[health.StepKey]int{}
	for _, step := range snap.Input.Steps {
		stepOrder[step.StepKey] = step.Order
	}
	oldEntries := map[string]*remediationv1alpha1.UnhealthyNode{}
	for i := range old.UnhealthyNodes {
		oldEntries[old.UnhealthyNodes[i].Name] = &old.UnhealthyNodes[i]
	}
	// Every selected node that matches an unhealthy condition, as the public operator lists them:
	// also those whose remediation may not start (budget, storm, pause, upgrade, exclusion, another
	// NodeHealthCheck's CR, the control-plane rule), without remediations. Remediations lists only
	// this NodeHealthCheck's CRs.
	var remediating, would []string
	for _, n := range d.Nodes {
		if !n.Listed() {
			continue // soon unhealthy without CRs, or left to the termination-handler MachineHealthCheck
		}
		entry := remediationv1alpha1.UnhealthyNode{Name: n.Name, Remediations: remediations(crs[n.Name], oldEntries[n.Name], stepOrder),
			DryRunRemediations: nextSimulated(snap, n)}
		if !n.Health.Requested.IsZero() {
			entry.RemediationRequested = &metav1.Time{Time: n.Health.Requested}
		}
		switch n.Action {
		case health.StartRemediation, health.ContinueRemediation:
			if len(entry.DryRunRemediations) > 0 {
				would = append(would, n.Name)
				break
			}
			remediating = append(remediating, n.Name)
		case health.Recovered, health.HealthyDelayed:
			remediating = append(remediating, n.Name)
			entry.ConditionsHealthyTimestamp = &metav1.Time{Time: now}
			if o := oldEntries[n.Name]; o != nil && o.ConditionsHealthyTimestamp != nil {
				entry.ConditionsHealthyTimestamp = o.ConditionsHealthyTimestamp
			}
			if n.Action == health.HealthyDelayed {
				entry.HealthyDelayed = ptr.To(true)
			}
		}
		st.UnhealthyNodes = append(st.UnhealthyNodes, entry)
	}
	// CRs of nodes no longer selected (deleted, or relabelled) are listed while they exist: a
	// remediator's finalizer, or PermanentNodeDeletionExpected while a machine is replaced.
	for _, node := range snap.Orphans {
		remediating = append(remediating, node)
		st.UnhealthyNodes = append(st.UnhealthyNodes, remediationv1alpha1.UnhealthyNode{Name: node, Remediations: remediations(crs[node], oldEntries[node], stepOrder)})
	}
	// CRs made for an earlier Node object of a selected node's name (deleted and created again) are
	// listed the same way while they exist, unless the node, judged afresh, has its own entry.
	for _, node := range slices.Sorted(maps.Keys(snap.Previous)) {
		if slices.ContainsFunc(st.UnhealthyNodes, func(e remediationv1alpha1.UnhealthyNode) bool { return e.Name == node }) {
			continue
		}
		remediating = append(remediating, node)
		st.UnhealthyNodes = append(st.UnhealthyNodes, remediationv1alpha1.UnhealthyNode{Name: node, Remediations: remediations(snap.Previous[node], oldEntries[node], stepOrder)})
	}
	remediating = keepUnreadable(snap, old.UnhealthyNodes, &st.UnhealthyNodes, remediating)
	slices.SortFunc(st.UnhealthyNodes, func(a, b remediationv1alpha1.UnhealthyNode) int { return strings.Compare(a.Name, b.Name) })
	st.RemediatingNodes = ptr.To(remediatingNodes(st.UnhealthyNodes))
	slices.Sort(remediating)
	// How remediations end, recorded in the write that removes their CRs from the list (or records
	// the last step's timeout): derived from the stored status, so a write held back or refused is
	// derived again, and never twice once written.
	ended := outcome.Derive(old.UnhealthyNodes, st.UnhealthyNodes, snap.Input.Steps, snap.OutcomeNode, now)
	st.RemediationOutcomes = outcome.Record(old.RemediationOutcomes, ended)

	disabled := metav1.Condition{Type: remediationv1alpha1.ConditionTypeDisabled, Status: metav1.ConditionFalse,
		Reason: remediationv1alpha1.ConditionReasonEnabled, Message: "No issues found, the NodeHealthCheck is enabled",
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}}
	if problem != nil {
		disabled.Status, disabled.Reason, disabled.Message = metav1.ConditionTrue, problem.Reason, problem.Message
	}
	meta.SetStatusCondition(&st.Conditions, disabled)
	setStormConditions(&st.Conditions, nhc, d, now)
	meta.SetStatusCondition(&st.Conditions, up.Condition)
	setDryRunCondition(&st.Conditions, snap.NHC, st.UnhealthyNodes, now)
	real, simulated := snap.RepairStarts()
	st.RemediationHistory = repairHistory(snap.Nodes, real)
	st.DryRunRemediationHistory = repairHistory(snap.Nodes, simulated)
	if len(snap.CoveredBy) > 0 {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: remediationv1alpha1.ConditionTypeMachineHealthCheckOverlap, Status: metav1.ConditionTrue,
			Reason: remediationv1alpha1.ConditionReasonCoveredByMachineHealthCheck, Message: coveredMessage(snap.CoveredBy),
			ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}})
	} else {
		meta.RemoveStatusCondition(&st.Conditions, remediationv1alpha1.ConditionTypeMachineHealthCheckOverlap)
	}
	setRepairBudgetCondition(&st.Conditions, nhc, d, now)
	setFailureDomainCondition(&st.Conditions, nhc, d, now)
	setStalledCondition(&st.Conditions, nhc, d, now)
	setUntrustedTimesCondition(&st.Conditions, nhc, snap.Input.Nodes, now)
	setClockSkewCondition(&st.Conditions, nhc, snap.Skew, now)
	if len(snap.Overlaps) > 0 {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: remediationv1alpha1.ConditionTypeSelectorOverlap, Status: metav1.ConditionTrue,
			Reason: remediationv1alpha1.ConditionReasonOverlappingSelectors, Message: overlapMessage(snap.Overlaps),
			ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}})
	} else {
		meta.RemoveStatusCondition(&st.Conditions, remediationv1alpha1.ConditionTypeSelectorOverlap)
	}

	st.Phase, st.Reason = phase(nhc, remediating, would, d, problem, up.Blocked)

	st.LastUpdateTime = old.LastUpdateTime
	cmp := st.DeepCopy()
	cmp.LastUpdateTime = nil
	oldCmp := old.DeepCopy()
	oldCmp.LastUpdateTime = nil
	if !equality.Semantic.DeepEqual(cmp, oldCmp) {
		st.LastUpdateTime = &metav1.Time{Time: now}
	}
	return st, ended
}

// keepUnreadable keeps, in the entries about to be written, the remediations the stored status
// lists of kinds whose CRs cannot be read now (targets.Snapshot.Unreadable), as they were: Unknown
// is not free. Such a CR may still run, so its entry is not dropped and no outcome is recorded for
// it (internal/outcome sees it listed before and after), until the kind can be read again and the
// CR is seen or seen gone. A node listed anew gets them added; a node the decision no longer lists
// keeps its stored entry, with only them. It returns remediating with the nodes added.
func keepUnreadable(snap *targets.Snapshot, old []remediationv1alpha1.UnhealthyNode, entries *[]remediationv1alpha1.UnhealthyNode, remediating []string) []string {
	index := map[string]int{}
	for i, e := range *entries {
		index[e.Name] = i
	}
	for _, o := range old {
		var kept []remediationv1alpha1.Remediation
		for _, r := range o.Remediations {
			if snap.Unreadable(r.Resource.GroupVersionKind()) {
				kept = append(kept, *r.DeepCopy())
			}
		}
		if len(kept) == 0 {
			continue
		}
		i, listed := index[o.Name]
		if !listed {
			entry := *o.DeepCopy()
			entry.Remediations = kept
			*entries = append(*entries, entry)
			remediating = append(remediating, o.Name)
			continue
		}
		e := &(*entries)[i]
		had := len(e.Remediations) > 0
		for _, r := range kept {
			// The same CR may be read in another version of its kind, one that can be read.
			same := func(n remediationv1alpha1.Remediation) bool {
				return r.Resource.UID != "" && n.Resource.UID == r.Resource.UID
			}
			if !slices.ContainsFunc(e.Remediations, same) {
				e.Remediations = append(e.Remediations, r)
			}
		}
		slices.SortStableFunc(e.Remediations, func(a, b remediationv1alpha1.Remediation) int { return a.Started.Compare(b.Started.Time) })
		if !had && !slices.Contains(remediating, o.Name) {
			remediating = append(remediating, o.Name)
		}
	}
	return remediating
}

// remediatingNodes counts the listed nodes that have CRs of this NodeHealthCheck: the nodes being
// remediated (also those healthy again whose CRs are not deleted yet), not those held back.
func remediatingNodes(nodes []remediationv1alpha1.UnhealthyNode) int {
	n := 0
	for _, u := range nodes {
		if len(u.Remediations) > 0 {
			n++
		}
	}
	return n
}

// remediations lists the node's CRs for status in creation order (the API's timestamps have second
// precision; within one second, in escalation order), with their timeouts.
func remediations(crs []unstructured.Unstructured, old *remediationv1alpha1.UnhealthyNode, stepOrder map[health.StepKey]int) []remediationv1alpha1.Remediation {
	var out []remediationv1alpha1.Remediation
	for _, cr := range crs {
		r := remediationv1alpha1.Remediation{
			Resource:     corev1.ObjectReference{APIVersion: cr.GetAPIVersion(), Kind: cr.GetKind(), Namespace: cr.GetNamespace(), Name: cr.GetName(), UID: cr.GetUID()},
			Started:      cr.GetCreationTimestamp(),
			TemplateName: cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation],
		}
		if ts := cr.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]; ts != "" {
			if t, err := time.Parse(time.RFC3339, ts); err == nil {
				r.TimedOut = &metav1.Time{Time: t}
			}
		}
		if r.TimedOut == nil && old != nil {
			for _, o := range old.Remediations {
				if o.Resource.UID == r.Resource.UID {
					r.TimedOut = o.TimedOut
				}
			}
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b remediationv1alpha1.Remediation) int {
		if c := a.Started.Compare(b.Started.Time); c != 0 {
			return c
		}
		return cmp.Compare(stepOrder[remediationcr.StepKeyOf(a.Resource.Kind, a.TemplateName)], stepOrder[remediationcr.StepKeyOf(b.Resource.Kind, b.TemplateName)])
	})
	return out
}

// phase derives phase and reason, in precedence Disabled > Paused (pauseRequests, then upgrade) >
// Remediating (a node has CRs of this NodeHealthCheck, or its first one starts now) > Enabled.
// Unhealthy nodes whose remediation may not start are named with the reason.
func phase(nhc *remediationv1alpha1.NodeHealthCheck, remediating, would []string, d health.Decision, problem *targets.Problem,
	upgradeBlock string) (remediationv1alpha1.NHCPhase, string) {
	skipNote := skippedNote(d.Skipped())
	held := heldNote(d.Held())
	switch {
	case problem != nil:
		return remediationv1alpha1.PhaseDisabled, problem.Message + held
	case len(nhc.Spec.PauseRequests) > 0:
		return remediationv1alpha1.PhasePaused, "Paused, no new remediation starts: " + strings.Join(nhc.Spec.PauseRequests, "; ") + held
	case upgradeBlock != "":
		return remediationv1alpha1.PhasePaused, "Paused, no new remediation starts: " + upgradeBlock + held
	case len(remediating) > 0:
		skipNote = held + skipNote
		return remediationv1alpha1.PhaseRemediating, fmt.Sprintf("Remediating %d node(s): %s%s", len(remediating), strings.Join(remediating, ", "), skipNote)
	case len(would) > 0:
		return remediationv1alpha1.PhaseEnabled, fmt.Sprintf("Dry run, no remediation starts: would be remediating %d node(s): %s%s", len(would), strings.Join(would, ", "), skipNote)
	default:
		if skipNote != "" {
			return remediationv1alpha1.PhaseEnabled, "Enabled" + skipNote
		}
		return remediationv1alpha1.PhaseEnabled, "No issues found, the NodeHealthCheck is enabled"
	}
}

// maxWouldListed bounds the remediations the DryRun condition's message names, and the nodes the
// other conditions' messages name.
const maxWouldListed = 20

// joinBounded joins at most maxWouldListed items with "; ", saying how many more there are.
func joinBounded(items []string) string {
	if len(items) > maxWouldListed {
		return strings.Join(items[:maxWouldListed], "; ") + fmt.Sprintf("; and %d more", len(items)-maxWouldListed)
	}
	return strings.Join(items, "; ")
}

// setDryRunCondition writes DryRun while spec.dryRun is set, naming each node's remediation that
// would run now (its latest simulated step), and removes it when dry-run is off.
func setDryRunCondition(conditions *[]metav1.Condition, nhc *remediationv1alpha1.NodeHealthCheck, entries []remediationv1alpha1.UnhealthyNode, now time.Time) {
	if !nhc.Spec.DryRun {
		meta.RemoveStatusCondition(conditions, remediationv1alpha1.ConditionTypeDryRun)
		return
	}
	var parts []string
	for _, u := range entries {
		if len(u.DryRunRemediations) == 0 {
			continue
		}
		if len(parts) == maxWouldListed {
			parts = append(parts, "...")
			break
		}
		step := u.DryRunRemediations[len(u.DryRunRemediations)-1]
		parts = append(parts, fmt.Sprintf("node %s with %s %s/%s since %s", u.Name, step.Template.Kind, step.Template.Namespace, step.Template.Name,
			step.Started.UTC().Format(time.RFC3339)))
	}
	c := metav1.Condition{Type: remediationv1alpha1.ConditionTypeDryRun, Status: metav1.ConditionTrue,
		Reason:             remediationv1alpha1.ConditionReasonNothingToRemediate,
		Message:            "Dry run: no remediation would run now; no remediation CR is created and no node lease taken",
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}}
	if len(parts) > 0 {
		c.Reason = remediationv1alpha1.ConditionReasonWouldRemediate
		c.Message = "Dry run: would be remediating " + strings.Join(parts, "; ") + "; no remediation CR is created and no node lease taken"
	}
	meta.SetStatusCondition(conditions, c)
}

// coveredMessage names the Cluster API MachineHealthChecks that cover selected nodes.
func coveredMessage(covered map[string]int) string {
	names := slices.Sorted(maps.Keys(covered))
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s (%d node(s))", n, covered[n]))
	}
	return "Cluster API MachineHealthChecks cover selected nodes: " + strings.Join(parts, ", ") +
		"; this NodeHealthCheck leaves those nodes to them and starts no remediation of them"
}

// setClockSkewCondition writes ClockSkewExceeded while the skew is measured against a bound, and
// removes it otherwise. The message names the direction and the bound, not the measured value,
// which moves with every response (the gauge and the event carry it): a status that changed with
// every estimate would be written on every reconcile.
func setClockSkewCondition(conditions *[]metav1.Condition, nhc *remediationv1alpha1.NodeHealthCheck, v *clockskew.Verdict, now time.Time) {
	if v == nil || (v.Known && v.Bound <= 0) {
		meta.RemoveStatusCondition(conditions, remediationv1alpha1.ConditionTypeClockSkewExceeded)
		return
	}
	c := metav1.Condition{Type: remediationv1alpha1.ConditionTypeClockSkewExceeded, Status: metav1.ConditionFalse,
		Reason:             remediationv1alpha1.ConditionReasonClockSkewWithinBound,
		Message:            fmt.Sprintf("The manager's clock agrees with the API server's within %s (--max-clock-skew)", v.Bound),
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}}
	switch {
	case !v.Known:
		c.Status, c.Reason = metav1.ConditionUnknown, remediationv1alpha1.ConditionReasonClockSkewUnknown
		c.Message = "The skew between the manager's clock and the API server's is not measured yet; no remediation starts or escalates until it is"
	case v.Exceeded:
		c.Status, c.Reason = metav1.ConditionTrue, remediationv1alpha1.ConditionReasonClockSkewBeyondBound
		c.Message = fmt.Sprintf("%s; the gauge %s shows by how much: durations cannot be judged, so no remediation starts or escalates until the clocks agree again",
			capitalize(v.Beyond()), clockskew.MetricSkew)
	}
	meta.SetStatusCondition(conditions, c)
}

// setRepairBudgetCondition writes RepairBudgetExhausted while the repair budget holds back some
// unhealthy nodes, naming them (their skip messages say until when), and removes it otherwise.
func setRepairBudgetCondition(conditions *[]metav1.Condition, nhc *remediationv1alpha1.NodeHealthCheck, d health.Decision, now time.Time) {
	var held []string
	for _, n := range d.Nodes {
		if n.Action == health.Skip && n.SkipReason == health.SkipRepairBudget {
			held = append(held, n.SkipMessage)
		}
	}
	if len(held) == 0 {
		meta.RemoveStatusCondition(conditions, remediationv1alpha1.ConditionTypeRepairBudgetExhausted)
		return
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: remediationv1alpha1.ConditionTypeRepairBudgetExhausted, Status: metav1.ConditionTrue,
		Reason: remediationv1alpha1.ConditionReasonRepairBudgetExhausted, Message: fmt.Sprintf("%d node(s) not remediated: %s", len(held), joinBounded(held)),
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}})
}

// setStalledCondition writes RemediationsStalled while some nodes' remediation has ended without
// them being done with (health.NodeDecision.Stalled), naming them and why, and removes it otherwise.
func setStalledCondition(conditions *[]metav1.Condition, nhc *remediationv1alpha1.NodeHealthCheck, d health.Decision, now time.Time) {
	stalled := d.Stalled()
	if len(stalled) == 0 {
		meta.RemoveStatusCondition(conditions, remediationv1alpha1.ConditionTypeRemediationsStalled)
		return
	}
	reason := remediationv1alpha1.ConditionReasonAwaitingConfirmation
	var why []string
	for _, n := range stalled {
		why = append(why, stalledMessage(n))
		if n.Stalled() == health.StallStepsExhausted {
			reason = remediationv1alpha1.ConditionReasonStepsExhausted
		}
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: remediationv1alpha1.ConditionTypeRemediationsStalled, Status: metav1.ConditionTrue,
		Reason: reason, Message: fmt.Sprintf("%d node(s) need attention, and hold no maxInFlight slot: %s", len(why), joinBounded(why)),
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}})
}

// setUntrustedTimesCondition writes ConditionTimesUntrusted while some selected nodes report
// condition times the operator does not trust (health.Node.CountFrom), naming them and from when
// each counts, and removes it otherwise.
func setUntrustedTimesCondition(conditions *[]metav1.Condition, nhc *remediationv1alpha1.NodeHealthCheck, nodes []health.Node, now time.Time) {
	var which []string
	for _, n := range nodes {
		for _, t := range slices.Sorted(maps.Keys(n.CountFrom)) {
			which = append(which, fmt.Sprintf("node %s's %s counts from %s", n.Name, t, n.CountFrom[t].UTC().Format(time.RFC3339)))
		}
	}
	if len(which) == 0 {
		meta.RemoveStatusCondition(conditions, remediationv1alpha1.ConditionTypeConditionTimesUntrusted)
		return
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: remediationv1alpha1.ConditionTypeConditionTimesUntrusted, Status: metav1.ConditionTrue,
		Reason: remediationv1alpha1.ConditionReasonClockOffConditionWriter,
		Message: fmt.Sprintf("%d condition(s) report a lastTransitionTime the operator does not trust (its writer's clock is off by more than the clock-skew bound, or it was dated before the change): "+
			"each counts from when the operator saw it change: %s", len(which), joinBounded(which)),
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}})
}

// stalledMessage says why the node's remediation ended without it being done with.
func stalledMessage(n health.NodeDecision) string {
	if n.Stalled() == health.StallStepsExhausted {
		return fmt.Sprintf("node %s is still unhealthy and every remediation step timed out or failed (check the machine; delete the node to replace it, or its CRs to start again)", n.Name)
	}
	return fmt.Sprintf("node %s is healthy again and its CRs wait for manual confirmation (annotation %s)", n.Name, remediationv1alpha1.ManuallyConfirmedHealthyAnnotation)
}

// setFailureDomainCondition writes FailureDomainUnhealthy while some failure domain is over its
// bound, naming each, and removes it otherwise.
func setFailureDomainCondition(conditions *[]metav1.Condition, nhc *remediationv1alpha1.NodeHealthCheck, d health.Decision, now time.Time) {
	if len(d.DomainsHeld) == 0 {
		meta.RemoveStatusCondition(conditions, remediationv1alpha1.ConditionTypeFailureDomainUnhealthy)
		return
	}
	var why []string
	for _, domain := range slices.Sorted(maps.Keys(d.DomainsHeld)) {
		why = append(why, d.DomainsHeld[domain])
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: remediationv1alpha1.ConditionTypeFailureDomainUnhealthy, Status: metav1.ConditionTrue,
		Reason: remediationv1alpha1.ConditionReasonFailureDomainUnhealthy, Message: strings.Join(why, "; "),
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}})
}

// setStormConditions writes StormActive and StormCooldownActive while storm recovery is on, and
// removes them when it is off.
func setStormConditions(conditions *[]metav1.Condition, nhc *remediationv1alpha1.NodeHealthCheck, d health.Decision, now time.Time) {
	if nhc.Spec.StormCooldownDuration == nil {
		meta.RemoveStatusCondition(conditions, remediationv1alpha1.ConditionTypeStormActive)
		meta.RemoveStatusCondition(conditions, remediationv1alpha1.ConditionTypeStormCooldownActive)
		return
	}
	cooldown := nhc.Spec.StormCooldownDuration.Duration
	active := metav1.Condition{Type: remediationv1alpha1.ConditionTypeStormActive, Status: metav1.ConditionFalse,
		Reason: remediationv1alpha1.ConditionReasonHealthyNodeThresholdChange, Message: "The healthy-node threshold holds",
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}}
	cooling := metav1.Condition{Type: remediationv1alpha1.ConditionTypeStormCooldownActive, Status: metav1.ConditionFalse,
		Reason: remediationv1alpha1.ConditionReasonHealthyNodeThresholdChange, Message: "No storm cooldown runs",
		ObservedGeneration: nhc.Generation, LastTransitionTime: metav1.Time{Time: now}}
	if d.Storm.Active {
		active.Status = metav1.ConditionTrue
		active.Message = fmt.Sprintf("The healthy-node threshold was violated (%d of %d healthy, %d required); no new remediation starts", d.Healthy, d.Observed, d.MinHealthy)
	}
	if d.Storm.Cooling() {
		cooling.Status = metav1.ConditionTrue
		cooling.LastTransitionTime = metav1.Time{Time: d.Storm.CooldownSince}
		cooling.Message = fmt.Sprintf("The threshold holds again; remediation resumes at %s unless it is violated before", d.Storm.CooldownSince.Add(cooldown).UTC().Format(time.RFC3339))
	}
	meta.SetStatusCondition(conditions, active)
	meta.SetStatusCondition(conditions, cooling)
}

// maxNamedSkips bounds how many skipped nodes the reason names, so it stays readable in
// `kubectl get nhc`; the count covers the rest.
const maxNamedSkips = 5

// heldNote lists the running remediations whose escalation is due but held, and why.
func heldNote(held []health.NodeDecision) string {
	if len(held) == 0 {
		return ""
	}
	var parts []string
	for i, n := range held {
		if i == maxNamedSkips {
			parts = append(parts, fmt.Sprintf("and %d more", len(held)-maxNamedSkips))
			break
		}
		parts = append(parts, n.SkipMessage)
	}
	return fmt.Sprintf("; %d escalation(s) held: %s", len(held), strings.Join(parts, ", "))
}

// skippedNote lists the unhealthy nodes that are not remediated, and why.
func skippedNote(skipped []health.NodeDecision) string {
	if len(skipped) == 0 {
		return ""
	}
	var parts []string
	for i, n := range skipped {
		if i == maxNamedSkips {
			parts = append(parts, fmt.Sprintf("and %d more", len(skipped)-maxNamedSkips))
			break
		}
		// Budget and pause reasons are the same for every node: say them once.
		if i > 0 && n.SkipMessage == skipped[0].SkipMessage {
			parts = append(parts, n.Name)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", n.Name, n.SkipMessage))
	}
	return fmt.Sprintf("; %d unhealthy node(s) not remediated: %s", len(skipped), strings.Join(parts, ", "))
}

// capitalize returns the note with its first letter in upper case.
func capitalize(note string) string {
	if note == "" {
		return note
	}
	return strings.ToUpper(note[:1]) + note[1:]
}

// nextSimulated returns the node's simulated remediations after the decision, as the active
// NodeHealthCheck's CRs would be after it acted: a start adds the first step, a running
// remediation escalates (timing out the step and adding the next), a healthy delay keeps them, a
// recovery ends them. Nil when dry-run is off or the node has real CRs (created before dry-run).
func nextSimulated(snap *targets.Snapshot, d health.NodeDecision) []remediationv1alpha1.DryRunRemediation {
	if !snap.DryRun() || len(snap.CRs[d.Name]) > 0 {
		return nil
	}
	old := snap.Simulated(d.Name)
	now := metav1.Time{Time: snap.Now}
	switch d.Action {
	case health.StartRemediation:
		if d.Step == nil {
			return nil
		}
		return []remediationv1alpha1.DryRunRemediation{{Template: d.Step.Template, Started: now}}
	case health.ContinueRemediation:
		if len(old) == 0 {
			return nil
		}
		// The decision's escalation over the simulated steps: held as an active one's would be.
		e := d.Escalation
		out := slices.Clone(old)
		for _, i := range e.TimeOut {
			out[i].TimedOut = &now
		}
		if e.Next != nil {
			out = append(out, remediationv1alpha1.DryRunRemediation{Template: e.Next.Template, Started: now})
		}
		return out
	case health.HealthyDelayed:
		return old
	}
	return nil
}

// repairHistory returns status.remediationHistory (or dryRunRemediationHistory) after the decision:
// the counted starts of every selected node that has any (nil without a repair budget, and for the
// simulated ones when dry-run is off: the record ends with it). Starts are stored at the API's
// precision (whole seconds), as read back.
func repairHistory(nodes []*corev1.Node, repairs map[string][]time.Time) []remediationv1alpha1.NodeRemediationHistory {
	var out []remediationv1alpha1.NodeRemediationHistory
	for _, n := range nodes {
		starts := repairs[n.Name]
		if len(starts) == 0 {
			continue
		}
		h := remediationv1alpha1.NodeRemediationHistory{Name: n.Name}
		for _, t := range starts {
			h.Started = append(h.Started, metav1.Time{Time: t.Truncate(time.Second)})
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b remediationv1alpha1.NodeRemediationHistory) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// maxOverlapsNamed bounds the NodeHealthChecks an overlap message names.
const maxOverlapsNamed = 10

// overlapMessage says which other NodeHealthChecks select some of the same nodes, and what follows.
func overlapMessage(overlaps []health.Overlap) string {
	parts := make([]string, 0, min(len(overlaps), maxOverlapsNamed)+1)
	for _, o := range overlaps[:min(len(overlaps), maxOverlapsNamed)] {
		parts = append(parts, fmt.Sprintf("%s (%d node(s))", o.NHC, o.Nodes))
	}
	if len(overlaps) > maxOverlapsNamed {
		parts = append(parts, fmt.Sprintf("and %d more", len(overlaps)-maxOverlapsNamed))
	}
	return "Selects nodes that other NodeHealthChecks select too: " + strings.Join(parts, ", ") +
		"; a node both select is remediated by the one that takes its node lease first, the other holds back meanwhile"
}

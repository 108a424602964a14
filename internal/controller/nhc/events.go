package nhc

import (
	"time"

	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

// emitTransitionEvents emits events for what changed between the old and new status: the Disabled
// condition flipping, nodes newly listed as unhealthy, and a new reason for skipping.
func (r *Reconciler) emitTransitionEvents(old, updated *remediationv1alpha1.NodeHealthCheck, d health.Decision) {
	was := meta.FindStatusCondition(old.Status.Conditions, remediationv1alpha1.ConditionTypeDisabled)
	now := meta.FindStatusCondition(updated.Status.Conditions, remediationv1alpha1.ConditionTypeDisabled)
	if now != nil && (was == nil || was.Status != now.Status) {
		if now.Status == "True" {
			r.Recorder.Eventf(updated, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonDisabled, "Disable", "%s", now.Message)
		} else if was != nil {
			r.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, remediationv1alpha1.EventReasonEnabled, "Enable", "%s", now.Message)
		}
	}

	r.emitUpgradeEvents(old, updated)

	if c := meta.FindStatusCondition(updated.Status.Conditions, remediationv1alpha1.ConditionTypeMachineHealthCheckOverlap); c != nil &&
		meta.FindStatusCondition(old.Status.Conditions, remediationv1alpha1.ConditionTypeMachineHealthCheckOverlap) == nil {
		r.Recorder.Eventf(updated, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonConflictingMachineHealthCheck, "Overlap", "%s", c.Message)
	}
	if c := meta.FindStatusCondition(updated.Status.Conditions, remediationv1alpha1.ConditionTypeSelectorOverlap); c != nil &&
		meta.FindStatusCondition(old.Status.Conditions, remediationv1alpha1.ConditionTypeSelectorOverlap) == nil {
		r.Recorder.Eventf(updated, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonSelectorOverlap, "Overlap", "%s", c.Message)
	}

	// A node newly listed as unhealthy, whether or not its remediation may start, and also when the
	// remediation controller created its CR before this status write (the public operator's note on
	// the NodeHealthCheck, and one on the node).
	listed := map[string]bool{}
	for _, n := range old.Status.UnhealthyNodes {
		listed[n.Name] = true
	}
	for _, n := range d.Nodes {
		if listed[n.Name] || !n.Listed() || n.Action == health.Recovered || n.Action == health.HealthyDelayed {
			continue
		}
		m := n.Health.Matched
		// Related to the node: one series per node (see remediation's nodeRelatedEvent).
		related := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		if m.Type == "" && !n.Health.Requested.IsZero() {
			// Unhealthy only because its remediation was requested (the node's own event said so).
			r.Recorder.Eventf(updated, related, corev1.EventTypeNormal, remediationv1alpha1.EventReasonDetectedUnhealthy, "Detect",
				"Node %q counts as unhealthy: its remediation was requested at %s", n.Name, n.Health.Requested.UTC().Format(time.RFC3339))
			continue
		}
		r.Recorder.Eventf(updated, related, corev1.EventTypeNormal, remediationv1alpha1.EventReasonDetectedUnhealthy, "Detect",
			"Node matches unhealthy condition. Node %q, condition type %q, condition status %q", n.Name, m.Type, m.Status)
	}

	// A remediation a dry-run NodeHealthCheck would newly have created: each new simulated step.
	simulated := map[string]int{}
	for _, n := range old.Status.UnhealthyNodes {
		simulated[n.Name] = len(n.DryRunRemediations)
	}
	for _, n := range updated.Status.UnhealthyNodes {
		for i := simulated[n.Name]; i < len(n.DryRunRemediations); i++ {
			t, what := n.DryRunRemediations[i].Template, "remediate node %s with %s %s/%s"
			if i > 0 {
				what = "escalate node %s to %s %s/%s"
			}
			r.Recorder.Eventf(updated, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}, corev1.EventTypeNormal, remediationv1alpha1.EventReasonWouldRemediate, "DryRun",
				"Dry run: would %s; no remediation CR is created", fmt.Sprintf(what, n.Name, t.Kind, t.Namespace, t.Name))
		}
	}

	wasStorm, isStorm := targets.StormState(old.Status.Conditions), targets.StormState(updated.Status.Conditions)
	switch {
	case isStorm.Active && !wasStorm.Active:
		r.Recorder.Eventf(updated, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonStormRecoveryStarted, "Storm",
			"Storm recovery started: %d of %d selected nodes are healthy, %d required; no new remediation starts", d.Healthy, d.Observed, d.MinHealthy)
	case isStorm.Cooling() && !wasStorm.Cooling():
		r.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, remediationv1alpha1.EventReasonStormRecoveryCooldownStarted, "Storm",
			"The healthy-node threshold holds again; storm cooldown of %s started", updated.Spec.StormCooldownDuration.Duration)
	case wasStorm.Active && !isStorm.Active:
		r.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, remediationv1alpha1.EventReasonStormRecoveryEnded, "Storm", "Storm recovery ended; remediation resumes")
	}

	if skipped := d.Skipped(); len(skipped) > 0 && old.Status.Reason != updated.Status.Reason {
		r.Recorder.Eventf(updated, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationSkipped, "Skip",
			"Skipped remediation of %d unhealthy node(s) (%s): %s", len(skipped), skipped[0].SkipReason, skipped[0].SkipMessage)
	}
	if held := d.Held(); len(held) > 0 && old.Status.Reason != updated.Status.Reason {
		r.Recorder.Eventf(updated, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationSkipped, "HoldEscalation",
			"Held the escalation of %d running remediation(s) (%s): %s; the running CRs continue", len(held), held[0].SkipReason, held[0].SkipMessage)
	}
}

// emitSkewEvents reports the ClockSkewExceeded condition's transitions into and out of True, with
// the skew as measured.
func (r *Reconciler) emitSkewEvents(old, updated *remediationv1alpha1.NodeHealthCheck, v *clockskew.Verdict) {
	if v == nil {
		return
	}
	was := meta.IsStatusConditionTrue(old.Status.Conditions, remediationv1alpha1.ConditionTypeClockSkewExceeded)
	is := meta.IsStatusConditionTrue(updated.Status.Conditions, remediationv1alpha1.ConditionTypeClockSkewExceeded)
	switch {
	case is && !was:
		r.Recorder.Eventf(updated, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonClockSkewExceeded, "HoldForClockSkew",
			"%s: no remediation starts or escalates until the clocks agree again", v.Message)
	case was && !is:
		r.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, remediationv1alpha1.EventReasonClockSkewResolved, "Resume",
			"%s; remediation resumes", v.Message)
	}
}

// emitUpgradeEvents reports the UpgradeInProgress condition's transitions into and out of True.
// Unknown, which the condition is only briefly after the operator starts, makes no event.
func (r *Reconciler) emitUpgradeEvents(old, updated *remediationv1alpha1.NodeHealthCheck) {
	was := meta.FindStatusCondition(old.Status.Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress)
	now := meta.FindStatusCondition(updated.Status.Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress)
	wasTrue := was != nil && was.Status == metav1.ConditionTrue
	switch {
	case now == nil:
	case now.Status == metav1.ConditionTrue && !wasTrue:
		r.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, remediationv1alpha1.EventReasonUpgradeDetected, "PauseForUpgrade", "%s", now.Message)
	case now.Reason == remediationv1alpha1.ConditionReasonUpgradePauseExpired && (was == nil || was.Reason != now.Reason):
		r.Recorder.Eventf(updated, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonUpgradePauseExpired, "ResumeAfterMaxPause", "%s", now.Message)
	case now.Status == metav1.ConditionFalse && wasTrue:
		r.Recorder.Eventf(updated, nil, corev1.EventTypeNormal, remediationv1alpha1.EventReasonUpgradeEnded, "Resume", "No upgrade signal is seen any more; remediation resumes")
	}
}

// reportRepairBudget keeps MetricRepairBudgetExhausted current and emits a RepairBudgetExhausted
// warning (on the NodeHealthCheck, related to the node) for each node the repair budget newly holds
// back.
func (r *Reconciler) reportRepairBudget(snap *targets.Snapshot) {
	held := map[string]string{}
	for _, n := range snap.Decision.Nodes {
		if n.Action == health.Skip && n.SkipReason == health.SkipRepairBudget {
			held[n.Name] = n.SkipMessage
		}
	}
	for _, node := range r.metrics.syncExhausted(snap.Stored.Name, held) {
		r.Recorder.Eventf(snap.Stored, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRepairBudgetExhausted, "RepairBudget",
			"Not remediated: %s", held[node])
	}
}

// reportStalled keeps MetricRemediationStalled current and emits a RemediationStalled warning (on
// the NodeHealthCheck, related to the node) for each node whose remediation newly stalled.
func (r *Reconciler) reportStalled(snap *targets.Snapshot) {
	stalled := map[string]string{}
	for _, n := range snap.Decision.Stalled() {
		stalled[n.Name] = stalledMessage(n)
	}
	for _, node := range r.metrics.syncStalled(snap.Stored.Name, stalled) {
		r.Recorder.Eventf(snap.Stored, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeWarning, remediationv1alpha1.EventReasonRemediationStalled, "Stall",
			"%s; it holds no maxInFlight slot", capitalize(stalled[node]))
	}
}

// reportFailureDomains keeps MetricFailureDomainUnhealthy current and emits a FailureDomainUnhealthy
// warning for each failure domain that newly holds more unhealthy nodes than its bound.
func (r *Reconciler) reportFailureDomains(snap *targets.Snapshot) {
	held := snap.Decision.DomainsHeld
	for _, domain := range r.metrics.syncDomains(snap.Stored.Name, held) {
		r.Recorder.Eventf(snap.Stored, nil, corev1.EventTypeWarning, remediationv1alpha1.EventReasonFailureDomainUnhealthy, "HoldDomain",
			"No new remediation starts %s", held[domain])
	}
}

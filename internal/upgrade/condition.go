package upgrade

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// ConditionInput is what one NodeHealthCheck's UpgradeInProgress condition depends on.
type ConditionInput struct {
	// Known is false while the gate is unknown; Pending then says why.
	Known   bool
	Pending string
	// Signals hold new remediations back: the gate's cluster-wide ones, then the NodeHealthCheck's
	// node-level ones.
	Signals []Signal
	// MaxPause bounds how long signals hold remediation back; zero: no bound.
	MaxPause time.Duration
	// Previous is the condition in the stored status (nil when none). Its lastTransitionTime is when
	// the pause began, so the bound holds across operator restarts.
	Previous *metav1.Condition
	// Now is the current time; Generation the NodeHealthCheck's.
	Now        time.Time
	Generation int64
}

// Outcome is the condition and what it means for new remediations.
type Outcome struct {
	// Condition is the UpgradeInProgress condition to store.
	Condition metav1.Condition
	// Blocked is set when new remediations must not start; its text says why.
	Blocked string
	// Expires is when the maximum pause ends, while signals block; zero otherwise. Controllers look
	// again then.
	Expires time.Time
}

// Condition decides UpgradeInProgress:
//   - unknown gate: Unknown, blocked; a stored True condition (or an expired pause) is kept as it is,
//     so an operator restart does not restart the maximum pause;
//   - no signal: False (NoUpgradeDetected);
//   - signals: True with the first signal's reason and every signal's message, blocked, until the
//     maximum pause has passed since it became True; then False (UpgradePauseExpired), not blocked,
//     for as long as signals are seen.
func Condition(in ConditionInput) Outcome {
	c := metav1.Condition{Type: remediationv1alpha1.ConditionTypeUpgradeInProgress, ObservedGeneration: in.Generation,
		LastTransitionTime: metav1.Time{Time: in.Now}}
	prev := in.Previous
	prevTrue := prev != nil && prev.Status == metav1.ConditionTrue
	prevExpired := prev != nil && prev.Status == metav1.ConditionFalse && prev.Reason == remediationv1alpha1.ConditionReasonUpgradePauseExpired

	if !in.Known {
		blocked := "the upgrade state is not known yet: " + in.Pending
		if prevTrue || prevExpired {
			kept := *prev
			kept.ObservedGeneration = in.Generation
			return Outcome{Condition: kept, Blocked: blocked}
		}
		c.Status, c.Reason = metav1.ConditionUnknown, remediationv1alpha1.ConditionReasonUpgradeUnknown
		c.Message = "No new remediation starts until the upgrade signals have been evaluated: " + in.Pending
		return Outcome{Condition: c, Blocked: blocked}
	}
	if len(in.Signals) == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, remediationv1alpha1.ConditionReasonNoUpgrade, "No upgrade in progress"
		return Outcome{Condition: c}
	}

	msgs := make([]string, 0, len(in.Signals))
	for _, s := range in.Signals {
		msgs = append(msgs, s.Message)
	}
	seen := strings.Join(msgs, "; ")
	since := in.Now
	if prevTrue {
		since = prev.LastTransitionTime.Time
	}
	if in.MaxPause > 0 && (prevExpired || !in.Now.Before(since.Add(in.MaxPause))) {
		c.Status, c.Reason = metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired
		c.Message = fmt.Sprintf("Upgrade signals held remediation back for the maximum pause of %s; remediation resumed although they are still seen: %s", in.MaxPause, seen)
		if prevExpired {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		return Outcome{Condition: c}
	}
	c.Status, c.Reason, c.LastTransitionTime = metav1.ConditionTrue, in.Signals[0].Reason, metav1.Time{Time: since}
	c.Message = "No new remediation starts while an upgrade is in progress: " + seen
	out := Outcome{Condition: c, Blocked: "cluster upgrade in progress: " + seen}
	if in.MaxPause > 0 {
		out.Expires = since.Add(in.MaxPause)
	}
	return out
}

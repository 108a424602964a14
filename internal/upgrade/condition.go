package upgrade

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// ConditionInput is what one NodeHealthCheck's UpgradeInProgress condition depends on.
type ConditionInput struct {
	// Known is false while the gate is unknown; Pending then says why.
	Known   bool
	Pending string
	// Signals are the upgrade signals seen, each with when it began (Since): the gate's cluster-wide
	// ones, then the NodeHealthCheck's node-level ones.
	Signals []Signal
	// MaxPause bounds how long each signal holds remediation back, from its Since; zero: no bound. The
	// explicit pause object's signal is not bounded.
	MaxPause time.Duration
	// Previous is the condition in the stored status (nil when none): kept while the gate is unknown,
	// and its lastTransitionTime while the status does not change.
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
	// Expires is the earliest end of a maximum pause among the signals that block; zero when none
	// will end. Controllers look again then.
	Expires time.Time
}

// maxNamedSignals bounds how many signals a condition message names: a Cluster API upgrade rolls out
// every MachineDeployment at once, and the message stays readable.
const maxNamedSignals = 5

// Condition decides UpgradeInProgress. Each signal blocks new remediations until the maximum pause
// has passed since it began (Signal.Blocks); the pause object's blocks for as long as it exists.
//   - unknown gate: Unknown, blocked; a stored True condition (or an expired pause) is kept as it is;
//   - no signal: False (NoUpgradeDetected);
//   - a signal blocks: True with the reason of the first that blocks, blocked; the message names the
//     blocking signals with the end of their maximum pause, and the expired ones; Expires is the
//     earliest end among the blocking ones. A signal that appears after others expired blocks for
//     its own full maximum pause;
//   - every signal seen has expired: False (UpgradePauseExpired), not blocked.
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

	var blocking, expired, withEnd []string
	var out Outcome
	for _, s := range in.Signals {
		if !s.Blocks(in.MaxPause, in.Now) {
			expired = append(expired, s.Message)
			continue
		}
		if len(blocking) == 0 {
			c.Reason = s.Reason
		}
		blocking = append(blocking, s.Message)
		at := s.Expires(in.MaxPause, in.Now)
		if at.IsZero() {
			withEnd = append(withEnd, s.Message)
			continue
		}
		withEnd = append(withEnd, fmt.Sprintf("%s (until %s at the latest)", s.Message, at.UTC().Format(time.RFC3339)))
		out.Expires = health.Earliest(out.Expires, at)
	}
	if len(blocking) == 0 {
		c.Status, c.Reason = metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired
		c.Message = fmt.Sprintf("Upgrade signals held remediation back for the maximum pause of %s; remediation resumed although they are still seen: %s",
			in.MaxPause, describe(expired))
		if prevExpired {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		return Outcome{Condition: c}
	}
	c.Status = metav1.ConditionTrue
	if prevTrue {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	c.Message = "No new remediation starts while an upgrade is in progress: " + describe(withEnd)
	if len(expired) > 0 {
		c.Message += fmt.Sprintf(". The maximum pause of %s has passed for: %s", in.MaxPause, describe(expired))
	}
	out.Condition, out.Blocked = c, "cluster upgrade in progress: "+describe(blocking)
	return out
}

// describe joins signal messages, naming at most maxNamedSignals.
func describe(msgs []string) string {
	if len(msgs) > maxNamedSignals {
		msgs = append(msgs[:maxNamedSignals:maxNamedSignals], fmt.Sprintf("and %d more", len(msgs)-maxNamedSignals))
	}
	return strings.Join(msgs, "; ")
}

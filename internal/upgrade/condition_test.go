package upgrade

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

var (
	t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cv = Signal{Detector: DetectorClusterVersion, Reason: remediationv1alpha1.ConditionReasonClusterVersionProgressing, Message: "ClusterVersion version is progressing"}
	np = Signal{Detector: DetectorNodeRollout, Reason: remediationv1alpha1.ConditionReasonNodeRollingUpgrade, Message: "selected nodes run kubelet minor versions"}
)

func cond(status metav1.ConditionStatus, reason string, since time.Time) *metav1.Condition {
	return &metav1.Condition{Type: remediationv1alpha1.ConditionTypeUpgradeInProgress, Status: status, Reason: reason, Message: "stored", LastTransitionTime: metav1.Time{Time: since}}
}

func TestCondition(t *testing.T) {
	const maxPause = time.Hour
	tests := []struct {
		name        string
		in          ConditionInput
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantSince   time.Time
		wantBlocked bool
		wantExpires time.Time
	}{
		{name: "unknown at start blocks", in: ConditionInput{Pending: "clusterversion: not evaluated yet"},
			wantStatus: metav1.ConditionUnknown, wantReason: remediationv1alpha1.ConditionReasonUpgradeUnknown, wantSince: t0, wantBlocked: true},
		{name: "unknown after a restart keeps a True condition and its start", in: ConditionInput{Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-30*time.Minute))},
			wantStatus: metav1.ConditionTrue, wantReason: cv.Reason, wantSince: t0.Add(-30 * time.Minute), wantBlocked: true},
		{name: "unknown after a restart keeps an expired pause, and blocks", in: ConditionInput{Previous: cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired, t0.Add(-time.Minute))},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0.Add(-time.Minute), wantBlocked: true},
		{name: "unknown after False", in: ConditionInput{Previous: cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonNoUpgrade, t0.Add(-time.Hour))},
			wantStatus: metav1.ConditionUnknown, wantReason: remediationv1alpha1.ConditionReasonUpgradeUnknown, wantSince: t0, wantBlocked: true},
		{name: "no signal", in: ConditionInput{Known: true},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonNoUpgrade, wantSince: t0},
		{name: "a signal blocks, reason of the first", in: ConditionInput{Known: true, Signals: []Signal{cv, np}},
			wantStatus: metav1.ConditionTrue, wantReason: cv.Reason, wantSince: t0, wantBlocked: true},
		{name: "with a maximum pause, it says when it ends", in: ConditionInput{Known: true, Signals: []Signal{np}, MaxPause: maxPause},
			wantStatus: metav1.ConditionTrue, wantReason: np.Reason, wantSince: t0, wantBlocked: true, wantExpires: t0.Add(maxPause)},
		{name: "the pause runs from when it began", in: ConditionInput{Known: true, Signals: []Signal{cv}, MaxPause: maxPause, Previous: cond(metav1.ConditionTrue, np.Reason, t0.Add(-59*time.Minute))},
			wantStatus: metav1.ConditionTrue, wantReason: cv.Reason, wantSince: t0.Add(-59 * time.Minute), wantBlocked: true, wantExpires: t0.Add(time.Minute)},
		{name: "the maximum pause passed: resume", in: ConditionInput{Known: true, Signals: []Signal{cv}, MaxPause: maxPause, Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-maxPause))},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0},
		{name: "an expired pause stays expired while signals are seen", in: ConditionInput{Known: true, Signals: []Signal{cv}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired, t0.Add(-5*time.Hour))},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0.Add(-5 * time.Hour)},
		{name: "an expired pause ends when signals are gone", in: ConditionInput{Known: true, MaxPause: maxPause,
			Previous: cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired, t0.Add(-5*time.Hour))},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonNoUpgrade, wantSince: t0},
		{name: "without a maximum pause, an earlier expiry does not hold", in: ConditionInput{Known: true, Signals: []Signal{cv},
			Previous: cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired, t0.Add(-5*time.Hour))},
			wantStatus: metav1.ConditionTrue, wantReason: cv.Reason, wantSince: t0, wantBlocked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now, tt.in.Generation = t0, 3
			out := Condition(tt.in)
			c := out.Condition
			if c.Type != remediationv1alpha1.ConditionTypeUpgradeInProgress || c.Status != tt.wantStatus || c.Reason != tt.wantReason {
				t.Errorf("condition %s=%s (%s), want %s (%s)", c.Type, c.Status, c.Reason, tt.wantStatus, tt.wantReason)
			}
			if !c.LastTransitionTime.Time.Equal(tt.wantSince) {
				t.Errorf("lastTransitionTime %s, want %s", c.LastTransitionTime, tt.wantSince)
			}
			if (out.Blocked != "") != tt.wantBlocked {
				t.Errorf("blocked %q, want blocked=%v", out.Blocked, tt.wantBlocked)
			}
			if !out.Expires.Equal(tt.wantExpires) {
				t.Errorf("expires %s, want %s", out.Expires, tt.wantExpires)
			}
			if c.ObservedGeneration != 3 || c.Message == "" {
				t.Errorf("generation %d, message %q", c.ObservedGeneration, c.Message)
			}
			for _, s := range tt.in.Signals {
				if tt.in.Known && !strings.Contains(c.Message, s.Message) {
					t.Errorf("message %q does not name signal %q", c.Message, s.Message)
				}
			}
		})
	}
}

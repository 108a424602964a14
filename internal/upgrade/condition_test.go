package upgrade

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

var (
	t0    = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cv    = Signal{Detector: DetectorClusterVersion, Reason: remediationv1alpha1.ConditionReasonClusterVersionProgressing, Message: "ClusterVersion version is progressing"}
	np    = Signal{Detector: DetectorNodeRollout, Reason: remediationv1alpha1.ConditionReasonNodeRollingUpgrade, Message: "selected nodes run kubelet minor versions"}
	capi  = Signal{Detector: DetectorClusterAPI, Reason: remediationv1alpha1.ConditionReasonClusterAPIRollout, Message: "Cluster API rolls out MachineDeployment ns/md"}
	pause = Signal{Detector: DetectorPauseObject, Reason: remediationv1alpha1.ConditionReasonPauseObject, Message: "pause ConfigMap ns/pause exists", Explicit: true}
)

func cond(status metav1.ConditionStatus, reason string, since time.Time) *metav1.Condition {
	return &metav1.Condition{Type: remediationv1alpha1.ConditionTypeUpgradeInProgress, Status: status, Reason: reason, Message: "stored", LastTransitionTime: metav1.Time{Time: since}}
}

// began returns the signal as begun ago before t0.
func began(s Signal, ago time.Duration) Signal {
	s.Since = t0.Add(-ago)
	return s
}

func TestCondition(t *testing.T) {
	const maxPause = time.Hour
	expired := cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired, t0.Add(-5*time.Hour))
	tests := []struct {
		name        string
		in          ConditionInput
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantSince   time.Time
		wantBlocked bool
		wantExpires time.Time
		// wantMessage are parts of the condition message.
		wantMessage []string
	}{
		{name: "unknown at start blocks", in: ConditionInput{Pending: "clusterversion: not evaluated yet"},
			wantStatus: metav1.ConditionUnknown, wantReason: remediationv1alpha1.ConditionReasonUpgradeUnknown, wantSince: t0, wantBlocked: true},
		{name: "unknown after a restart keeps a True condition and its start", in: ConditionInput{Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-30*time.Minute)), MaxPause: maxPause},
			wantStatus: metav1.ConditionTrue, wantReason: cv.Reason, wantSince: t0.Add(-30 * time.Minute), wantBlocked: true},
		{name: "unknown after a restart keeps an expired pause, and blocks", in: ConditionInput{Previous: cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired, t0.Add(-time.Minute))},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0.Add(-time.Minute), wantBlocked: true},
		{name: "unknown after False", in: ConditionInput{Previous: cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonNoUpgrade, t0.Add(-time.Hour))},
			wantStatus: metav1.ConditionUnknown, wantReason: remediationv1alpha1.ConditionReasonUpgradeUnknown, wantSince: t0, wantBlocked: true},
		{name: "no signal", in: ConditionInput{Known: true},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonNoUpgrade, wantSince: t0},
		{name: "a signal blocks, reason of the first", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 10*time.Hour), began(np, 0)}},
			wantStatus: metav1.ConditionTrue, wantReason: cv.Reason, wantSince: t0, wantBlocked: true},
		{name: "with a maximum pause, it says when it ends", in: ConditionInput{Known: true, Signals: []Signal{began(np, 0)}, MaxPause: maxPause},
			wantStatus: metav1.ConditionTrue, wantReason: np.Reason, wantSince: t0, wantBlocked: true, wantExpires: t0.Add(maxPause),
			wantMessage: []string{"until 2026-11-22T13:00:00Z at the latest"}},
		{name: "a signal without a start blocks as if it began now", in: ConditionInput{Known: true, Signals: []Signal{np}, MaxPause: maxPause},
			wantStatus: metav1.ConditionTrue, wantReason: np.Reason, wantSince: t0, wantBlocked: true, wantExpires: t0.Add(maxPause)},
		{name: "the pause runs from when the signal began, not from the condition", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 59*time.Minute)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-5*time.Minute))},
			wantStatus: metav1.ConditionTrue, wantReason: cv.Reason, wantSince: t0.Add(-5 * time.Minute), wantBlocked: true, wantExpires: t0.Add(time.Minute)},
		{name: "the maximum pause of the only signal passed: resume", in: ConditionInput{Known: true, Signals: []Signal{began(cv, maxPause)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-maxPause))},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0,
			wantMessage: []string{"maximum pause of 1h0m0s", cv.Message}},

		// Two signals with different starts expire separately.
		{name: "two signals: the earliest end is when to look again", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 50*time.Minute), began(capi, 10*time.Minute)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-50*time.Minute))},
			wantStatus: metav1.ConditionTrue, wantReason: cv.Reason, wantSince: t0.Add(-50 * time.Minute), wantBlocked: true, wantExpires: t0.Add(10 * time.Minute),
			wantMessage: []string{"until 2026-11-22T12:10:00Z", "until 2026-11-22T12:50:00Z"}},
		{name: "two signals: the first expired, the second still blocks with its own end", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 70*time.Minute), began(capi, 10*time.Minute)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-70*time.Minute))},
			wantStatus: metav1.ConditionTrue, wantReason: capi.Reason, wantSince: t0.Add(-70 * time.Minute), wantBlocked: true, wantExpires: t0.Add(50 * time.Minute),
			wantMessage: []string{"The maximum pause of 1h0m0s has passed for: " + cv.Message}},
		{name: "two signals: both expired", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 2*time.Hour), began(capi, maxPause)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-2*time.Hour))},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0},

		// A new signal after an expiry pauses again, for its own full maximum pause.
		{name: "an expired pause stays expired while only expired signals are seen", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 5*time.Hour)}, MaxPause: maxPause, Previous: expired},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0.Add(-5 * time.Hour)},
		{name: "a new signal after an expiry pauses again", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 5*time.Hour), began(capi, 0)}, MaxPause: maxPause, Previous: expired},
			wantStatus: metav1.ConditionTrue, wantReason: capi.Reason, wantSince: t0, wantBlocked: true, wantExpires: t0.Add(maxPause)},
		{name: "the same detector's new signal after an expiry pauses again", in: ConditionInput{Known: true, MaxPause: maxPause, Previous: expired,
			Signals: []Signal{began(capi, 5*time.Hour), began(capi, 59*time.Minute)}},
			wantStatus: metav1.ConditionTrue, wantReason: capi.Reason, wantSince: t0, wantBlocked: true, wantExpires: t0.Add(time.Minute)},
		{name: "an expired pause ends when signals are gone", in: ConditionInput{Known: true, MaxPause: maxPause, Previous: expired},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonNoUpgrade, wantSince: t0},
		{name: "a signal that has been seen longer than the maximum pause already does not pause", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 3*time.Hour)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonNoUpgrade, t0.Add(-time.Hour))},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0},

		// The pause object never expires.
		{name: "the pause object blocks beyond the maximum pause", in: ConditionInput{Known: true, Signals: []Signal{began(pause, 5*time.Hour)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionTrue, pause.Reason, t0.Add(-5*time.Hour))},
			wantStatus: metav1.ConditionTrue, wantReason: pause.Reason, wantSince: t0.Add(-5 * time.Hour), wantBlocked: true},
		{name: "the pause object blocks while the other signals expire", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 5*time.Hour), began(pause, 5*time.Hour)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionTrue, cv.Reason, t0.Add(-5*time.Hour))},
			wantStatus: metav1.ConditionTrue, wantReason: pause.Reason, wantSince: t0.Add(-5 * time.Hour), wantBlocked: true,
			wantMessage: []string{"has passed for: " + cv.Message}},
		{name: "the pause object after an expiry blocks", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 5*time.Hour), began(pause, 0)}, MaxPause: maxPause, Previous: expired},
			wantStatus: metav1.ConditionTrue, wantReason: pause.Reason, wantSince: t0, wantBlocked: true},
		{name: "with the pause object, a bounded signal still says when it ends", in: ConditionInput{Known: true, Signals: []Signal{began(capi, 20*time.Minute), began(pause, 5*time.Hour)}, MaxPause: maxPause},
			wantStatus: metav1.ConditionTrue, wantReason: capi.Reason, wantSince: t0, wantBlocked: true, wantExpires: t0.Add(40 * time.Minute)},

		// Restart: a memory-only signal starts anew when the operator first sees it again; a
		// signal whose object tells its start does not.
		{name: "after a restart a memory-only signal pauses again for the full maximum", in: ConditionInput{Known: true, Signals: []Signal{began(capi, 0)}, MaxPause: maxPause,
			Previous: cond(metav1.ConditionTrue, capi.Reason, t0.Add(-55*time.Minute))},
			wantStatus: metav1.ConditionTrue, wantReason: capi.Reason, wantSince: t0.Add(-55 * time.Minute), wantBlocked: true, wantExpires: t0.Add(maxPause)},
		{name: "after a restart an expired memory-only signal pauses again", in: ConditionInput{Known: true, Signals: []Signal{began(capi, 0)}, MaxPause: maxPause, Previous: expired},
			wantStatus: metav1.ConditionTrue, wantReason: capi.Reason, wantSince: t0, wantBlocked: true, wantExpires: t0.Add(maxPause)},
		{name: "after a restart a signal with its start from its object keeps its end", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 2*time.Hour)}, MaxPause: maxPause, Previous: expired},
			wantStatus: metav1.ConditionFalse, wantReason: remediationv1alpha1.ConditionReasonUpgradePauseExpired, wantSince: t0.Add(-5 * time.Hour)},

		{name: "without a maximum pause nothing expires", in: ConditionInput{Known: true, Signals: []Signal{began(cv, 50*time.Hour)}, Previous: expired},
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
			for _, m := range tt.wantMessage {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q does not say %q", c.Message, m)
				}
			}
		})
	}
}

func TestConditionNamesAFewSignals(t *testing.T) {
	var signals []Signal
	for i := range maxNamedSignals + 3 {
		s := began(capi, 0)
		s.Message = fmt.Sprintf("Cluster API rolls out MachineDeployment ns/md-%d", i)
		s.Object = &corev1.ObjectReference{Kind: "MachineDeployment", Namespace: "ns", Name: fmt.Sprintf("md-%d", i)}
		signals = append(signals, s)
	}
	out := Condition(ConditionInput{Known: true, Signals: signals, MaxPause: time.Hour, Now: t0})
	if !strings.Contains(out.Condition.Message, "md-4") || strings.Contains(out.Condition.Message, "md-5") || !strings.Contains(out.Condition.Message, "and 3 more") {
		t.Errorf("message %q", out.Condition.Message)
	}
	if !strings.Contains(out.Blocked, "and 3 more") {
		t.Errorf("blocked %q", out.Blocked)
	}
}

func TestSignalExpiry(t *testing.T) {
	s := began(cv, 30*time.Minute)
	if at := s.Expires(time.Hour, t0); !at.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("expires %s", at)
	}
	if !s.Blocks(time.Hour, t0.Add(30*time.Minute-time.Nanosecond)) || s.Blocks(time.Hour, t0.Add(30*time.Minute)) {
		t.Error("a signal blocks until, not at, the end of its maximum pause")
	}
	if !s.Blocks(0, t0.Add(100*time.Hour)) || !s.Expires(0, t0).IsZero() {
		t.Error("without a maximum pause a signal never expires")
	}
	p := began(pause, 100*time.Hour)
	if !p.Blocks(time.Hour, t0) || !p.Expires(time.Hour, t0).IsZero() {
		t.Error("the pause object never expires")
	}
}

// FuzzCondition checks the invariants of the per-signal maximum pause on any mix of signals.
func FuzzCondition(f *testing.F) {
	f.Add(true, uint8(3), int64(30), int64(90), int64(0), int64(60), uint8(1))
	f.Add(true, uint8(2), int64(300), int64(-5), int64(61), int64(60), uint8(0))
	f.Add(false, uint8(1), int64(0), int64(0), int64(0), int64(0), uint8(2))
	f.Fuzz(func(t *testing.T, known bool, n uint8, ago1, ago2, ago3, maxMinutes int64, prevKind uint8) {
		maxPause := time.Duration(maxMinutes%(48*60)) * time.Minute
		agos := []int64{ago1, ago2, ago3}
		var signals []Signal
		for i := range int(n % 4) {
			s := []Signal{cv, capi, np, pause}[(i+int(n))%4]
			s.Since = t0.Add(-time.Duration(agos[i%3]%(100*60)) * time.Minute)
			signals = append(signals, s)
		}
		var prev *metav1.Condition
		switch prevKind % 4 {
		case 1:
			prev = cond(metav1.ConditionTrue, cv.Reason, t0.Add(-time.Hour))
		case 2:
			prev = cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonUpgradePauseExpired, t0.Add(-time.Hour))
		case 3:
			prev = cond(metav1.ConditionFalse, remediationv1alpha1.ConditionReasonNoUpgrade, t0.Add(-time.Hour))
		}
		out := Condition(ConditionInput{Known: known, Signals: signals, MaxPause: maxPause, Previous: prev, Now: t0})
		c := out.Condition
		if !known {
			if out.Blocked == "" || !out.Expires.IsZero() {
				t.Fatalf("an unknown gate blocks: %+v", out)
			}
			return
		}
		anyBlocks := slices.ContainsFunc(signals, func(s Signal) bool { return s.Blocks(maxPause, t0) })
		if (c.Status == metav1.ConditionTrue) != anyBlocks || (out.Blocked != "") != anyBlocks {
			t.Fatalf("True and blocked exactly while a signal blocks: %+v, signals %+v", out, signals)
		}
		if slices.ContainsFunc(signals, func(s Signal) bool { return s.Explicit }) && !anyBlocks {
			t.Fatal("the pause object always blocks")
		}
		if len(signals) > 0 && !anyBlocks && c.Reason != remediationv1alpha1.ConditionReasonUpgradePauseExpired {
			t.Fatalf("every signal expired: %+v", c)
		}
		if !out.Expires.IsZero() && (!anyBlocks || !out.Expires.After(t0)) {
			t.Fatalf("expires %s only in the future while blocked", out.Expires)
		}
		for _, s := range signals {
			if at := s.Expires(maxPause, t0); s.Blocks(maxPause, t0) && !at.IsZero() && (out.Expires.IsZero() || at.Before(out.Expires)) {
				t.Fatalf("expires %s is not the earliest end (%s)", out.Expires, at)
			}
		}
	})
}

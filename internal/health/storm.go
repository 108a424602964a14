package health

import "time"

// StormState is storm recovery's state, kept in the StormActive and StormCooldownActive conditions.
type StormState struct {
	// Active is true from a violation of the healthy-node threshold until the cooldown has passed.
	Active bool
	// CooldownSince is when the threshold held again; zero while it is violated or no storm is on.
	CooldownSince time.Time
}

// Cooling reports whether the cooldown runs.
func (s StormState) Cooling() bool { return s.Active && !s.CooldownSince.IsZero() }

// NextStorm advances storm recovery: a violation starts (or restarts) a storm; the threshold
// holding again starts the cooldown; the cooldown passing without a new violation ends the storm.
// It returns the new state, whether new remediations stay blocked, and when the cooldown ends (zero
// when nothing is pending).
func NextStorm(prev StormState, violated bool, cooldown time.Duration, now time.Time) (StormState, bool, time.Time) {
	switch {
	case violated:
		return StormState{Active: true}, true, time.Time{}
	case !prev.Active:
		return StormState{}, false, time.Time{}
	case prev.CooldownSince.IsZero():
		return StormState{Active: true, CooldownSince: now}, cooldown > 0, now.Add(cooldown)
	}
	end := prev.CooldownSince.Add(cooldown)
	if !now.Before(end) {
		return StormState{}, false, time.Time{}
	}
	return prev, true, end
}

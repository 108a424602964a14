package upgrade

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Detector names: metric labels, and how messages name a signal's source.
const (
	// DetectorClusterVersion: OpenShift ClusterVersion Progressing=True (automatic on OpenShift).
	DetectorClusterVersion = "clusterversion"
	// DetectorInfrastructure tells OpenShift (the Infrastructure kind is served), where the
	// MachineConfig node detector is on. Not a signal itself.
	DetectorInfrastructure = "infrastructure"
	// DetectorMachineHealthCheck finds MachineHealthChecks that conflict with NodeHealthCheck
	// (automatic on OpenShift Machine API). Not a signal itself: it disables NodeHealthChecks.
	DetectorMachineHealthCheck = "machinehealthcheck"
	// DetectorClusterAPI: a KubeadmControlPlane or MachineDeployment rolls out (opt-in).
	DetectorClusterAPI = "clusterapi"
	// DetectorPauseObject: the configured pause ConfigMap or Lease exists (opt-in).
	DetectorPauseObject = "pauseobject"
	// DetectorMachineConfig: a node about to be remediated is being updated by the Machine Config
	// Operator (on OpenShift, as for the public operator). Evaluated per NodeHealthCheck.
	DetectorMachineConfig = "machineconfig"
	// DetectorNodeRollout: selected nodes run kubelets of different minor versions and one is
	// cordoned (opt-in). Evaluated per NodeHealthCheck.
	DetectorNodeRollout = "noderollout"
)

// Signal is an upgrade signal that holds the gate closed.
type Signal struct {
	// Detector names the detector that saw it.
	Detector string
	// Reason is the UpgradeInProgress condition reason it sets.
	Reason string
	// Message says what was seen, for an administrator.
	Message string
	// Object is the object that shows it, when there is one; events are emitted on it. A detector's
	// signals are told apart by their objects.
	Object *corev1.ObjectReference
	// Since is when the signal began, from the object that shows it where that has a time (the
	// ClusterVersion's Progressing condition, a Cluster API object's RollingOut condition); zero
	// there, the gate fills in when it first saw the signal (see Gate.Report, Gate.NodeSignals).
	Since time.Time
	// Explicit is set on the pause object's signal: someone asked for the pause, and it holds for as
	// long as the object exists, whatever the maximum pause.
	Explicit bool
}

// Expires returns when the signal stops holding new remediations back under the maximum pause:
// maxPause after it began (a signal without Since as if it began at now); zero when it never does
// (no maximum pause, or the explicit pause object).
func (s Signal) Expires(maxPause time.Duration, now time.Time) time.Time {
	if s.Explicit || maxPause <= 0 {
		return time.Time{}
	}
	since := s.Since
	if since.IsZero() {
		since = now
	}
	return since.Add(maxPause)
}

// Blocks reports whether the signal holds new remediations back at now: until its maximum pause
// has passed (see Expires).
func (s Signal) Blocks(maxPause time.Duration, now time.Time) bool {
	at := s.Expires(maxPause, now)
	return at.IsZero() || now.Before(at)
}

// key tells one detector's signals apart: the same object is the same signal.
func (s Signal) key() string {
	if s.Object == nil {
		return s.Detector
	}
	return s.Detector + "/" + s.Object.Kind + "/" + s.Object.Namespace + "/" + s.Object.Name
}

// stamp returns signals with Since set where it is zero: the Since of the same signal in prev (a
// signal seen before keeps its start), or now (a new one). prev's signals are stamped already.
func stamp(signals, prev []Signal, now time.Time) []Signal {
	if len(signals) == 0 {
		return nil
	}
	out := slices.Clone(signals)
	for i := range out {
		if !out[i].Since.IsZero() {
			continue
		}
		out[i].Since = now
		if j := slices.IndexFunc(prev, func(p Signal) bool { return p.key() == out[i].key() }); j >= 0 {
			out[i].Since = prev[j].Since
		}
	}
	return out
}

// sameSignals reports whether two stamped lists say the same.
func sameSignals(a, b []Signal) bool {
	return slices.EqualFunc(a, b, func(x, y Signal) bool {
		return x.key() == y.key() && x.Reason == y.Reason && x.Message == y.Message && x.Since.Equal(y.Since) && x.Explicit == y.Explicit
	})
}

// MachineHealthChecks is what the MachineHealthCheck detector found.
type MachineHealthChecks struct {
	// Conflict is set while a MachineHealthCheck exists that would remediate the same machines; it
	// says which, and NodeHealthChecks are disabled.
	Conflict string
	// Terminating is set when the only MachineHealthCheck is the default termination handler: nodes
	// whose Terminating condition has this status are left to it.
	Terminating corev1.ConditionStatus
}

// Verdict is the gate's state, as one NodeHealthCheck evaluation reads it.
type Verdict struct {
	// Known is false until every enabled detector has been evaluated once; new remediations are
	// blocked while it is false.
	Known bool
	// Pending says, while the gate is not known, which detectors have not reported yet and why.
	Pending string
	// Closed are the cluster-wide signals seen, in detector order, each with its Since. Whether one
	// still blocks new remediations depends on the maximum pause (Signal.Blocks).
	Closed []Signal
	// OpenShift turns on the MachineConfig node detector: the Infrastructure kind is served.
	OpenShift bool
	// NodeRollout turns on the kubelet rolling-upgrade node detector.
	NodeRollout bool
	// MachineHealthChecks is what the MachineHealthCheck detector found.
	MachineHealthChecks MachineHealthChecks
	// CoveredByMachineHealthCheck maps each node a Cluster API MachineHealthCheck covers to it
	// ("namespace/name"); read only.
	CoveredByMachineHealthCheck map[string]string
}

// Blocking reports whether the cluster-wide state blocks new remediations at now: the gate is not
// known, or a signal blocks under the maximum pause (zero: no bound).
func (v Verdict) Blocking(maxPause time.Duration, now time.Time) bool {
	return !v.Known || slices.ContainsFunc(v.Closed, func(s Signal) bool { return s.Blocks(maxPause, now) })
}

// Gate is the shared, thread-safe state of the upgrade detectors. The upgradeguard controller is
// its only writer: its detectors report to it (Expect, Discovered, Report, ReportError, the Set
// methods) and it records the node-level signals of each NodeHealthCheck (NodeSignals,
// ForgetNodeSignals). The nhc and remediation controllers only read it (Verdict, NodeSince) on every
// evaluation, the remediation controller right before creating a CR, and both are notified of every
// change of the verdict (Changes).
type Gate struct {
	mu         sync.Mutex
	discovered bool
	expected   []string            // enabled detectors, in the order they were enabled
	reported   map[string]bool     // detectors evaluated at least once
	errs       map[string]string   // last error of a detector that has not reported yet
	closed     map[string][]Signal // per detector, stamped (Since set)
	openShift  bool
	mhc        MachineHealthChecks
	capi       map[string]string // ClusterAPICoverage; replaced, never changed in place
	nodeRoll   bool
	// states holds the state of each cluster-wide detector that has one (DetectorStates).
	states map[string]DetectorState
	// nodeSignals holds, per NodeHealthCheck, the node-level signals the upgradeguard last saw,
	// stamped.
	nodeSignals map[string][]Signal

	subsMu sync.Mutex
	subs   []chan struct{}
}

// Reader is the gate as the controllers other than the upgradeguard use it: they read it and are
// notified of its changes; they cannot write it. *Gate implements it.
type Reader interface {
	// Verdict returns the gate's current state.
	Verdict() Verdict
	// NodeSince dates a NodeHealthCheck's node-level signals as the upgradeguard recorded them.
	NodeSince(nhc string, signals []Signal, now time.Time) []Signal
	// Changes subscribes to the changes of the verdict.
	Changes() <-chan struct{}
}

var _ Reader = (*Gate)(nil)

// NewGate returns an unknown gate. nodeRollout turns on the kubelet rolling-upgrade node detector.
func NewGate(nodeRollout bool) *Gate {
	return &Gate{reported: map[string]bool{}, errs: map[string]string{}, closed: map[string][]Signal{}, states: map[string]DetectorState{},
		nodeRoll: nodeRollout, nodeSignals: map[string][]Signal{}}
}

// Expect enables a detector: the gate is unknown until it has reported. Enabling one twice is a
// no-op.
func (g *Gate) Expect(detector string) {
	g.update(func() bool {
		if slices.Contains(g.expected, detector) {
			return false
		}
		g.expected = append(g.expected, detector)
		g.states[detector] = StateUnknown
		return true
	})
}

// Discovered says the upgradeguard has enabled every detector it found at start; the gate becomes
// known once those have reported.
func (g *Gate) Discovered() {
	g.update(func() bool {
		changed := !g.discovered
		g.discovered = true
		return changed
	})
}

// Report records a detector's evaluation at now: the signals it sees, none when it sees no upgrade.
// A signal without Since keeps the start it had in the detector's previous report (the same
// object), or starts now: the gate remembers when it first saw it. That memory is lost when the
// operator restarts or another replica takes over, and the signal then starts anew: its maximum pause
// may run again, never shorter. It returns the previous signals and whether the detector had
// reported before.
func (g *Gate) Report(detector string, signals []Signal, now time.Time) (prev []Signal, reportedBefore bool) {
	g.update(func() bool {
		prev = g.closed[detector]
		reportedBefore = g.reported[detector]
		g.reported[detector] = true
		delete(g.errs, detector)
		stamped := stamp(signals, prev, now)
		if len(stamped) == 0 {
			delete(g.closed, detector)
		} else {
			g.closed[detector] = stamped
		}
		g.states[detector] = stateOf(len(stamped) > 0)
		return !reportedBefore || !sameSignals(prev, stamped)
	})
	return prev, reportedBefore
}

// ReportError records why a detector could not be evaluated. It changes nothing once the detector
// has reported: the last known state holds until the next successful evaluation.
func (g *Gate) ReportError(detector string, err error) {
	g.update(func() bool {
		if g.reported[detector] {
			return false
		}
		changed := g.errs[detector] != err.Error()
		g.errs[detector] = err.Error()
		return changed
	})
}

// SetOpenShift records the Infrastructure detector's finding: whether this is OpenShift.
func (g *Gate) SetOpenShift(openShift bool) {
	g.update(func() bool {
		changed := g.openShift != openShift || !g.reported[DetectorInfrastructure]
		g.openShift = openShift
		g.reported[DetectorInfrastructure] = true
		g.setFindingState(DetectorInfrastructure, false)
		delete(g.errs, DetectorInfrastructure)
		return changed
	})
}

// SetMachineHealthChecks records the MachineHealthCheck detector's finding.
func (g *Gate) SetMachineHealthChecks(m MachineHealthChecks) {
	g.update(func() bool {
		changed := g.mhc != m || !g.reported[DetectorMachineHealthCheck]
		g.mhc = m
		g.reported[DetectorMachineHealthCheck] = true
		g.setFindingState(DetectorMachineHealthCheck, m.Conflict != "")
		delete(g.errs, DetectorMachineHealthCheck)
		return changed
	})
}

// SetClusterAPICoverage records the Cluster API MachineHealthCheck detector's finding
// (ClusterAPICoverage), and returns the previous one.
func (g *Gate) SetClusterAPICoverage(coverage map[string]string) (previous map[string]string) {
	g.update(func() bool {
		previous = g.capi
		changed := !sameCoverage(g.capi, coverage) || !g.reported[DetectorClusterAPIMachineHealthCheck]
		g.capi = coverage
		g.reported[DetectorClusterAPIMachineHealthCheck] = true
		g.setFindingState(DetectorClusterAPIMachineHealthCheck, false)
		delete(g.errs, DetectorClusterAPIMachineHealthCheck)
		return changed
	})
	return previous
}

// setFindingState sets the state of a detector that reports a finding rather than signals, once it
// has reported: closed when its finding holds every new remediation back (a conflicting
// MachineHealthCheck disables the NodeHealthChecks), open otherwise (what it finds holds nodes one
// by one, or nothing). A detector that is not enabled gets no state (no series).
func (g *Gate) setFindingState(detector string, closed bool) {
	if _, enabled := g.states[detector]; enabled {
		g.states[detector] = stateOf(closed)
	}
}

// MachineHealthChecks returns the MachineHealthCheck detector's last finding, and whether it has
// reported at all.
func (g *Gate) MachineHealthChecks() (MachineHealthChecks, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mhc, g.reported[DetectorMachineHealthCheck]
}

// NodeSignals records the node-level signals the upgradeguard sees for one NodeHealthCheck at now,
// and returns them with Since set where it is zero: a signal it recorded for that NodeHealthCheck
// before (the same detector and object) keeps its start, a new one starts now, and one not seen
// any more is forgotten (it starts anew if it comes back). Like Report's, this memory lives only as
// long as the operator process. The controllers read it with NodeSince.
func (g *Gate) NodeSignals(nhc string, signals []Signal, now time.Time) []Signal {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := stamp(signals, g.nodeSignals[nhc], now)
	if len(out) == 0 {
		delete(g.nodeSignals, nhc)
	} else {
		g.nodeSignals[nhc] = out
	}
	return slices.Clone(out)
}

// NodeSince returns a NodeHealthCheck's node-level signals, as a controller finds them in its own
// snapshot, with Since set where it is zero: when the upgradeguard first saw the same signal for
// that NodeHealthCheck (NodeSignals), or now when it has not recorded it (yet). It changes nothing.
func (g *Gate) NodeSince(nhc string, signals []Signal, now time.Time) []Signal {
	g.mu.Lock()
	defer g.mu.Unlock()
	return stamp(signals, g.nodeSignals[nhc], now)
}

// ForgetNodeSignals forgets the node-level signals recorded for a NodeHealthCheck that is gone.
func (g *Gate) ForgetNodeSignals(nhc string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.nodeSignals, nhc)
}

// DetectorState is a detector's state as the gate holds it, the state label of the gate metric
// (upgradeguard.MetricGate).
type DetectorState string

// Detector states.
const (
	// StateUnknown: the detector is enabled and has not reported yet.
	StateUnknown DetectorState = "unknown"
	// StateOpen: it reported no signal.
	StateOpen DetectorState = "open"
	// StateClosed: it reported a signal; a node-level detector, for at least one NodeHealthCheck.
	StateClosed DetectorState = "closed"
)

// DetectorStates returns the state of each detector that has one: a cluster-wide detector from
// when it is enabled (Expect: unknown) or reports (Report: open or closed), a node-level one while
// it is on (the kubelet rolling-upgrade detector by NewGate's flag, the MachineConfig detector on
// OpenShift): closed while it blocks at least one NodeHealthCheck, open otherwise. Detectors that
// report a finding rather than signals (SetOpenShift, SetMachineHealthChecks,
// SetClusterAPICoverage) keep the state Expect gave them.
func (g *Gate) DetectorStates() map[string]DetectorState {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]DetectorState, len(g.states)+2)
	for d, s := range g.states {
		out[d] = s
	}
	for d, on := range map[string]bool{DetectorNodeRollout: g.nodeRoll, DetectorMachineConfig: g.openShift} {
		if on {
			out[d] = stateOf(g.blocksNodes(d))
		}
	}
	return out
}

// blocksNodes reports whether a node-level detector has a signal recorded for any NodeHealthCheck.
func (g *Gate) blocksNodes(detector string) bool {
	for _, signals := range g.nodeSignals {
		if slices.ContainsFunc(signals, func(s Signal) bool { return s.Detector == detector }) {
			return true
		}
	}
	return false
}

func stateOf(closed bool) DetectorState {
	if closed {
		return StateClosed
	}
	return StateOpen
}

// Verdict returns the gate's current state.
func (g *Gate) Verdict() Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := Verdict{Known: g.discovered, OpenShift: g.openShift, NodeRollout: g.nodeRoll, MachineHealthChecks: g.mhc, CoveredByMachineHealthCheck: g.capi}
	var pending []string
	if !g.discovered {
		pending = append(pending, "the upgrade detectors have not been discovered yet")
	}
	for _, d := range g.expected {
		if !g.reported[d] {
			v.Known = false
			if e := g.errs[d]; e != "" {
				pending = append(pending, fmt.Sprintf("%s: %s", d, e))
			} else {
				pending = append(pending, d+": not evaluated yet")
			}
		}
		v.Closed = append(v.Closed, g.closed[d]...)
	}
	if !v.Known {
		v.Pending = strings.Join(pending, "; ")
		v.MachineHealthChecks = MachineHealthChecks{}
		v.CoveredByMachineHealthCheck = nil
	}
	return v
}

// Changes returns a channel that receives a value after every change of the verdict. Values
// coalesce: a receiver that falls behind gets one value for several changes, and reads the verdict
// anew. Each call returns a new subscription. The channel is plain, so that this package needs no
// controller-runtime: controllers watch it through notify.Source.
func (g *Gate) Changes() <-chan struct{} {
	g.subsMu.Lock()
	defer g.subsMu.Unlock()
	ch := make(chan struct{}, 1)
	g.subs = append(g.subs, ch)
	return ch
}

func (g *Gate) update(f func() bool) {
	g.mu.Lock()
	changed := f()
	g.mu.Unlock()
	if changed {
		g.notify()
	}
}

// notify sends every subscription a value, unless one is pending already; it never blocks.
func (g *Gate) notify() {
	g.subsMu.Lock()
	subs := g.subs
	g.subsMu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default: // one is pending already
		}
	}
}

// Expected returns the enabled detectors, sorted (for logs and tests).
func (g *Gate) Expected() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(slices.Values(g.expected))
}

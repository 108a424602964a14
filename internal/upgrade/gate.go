package upgrade

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Detector names: metric labels, and how messages name a signal's source.
const (
	// DetectorClusterVersion: OpenShift ClusterVersion Progressing=True (automatic on OpenShift).
	DetectorClusterVersion = "clusterversion"
	// DetectorInfrastructure reads OpenShift's Infrastructure/cluster topology: on hosted control
	// planes (External) the MachineConfig node detector is on. Not a signal itself.
	DetectorInfrastructure = "infrastructure"
	// DetectorMachineHealthCheck finds MachineHealthChecks that conflict with NodeHealthCheck
	// (automatic on OpenShift Machine API). Not a signal itself: it disables NodeHealthChecks.
	DetectorMachineHealthCheck = "machinehealthcheck"
	// DetectorClusterAPI: a KubeadmControlPlane or MachineDeployment rolls out (opt-in).
	DetectorClusterAPI = "clusterapi"
	// DetectorPauseObject: the configured pause ConfigMap or Lease exists (opt-in).
	DetectorPauseObject = "pauseobject"
	// DetectorMachineConfig: a node about to be remediated is being updated by the Machine Config
	// Operator (hosted control planes). Evaluated per NodeHealthCheck.
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
	// Object is the object that shows it, when there is one; events are emitted on it.
	Object *corev1.ObjectReference
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
	// Closed are the cluster-wide signals that block new remediations, in detector order.
	Closed []Signal
	// HostedControlPlane turns on the MachineConfig node detector.
	HostedControlPlane bool
	// NodeRollout turns on the kubelet rolling-upgrade node detector.
	NodeRollout bool
	// MachineHealthChecks is what the MachineHealthCheck detector found.
	MachineHealthChecks MachineHealthChecks
}

// Blocking reports whether the cluster-wide state blocks new remediations.
func (v Verdict) Blocking() bool { return !v.Known || len(v.Closed) > 0 }

// Gate is the shared, thread-safe state of the upgrade detectors. The upgradeguard controller
// writes it; the nhc controller reads it on every evaluation and is notified of every change, and the
// remediation controller reads it right before creating a CR.
type Gate struct {
	mu         sync.Mutex
	discovered bool
	expected   []string          // enabled detectors, in the order they were enabled
	reported   map[string]bool   // detectors evaluated at least once
	errs       map[string]string // last error of a detector that has not reported yet
	closed     map[string]Signal
	hcp        bool
	mhc        MachineHealthChecks
	nodeRoll   bool
	// nodeClosed tracks, per node-level detector, the NodeHealthChecks it currently blocks (metrics).
	nodeClosed map[string]map[string]bool
	subs       []chan event.GenericEvent
}

// NewGate returns an unknown gate. nodeRollout turns on the kubelet rolling-upgrade node detector.
func NewGate(nodeRollout bool) *Gate {
	g := &Gate{reported: map[string]bool{}, errs: map[string]string{}, closed: map[string]Signal{},
		nodeRoll: nodeRollout, nodeClosed: map[string]map[string]bool{}}
	observeState(DetectorNodeRollout, nodeRollout, false)
	return g
}

// Expect enables a detector: the gate is unknown until it has reported. Enabling one twice is a
// no-op.
func (g *Gate) Expect(detector string) {
	g.update(func() bool {
		if slices.Contains(g.expected, detector) {
			return false
		}
		g.expected = append(g.expected, detector)
		setUnknown(detector)
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

// Report records a detector's evaluation: closed is nil when it sees no upgrade. It returns the
// previous signal (nil: it was open) and whether the detector had reported before.
func (g *Gate) Report(detector string, closed *Signal) (prev *Signal, reportedBefore bool) {
	g.update(func() bool {
		old, wasClosed := g.closed[detector]
		if wasClosed {
			prev = &old
		}
		reportedBefore = g.reported[detector]
		g.reported[detector] = true
		delete(g.errs, detector)
		if closed == nil {
			delete(g.closed, detector)
		} else {
			g.closed[detector] = *closed
		}
		setGauge(detector, closed != nil)
		return !reportedBefore || wasClosed != (closed != nil) || (closed != nil && old.Message != closed.Message)
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

// SetHostedControlPlane records the Infrastructure detector's finding.
func (g *Gate) SetHostedControlPlane(hcp bool) {
	g.update(func() bool {
		changed := g.hcp != hcp || !g.reported[DetectorInfrastructure]
		g.hcp = hcp
		g.reported[DetectorInfrastructure] = true
		delete(g.errs, DetectorInfrastructure)
		observeState(DetectorMachineConfig, hcp, len(g.nodeClosed[DetectorMachineConfig]) > 0)
		return changed
	})
}

// SetMachineHealthChecks records the MachineHealthCheck detector's finding.
func (g *Gate) SetMachineHealthChecks(m MachineHealthChecks) {
	g.update(func() bool {
		changed := g.mhc != m || !g.reported[DetectorMachineHealthCheck]
		g.mhc = m
		g.reported[DetectorMachineHealthCheck] = true
		delete(g.errs, DetectorMachineHealthCheck)
		return changed
	})
}

// MachineHealthChecks returns the MachineHealthCheck detector's last finding, and whether it has
// reported at all.
func (g *Gate) MachineHealthChecks() (MachineHealthChecks, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mhc, g.reported[DetectorMachineHealthCheck]
}

// ReportNode records whether a node-level detector blocks one NodeHealthCheck (closed false also
// when the NodeHealthCheck is gone), for the gate metric.
func (g *Gate) ReportNode(detector, nhc string, closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	set := g.nodeClosed[detector]
	if set == nil {
		set = map[string]bool{}
		g.nodeClosed[detector] = set
	}
	if closed {
		set[nhc] = true
	} else {
		delete(set, nhc)
	}
	on := g.nodeRoll
	if detector == DetectorMachineConfig {
		on = g.hcp
	}
	observeState(detector, on, len(set) > 0)
}

// Verdict returns the gate's current state.
func (g *Gate) Verdict() Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := Verdict{Known: g.discovered, HostedControlPlane: g.hcp, NodeRollout: g.nodeRoll, MachineHealthChecks: g.mhc}
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
		if s, ok := g.closed[d]; ok {
			v.Closed = append(v.Closed, s)
		}
	}
	if !v.Known {
		v.Pending = strings.Join(pending, "; ")
		v.MachineHealthChecks = MachineHealthChecks{}
	}
	return v
}

// Changes returns a channel that receives an event after every change of the verdict. Events
// coalesce: a receiver that falls behind gets one event for several changes, and reads the
// verdict anew. Each call returns a new subscription.
func (g *Gate) Changes() <-chan event.GenericEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := make(chan event.GenericEvent, 1)
	g.subs = append(g.subs, ch)
	return ch
}

func (g *Gate) update(f func() bool) {
	g.mu.Lock()
	changed := f()
	subs := g.subs
	g.mu.Unlock()
	if !changed {
		return
	}
	for _, ch := range subs {
		select {
		case ch <- event.GenericEvent{Object: &remediationv1alpha1.NodeHealthCheck{}}:
		default: // one is pending already
		}
	}
}

// Expected returns the enabled detectors, sorted (for logs and tests).
func (g *Gate) Expected() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.expected)
	sort.Strings(out)
	return out
}

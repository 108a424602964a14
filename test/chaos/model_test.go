package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// The model: what the driver knows about the world, in fake time. It is written only by the driver
// (never read back from the API), so the invariants are judged against what the driver did, not
// against what the controllers believe.

// Labels and names of the world.
const (
	poolLabel         = "chaos.medik8s.io/pool"
	controlPlaneLabel = "node-role.kubernetes.io/control-plane"
	excludeLabel      = remediationv1alpha1.ExcludeFromRemediationLabel
	leaseNamespace    = "medik8s-leases"
	leaseHolderPrefix = "NodeHealthCheck-"
	templateNamespace = testutil.TemplateNamespace
)

// node is the model of one node.
type node struct {
	Name         string
	Exists       bool
	ControlPlane bool
	Pool         string // "a", "b" or "" (no pool label)
	Excluded     bool
	Ready        corev1.ConditionStatus
	// Since is the Ready condition's lastTransitionTime (fake time).
	Since time.Time
	// Written is when (fake time) the driver wrote the Ready condition: Since, or later for a slow
	// writer, whose clock dates the change back (slow). WrittenManagers is how many managers had
	// started by then: one started later lists the node and trusts its time (the operator's memory
	// of condition changes is its process's).
	Written         time.Time
	WrittenManagers int
	// SeenBy is the fake time by which the leader's watch showed the write: the end of the first
	// settled step since (zero until then). The operator counts a condition from its
	// lastTransitionTime when its watch showed the change within the bound of it, otherwise from
	// when it showed it (watch.ConditionChanges): at the latest from SeenBy.
	SeenBy time.Time
	// HealthyFrom is the step after which the node has been Ready=True without interruption (valid
	// while Ready is True); a node that flapped within a step is healthy from that step.
	HealthyFrom int
	// Created is the node object's creationTimestamp as the API server answered the driver's create
	// (the API server's clock, whole seconds): the returning-node hold tells a node that came back
	// from one that joined by it.
	Created time.Time
	// CreatedStep is the step that created the node object (0: the initial world).
	CreatedStep int
	// Failures counts the node's failures (Ready turning from True to False or Unknown), for the
	// moves that make one node fail again and again (the repair budget).
	Failures int
	// ResetAt is the time the driver wrote into the node's repair-budget-reset annotation (the API
	// server's clock, whole seconds; zero: none): remediations started at or before it do not count.
	ResetAt time.Time
	// Maintained is set while a maintenance operator wants the node (it asked for its lease);
	// LeasedUntil is when the lease it got expires (fake time; zero: it did not get it, the lease
	// was held by a NodeHealthCheck then).
	Maintained  bool
	LeasedUntil time.Time
	// Machine is the Cluster API Machine the node's cluster.x-k8s.io/machine annotation claims (""
	// none): its own (machineOf), or another node's, as a compromised kubelet may write it.
	Machine string
	// RemovedBy says who is removing the node ("": nobody): "autoscaler" (taint
	// ToBeDeletedByClusterAutoscaler, its value the unix time the removal began), "karpenter" (taint
	// karpenter.sh/disrupted, no time: the operator counts from when it first saw it) or "deletion"
	// (deleted while a finalizer keeps it). RemovalSince is when the removal began, on the decisions'
	// clock: the autoscaler's value, the deletion's timestamp (the API server's clock), the move's
	// fake time for Karpenter (the earliest the operator can have seen it).
	RemovedBy    string
	RemovalSince time.Time
	// Writes counts the driver's writes that changed the node's Ready condition, its status or time
	// (and its creations): a remediation that answers a request of a healthy node lasts until its
	// conditions change.
	Writes int
	// Request is the kind of the node's remediation request the driver wrote last ("": none):
	// "now" (dated now), "ahead" (5s ahead, within the clock-skew bound: it waits for its time),
	// "future" (10m ahead: refused), "old" (25h back: expired) or "junk" (not a time: refused);
	// RequestAt its time (zero for junk) and RequestStep the step that wrote it. A new Node object
	// (recreate) has none.
	Request     string
	RequestAt   time.Time
	RequestStep int
	// PrevRequestAt is the latest time of the requests written on this Node object before it: the
	// operator's handled record of the node is never later (but a forged one, which it refuses).
	PrevRequestAt time.Time
	// HandledForged is set once the node's kubelet wrote a remediation-request-handled annotation
	// dated an hour ahead (forged: the operator ignores it).
	HandledForged bool
}

// requestTimes are the times each kind of request is dated at, from now. A request dated beyond the
// clock-skew bound ("future") is refused while it is, then pending from its time on, as one
// within the bound ("ahead") is; an "old" one is expired.
var requestTimes = map[string]time.Duration{"now": 0, "ahead": 5 * time.Second, "future": 10 * time.Minute, "old": -25 * time.Hour}

// requestPending reports whether the node's request is one the operator takes at now, and its time
// has come (it may have been answered meanwhile): a time, no later than now (one dated beyond the
// clock-skew bound is refused until its time is within it, then waits for it), not older than
// RemediationRequestMaxAge.
func (n node) requestPending(now time.Time) bool {
	return n.Request != "" && !n.RequestAt.IsZero() && !now.Before(n.RequestAt) && now.Sub(n.RequestAt) <= remediationv1alpha1.RemediationRequestMaxAge
}

// The Machines: every node of the initial world has one, in the template namespace (so that it can
// own the node's CRs), of cluster "chaos", whose status.nodeRef names the node; those of the
// control-plane nodes are control-plane Machines. Machines never change: a node's claim does.
const machineCluster = "chaos"

// machineOf names the node's own Machine; machineNode the node a Machine's status.nodeRef names.
func machineOf(node string) string { return "m-" + node }

func machineNode(machine string) string { return strings.TrimPrefix(machine, "m-") }

// machines returns the names of the Machines, sorted: one per node of the initial world, whether
// the node exists now or not.
func (s *state) machines() []string {
	var out []string
	for _, name := range s.nodeNames() {
		out = append(out, machineOf(name))
	}
	return out
}

// annotations returns the node's annotations as the driver writes them: its Machine claim.
func (n node) annotations() map[string]string {
	if n.Machine == "" {
		return nil
	}
	return map[string]string{
		machines.ClusterAPIMachineAnnotation:     n.Machine,
		machines.ClusterAPINamespaceAnnotation:   templateNamespace,
		machines.ClusterAPIClusterNameAnnotation: machineCluster,
	}
}

// labels returns the node's labels as the driver writes them.
func (n node) labels() map[string]string {
	l := map[string]string{"chaos.medik8s.io/node": "true"}
	if n.Pool != "" {
		l[poolLabel] = n.Pool
	}
	if n.ControlPlane {
		l[controlPlaneLabel] = ""
	}
	if n.Excluded {
		l[excludeLabel] = "true"
	}
	return l
}

func (n node) String() string {
	s := fmt.Sprintf("%s[Ready=%s", n.Name, n.Ready)
	if !n.Exists {
		return n.Name + "[deleted]"
	}
	if n.Pool != "" {
		s += " pool=" + n.Pool
	}
	if n.Excluded {
		s += " excluded"
	}
	if n.Maintained {
		s += " maintained"
	}
	if n.Machine != machineOf(n.Name) {
		s += " claims Machine " + cmp.Or(n.Machine, "none")
	}
	if n.RemovedBy != "" {
		s += " removed by " + n.RemovedBy + " since " + n.RemovalSince.Format(time.TimeOnly)
	}
	if n.Request != "" {
		s += " request " + n.Request
		if !n.RequestAt.IsZero() {
			s += "@" + n.RequestAt.Format(time.TimeOnly)
		}
	}
	if n.HandledForged {
		s += " handled forged"
	}
	return s + "]"
}

// nhc is the model of one NodeHealthCheck: its spec as the API server accepted it.
type nhc struct {
	Name string
	Spec remediationv1alpha1.NodeHealthCheckSpec
	// Config is the index of its templates in templateConfigs.
	Config int
}

func (h *nhc) paused() bool { return len(h.Spec.PauseRequests) > 0 }

// firstStep returns the name of the template of the first escalation step (the single template).
func (h *nhc) firstStep() string {
	if h.Spec.RemediationTemplate != nil {
		return h.Spec.RemediationTemplate.Name
	}
	first := slices.MinFunc(h.Spec.EscalatingRemediations, func(a, b remediationv1alpha1.EscalatingRemediation) int { return a.Order - b.Order })
	return first.RemediationTemplate.Name
}

// lastStep returns the name of the template of the last escalation step (the single template).
func (h *nhc) lastStep() string {
	if h.Spec.RemediationTemplate != nil {
		return h.Spec.RemediationTemplate.Name
	}
	last := slices.MaxFunc(h.Spec.EscalatingRemediations, func(a, b remediationv1alpha1.EscalatingRemediation) int { return a.Order - b.Order })
	return last.RemediationTemplate.Name
}

// disabled reports whether the NodeHealthCheck references a template that does not exist.
func (h *nhc) disabled() bool {
	for _, ref := range h.Spec.TemplateRefs() {
		if !slices.Contains(existingTemplates, ref.Name) {
			return true
		}
	}
	return false
}

func (h *nhc) healthyDelay() time.Duration {
	if h.Spec.HealthyDelay == nil {
		return 0
	}
	return h.Spec.HealthyDelay.Duration
}

func (h *nhc) selects(n node) bool {
	if !n.Exists {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(&h.Spec.Selector)
	if err != nil {
		panic(err)
	}
	return sel.Matches(labels.Set(n.labels()))
}

// matched reports whether one of the NodeHealthCheck's unhealthy conditions matches the node's
// Ready status, whatever its duration: the node is not healthy for this NodeHealthCheck.
func (h *nhc) matched(n node) bool {
	for _, c := range h.Spec.UnhealthyConditions {
		if c.Type == corev1.NodeReady && c.Status == n.Ready {
			return true
		}
	}
	return false
}

// unhealthyPast reports whether a matching condition has lasted for its duration at now.
func (h *nhc) unhealthyPast(n node, now time.Time) bool {
	for _, c := range h.Spec.UnhealthyConditions {
		if c.Type == corev1.NodeReady && c.Status == n.Ready && !now.Before(n.Since.Add(c.Duration.Duration)) {
			return true
		}
	}
	return false
}

// duration returns the duration of the unhealthy condition that matches the node's Ready status.
func (h *nhc) duration(n node) (time.Duration, bool) {
	for _, c := range h.Spec.UnhealthyConditions {
		if c.Type == corev1.NodeReady && c.Status == n.Ready {
			return c.Duration.Duration, true
		}
	}
	return 0, false
}

// whyNotDue says why the node is not due for a new remediation by this NodeHealthCheck at now;
// empty when it is due: selected, unhealthy past a condition's duration, not excluded, not paused,
// not disabled.
func (h *nhc) whyNotDue(n node, now time.Time) string {
	switch {
	case !n.Exists:
		return "the node does not exist"
	case !h.selects(n):
		return "not selected"
	case !h.matched(n):
		return "healthy (Ready=" + string(n.Ready) + ")"
	case !h.unhealthyPast(n, now):
		return fmt.Sprintf("Ready=%s for only %s", n.Ready, now.Sub(n.Since))
	case n.Excluded:
		return "excluded by label"
	case h.paused():
		return "the NodeHealthCheck is paused"
	case h.disabled():
		return "the NodeHealthCheck references a missing template"
	case h.Spec.DryRun:
		return "the NodeHealthCheck is in dry-run"
	}
	return ""
}

// requiredHealthy resolves minHealthy / maxUnhealthy against total selected nodes as the API
// documents them (integers, numeric strings, percentages rounded up; maxUnhealthy m means total - m
// must stay healthy; "51%" when neither is set). ok is false for a budget that allows nothing
// (maxUnhealthy above total, unparsable). Written independently of internal/health on purpose.
func requiredHealthy(total int, minHealthy, maxUnhealthy *intstr.IntOrString) (required int, ok bool) {
	resolve := func(v *intstr.IntOrString) (int, bool) {
		if v.Type == intstr.Int {
			return int(v.IntVal), v.IntVal >= 0
		}
		if p, isPercent := strings.CutSuffix(v.StrVal, "%"); isPercent {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 {
				return 0, false
			}
			return (n*total + 99) / 100, true
		}
		n, err := strconv.Atoi(v.StrVal)
		return n, err == nil && n >= 0
	}
	switch {
	case maxUnhealthy != nil:
		m, ok := resolve(maxUnhealthy)
		if !ok || m > total {
			return 0, false
		}
		return total - m, true
	case minHealthy != nil:
		return resolve(minHealthy)
	default:
		def := intstr.FromString("51%")
		return resolve(&def)
	}
}

// maxRemediated is how many selected nodes may have remediation CRs when a new one starts:
// selected - required healthy; -1 when the budget allows nothing.
func (h *nhc) maxRemediated(selected int) int {
	required, ok := requiredHealthy(selected, h.Spec.MinHealthy, h.Spec.MaxUnhealthy)
	if !ok {
		return -1
	}
	return selected - required
}

// state is the model after a step: fake time, nodes, NodeHealthChecks, and the driver's own
// knobs that the invariants must know about.
type state struct {
	Step  int
	Now   time.Time
	Nodes map[string]node
	NHCs  map[string]*nhc
	// Poisoned is the node whose writes all fail (per-node errors), if any.
	Poisoned string
	// Skew is the offset of the managers' skew monitors' clock from the API server's (see
	// managers.skew): beyond maxClockSkew nothing starts or escalates.
	Skew time.Duration
	// Managers is how many managers have started so far (the driver's count, managers.seq);
	// LeaderSince is when (fake time) the leader last changed: a new leader's gatherer first sees a
	// removal without a time then.
	Managers    int
	LeaderSince time.Time
	// ConvDown is set while conv-1's conversion webhook is down: its kind cannot be read in the
	// version the operator reads, once an object of it changed. ConvBlind is set once the leader
	// changed since (a new leader's informer of the kind never synced: the kind is unknown to it).
	// ConvLeases are the node leases the owners of the kind's CRs held when it went down, by node.
	ConvDown, ConvBlind bool
	ConvLeases          map[string]leaseInfo
	// Mids are the states between the moves of a burst (a step of several moves without settling),
	// in order; the step's states are the one before it, these, and this one.
	Mids []*state
}

// maxClockSkew is the managers' --max-clock-skew, the production default; returnGrace their
// --returning-node-grace, the production default.
const (
	maxClockSkew = 10 * time.Second
	returnGrace  = health.DefaultReturnGrace
	// removalHold is their --removal-hold, the production default: how long a node's removal holds
	// back its remediation where a NodeHealthCheck skips nodes being removed.
	removalHold = health.DefaultRemovalHold
)

func (s *state) clone() *state {
	c := &state{Step: s.Step, Now: s.Now, Nodes: maps.Clone(s.Nodes), NHCs: map[string]*nhc{}, Poisoned: s.Poisoned, Skew: s.Skew, Managers: s.Managers, LeaderSince: s.LeaderSince,
		ConvDown: s.ConvDown, ConvBlind: s.ConvBlind, ConvLeases: s.ConvLeases}
	for k, v := range s.NHCs {
		cp := *v
		cp.Spec = *v.Spec.DeepCopy()
		c.NHCs[k] = &cp
	}
	return c
}

func (s *state) nodeNames() []string { return slices.Sorted(maps.Keys(s.Nodes)) }
func (s *state) nhcNames() []string  { return slices.Sorted(maps.Keys(s.NHCs)) }

// skewed reports whether the skew is beyond the bound: the managers start and escalate nothing.
func (s *state) skewed() bool { return s.Skew.Abs() > maxClockSkew }

// whyNotDue says why the node is not due for a new remediation by the NodeHealthCheck in this
// state: h.whyNotDue, or the clock skew.
func (s *state) whyNotDue(h *nhc, n node) string {
	if why := h.whyNotDue(n, s.Now); why != "" {
		return why
	}
	if s.skewed() {
		return fmt.Sprintf("the clock skew (%s) is beyond the bound of %s", s.Skew, maxClockSkew)
	}
	return ""
}

// whyNoRequest says why the NodeHealthCheck does not act on the node's remediation request in this
// state (empty: it may start a remediation for it, if nothing holds it): the node is selected, not
// excluded, the NodeHealthCheck takes requests, is not paused, disabled or in dry-run (which ignores
// requests), the skew is within the bound, and the request is pending (node.requestPending).
func (s *state) whyNoRequest(h *nhc, n node) string {
	switch {
	case !n.Exists:
		return "the node does not exist"
	case !h.selects(n):
		return "not selected"
	case n.Request == "":
		return "no request"
	case !h.Spec.AllowRemediationRequests:
		return "the NodeHealthCheck does not take requests"
	case !n.requestPending(s.Now):
		return fmt.Sprintf("the request (%s) is refused or not due", n.Request)
	case n.Excluded:
		return "excluded by label"
	case h.paused():
		return "the NodeHealthCheck is paused"
	case h.disabled():
		return "the NodeHealthCheck references a missing template"
	case h.Spec.DryRun:
		return "the NodeHealthCheck is in dry-run"
	case s.skewed():
		return fmt.Sprintf("the clock skew (%s) is beyond the bound of %s", s.Skew, maxClockSkew)
	}
	return ""
}

// cameBack reports whether a healthy node came back less than returnGrace ago: its Ready
// condition changed less than returnGrace ago, at least returnGrace after the node was created
// (sooner, it joined the cluster). The returning-node hold does not count it.
func (s *state) cameBack(n node) bool {
	return n.Exists && n.Ready == corev1.ConditionTrue && !n.Since.After(s.Now) && s.Now.Before(n.Since.Add(returnGrace)) &&
		!n.Created.IsZero() && n.Since.Sub(n.Created) >= returnGrace
}

// slowWrite reports whether the node's Ready condition was dated back by more than the bound
// when it was written (a slow writer): the watch that shows the change does not trust its time.
func (n node) slowWrite() bool { return n.Since.Before(n.Written.Add(-maxClockSkew)) }

// earliestCount is the earliest time the operator may count the node's Ready condition from, in
// this state: its lastTransitionTime, but for a slow write that every running manager's watch saw
// (none started since), which counts from when it was written at the earliest.
func (s *state) earliestCount(n node) time.Time {
	if n.slowWrite() && s.Managers <= n.WrittenManagers {
		return n.Written
	}
	return n.Since
}

// latestCount is the latest time the leader may count the node's Ready condition from: its
// lastTransitionTime if its watch showed the change within the bound of it, otherwise when it
// showed it, by SeenBy; ok is false while no settled step has passed since the write.
func (n node) latestCount() (time.Time, bool) {
	switch {
	case n.SeenBy.IsZero():
		return time.Time{}, false
	case n.SeenBy.After(n.Since.Add(maxClockSkew)):
		return n.SeenBy, true
	}
	return n.Since, true
}

// settledHealthy counts the selected nodes that are healthy and did not just come back: at least
// the healthy nodes the decision counts without the returning ones (nodes with CRs count too).
func (s *state) settledHealthy(h *nhc) int {
	count := 0
	for _, name := range s.selected(h) {
		if n := s.Nodes[name]; n.Ready == corev1.ConditionTrue && !s.cameBack(n) {
			count++
		}
	}
	return count
}

// gateClosed says what closes the gate of new remediations for the node in this state, certainly,
// whatever the CRs: what holds a first step holds an escalation too. Empty when nothing certainly
// does. The threshold is judged by settledHealthy, which counts at least the healthy nodes the
// decision counts: fewer than required, and the threshold (or the returning-node hold) holds.
func (s *state) gateClosed(h *nhc, n node) string {
	selected := len(s.selected(h))
	required, ok := requiredHealthy(selected, h.Spec.MinHealthy, h.Spec.MaxUnhealthy)
	switch {
	case h.paused():
		return "the NodeHealthCheck is paused"
	case h.disabled():
		return "the NodeHealthCheck references a missing template"
	case h.Spec.DryRun:
		return "the NodeHealthCheck is in dry-run (it escalates none of the CRs that ran before)"
	case s.skewed():
		return fmt.Sprintf("the clock skew (%s) is beyond the bound of %s", s.Skew, maxClockSkew)
	case !ok:
		return "the budget is invalid"
	case s.settledHealthy(h) < required:
		return fmt.Sprintf("at most %d of %d selected nodes are healthy and not just back, %d required", s.settledHealthy(h), selected, required)
	case n.Excluded:
		return "the node is excluded by label"
	case s.removalHolds(h, n):
		return fmt.Sprintf("the node is being removed by %s since %s (the hold ends at %s at the earliest)", n.RemovedBy,
			n.RemovalSince.Format(time.TimeOnly), n.RemovalSince.Add(removalHold).Format(time.TimeOnly))
	case s.Now.Before(n.LeasedUntil):
		return fmt.Sprintf("a maintenance operator holds the node's lease until %s", n.LeasedUntil.Format(time.TimeOnly))
	}
	return ""
}

// removalHolds reports whether the node's removal certainly holds back its remediation by h in
// this state: h skips nodes being removed, and the removal began less than the removal hold ago
// (counted from its earliest possible start).
func (s *state) removalHolds(h *nhc, n node) bool {
	return h.Spec.SkipNodesBeingRemoved && n.Exists && n.RemovedBy != "" && s.Now.Before(n.RemovalSince.Add(removalHold))
}

// removalMayHold reports whether the node's removal may still hold back its remediation by h: the
// hold counted from the latest time the leader may count it from (for Karpenter's taint, which
// carries no time, when the leader's gatherer first saw it: since the last change of leader at the
// latest).
func (s *state) removalMayHold(h *nhc, n node) bool {
	if !h.Spec.SkipNodesBeingRemoved || !n.Exists || n.RemovedBy == "" {
		return false
	}
	from := n.RemovalSince
	if n.RemovedBy == "karpenter" && s.LeaderSince.After(from) {
		from = s.LeaderSince
	}
	return s.Now.Before(from.Add(removalHold))
}

// domainOver reports whether the node's failure domain (its pool) holds more selected nodes that
// are not Ready than the NodeHealthCheck's spec.failureDomain allows (false without one).
func (s *state) domainOver(h *nhc, n node) (bool, string) {
	fd := h.Spec.FailureDomain
	if fd == nil {
		return false, ""
	}
	total, failing := 0, 0
	for _, name := range s.selected(h) {
		if m := s.Nodes[name]; m.Pool == n.Pool {
			total++
			if m.Ready != corev1.ConditionTrue {
				failing++
			}
		}
	}
	bound, err := intstr.GetScaledValueFromIntOrPercent(&fd.MaxUnhealthy, total, true)
	if err != nil {
		return true, err.Error()
	}
	return failing > bound, fmt.Sprintf("pool %q: %d of %d selected nodes not Ready, at most %d allowed", n.Pool, failing, total, bound)
}

// selected returns the names of the existing nodes the NodeHealthCheck selects.
func (s *state) selected(h *nhc) []string {
	var out []string
	for _, name := range s.nodeNames() {
		if h.selects(s.Nodes[name]) {
			out = append(out, name)
		}
	}
	return out
}

// healthySettled reports whether the node has been healthy since before this step and, for a
// NodeHealthCheck with a healthyDelay, since at least that delay before the previous step ended, so
// that the remediation controller had a whole step to clear its CRs. A CR that appeared after the
// node recovered (fromStep, fromTime) starts the delay then.
func healthySettled(n node, prev *state, delay time.Duration, fromStep int, fromTime time.Time) bool {
	if !n.Exists || n.Ready != corev1.ConditionTrue || max(n.HealthyFrom, fromStep) > prev.Step {
		return false
	}
	since := n.Since
	if fromTime.After(since) {
		since = fromTime
	}
	return delay <= 0 || !prev.Now.Before(since.Add(delay))
}

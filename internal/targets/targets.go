package targets

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// AccessChecker tells whether the operator may list and watch a kind cluster-wide
// (templateaccess.Reader). A remediation kind it may not watch cannot be cached: reading it would
// wait forever for an informer that never syncs.
type AccessChecker interface {
	Check(ctx context.Context, gvk schema.GroupVersionKind) (served, watchable bool, err error)
}

// Gatherer gathers snapshots through the shared cache. Each controller has its own, since each
// watches the remediation kinds with its own handler.
type Gatherer struct {
	// Reader reads through the shared cache.
	Reader client.Reader
	// Gate is the upgrade gate; nil: no upgrade awareness (tests of one controller alone).
	Gate *upgrade.Gate
	// MaxPause bounds how long each upgrade signal holds new remediations back; zero: no bound.
	MaxPause time.Duration
	// ReturnGrace is the returning-node hold (health.Input.ReturnGrace); zero: off.
	ReturnGrace time.Duration
	// Nodes, when set, finds the selected nodes without listing every node (Affected); nil: they are
	// listed from Reader.
	Nodes NodeSource
	// Access tells which remediation kinds may be watched; nil: every kind.
	Access AccessChecker
	// Watch starts watching a remediation kind before it is read from the cache, once per kind; it
	// reports false when the API server does not serve the kind. nil: no watch is added.
	Watch func(schema.GroupVersionKind) (bool, error)
	// APIReader reads around the cache: a list of one CR of a remediation kind whose informer does
	// not sync, to report the API server's error. nil: not asked.
	APIReader client.Reader
	// Informers are the shared cache's informers: a remediation kind is read only once its informer
	// has synced (kindReadable). nil: reads wait for the sync (a reader that is not a cache).
	Informers cache.Informers
	// Leases reads node leases (the lease cache both controllers share) in LeaseNamespace
	// (lease.DefaultNamespace when empty); nil: leases are not read, and no node counts as leased.
	Leases         client.Reader
	LeaseNamespace string
	// Etcd is the etcd guard for control-plane nodes; nil: none.
	Etcd EtcdChecker
	// Refusals are the CR creates the API server refused for good (written by the remediation
	// controller); nil: none are recorded.
	Refusals *Refusals
	// Skew measures the skew between this process's clock and the API server's; nil: not measured
	// (no new remediation is held back for it).
	Skew SkewMeter
	// Machines tells which nodes are control-plane nodes by their verified Machine, besides their
	// role labels; nil: by their labels alone.
	Machines MachineSource

	mu sync.Mutex
	// seen are the remediation kinds read since the process started: CRs of a kind no spec and no
	// status names any more (a template changed before the status listed its CR) are still found.
	seen []schema.GroupVersionKind
	// created are CRs this process created that the cache may not show yet (see Created).
	created []created
	// syncBy is, per remediation kind, until when decisions wait for its informer's first sync
	// (kindReadable); probed the API server's answers to lists of kinds that did not sync
	// (probeKind).
	syncBy map[schema.GroupVersionKind]time.Time
	probed map[schema.GroupVersionKind]probe
}

// Options select what a snapshot includes.
type Options struct {
	// Templates, when set, reads every referenced template and reports a missing or invalid one as
	// a Problem (the nhc controller). The remediation controller reads the template it creates a CR
	// from anyway, and does not create one from a template it cannot read.
	Templates TemplateGetter
	// Acting is set by the remediation controller: state that only the stored status holds (storm
	// recovery) must have been reported once before a new remediation starts on it.
	Acting bool
	// AsReported takes what only the operator's upgrade detectors know (upgrade signals, a
	// conflicting OpenShift MachineHealthCheck) from the operator's report in the stored status, for
	// a Gatherer that explains the operator's decisions from outside it (kubectl nhc explain).
	AsReported bool
}

// Snapshot is everything one NodeHealthCheck's decision depends on, read at one moment, and the
// decision itself.
type Snapshot struct {
	// Stored is the NodeHealthCheck as read; NHC is a copy with defaults applied (objects admitted
	// without the webhook).
	Stored, NHC *remediationv1alpha1.NodeHealthCheck
	// Now is when the snapshot was taken.
	Now time.Time
	// Nodes are the selected nodes, sorted by name, shared with the cache: never modify them (copy
	// one to change it).
	Nodes []*corev1.Node
	// Overlaps are the other NodeHealthChecks that select some of Nodes (not gathered when Acting).
	Overlaps []Overlap
	// CoveredBy counts, per Cluster API MachineHealthCheck ("namespace/name"), the selected nodes it
	// covers (they are left to it).
	CoveredBy map[string]int
	// realRepairs and simulatedRepairs are the remediation starts the repair budget counts, by node
	// (repairStarts); invalidResets the repair-budget-reset values that are not times, by node.
	realRepairs, simulatedRepairs map[string][]time.Time
	invalidResets                 map[string]string
	// CRs are the NodeHealthCheck's remediation CRs by node name, found by their owner reference in
	// every remediation kind any NodeHealthCheck references now or lists in its status.
	CRs map[string][]unstructured.Unstructured
	// Orphans are the nodes with CRs of this NodeHealthCheck that it does not select (deleted, or no
	// longer matched), sorted.
	Orphans []string
	// Problem is why the NodeHealthCheck cannot work (its Disabled condition); nil when it can.
	Problem *Problem
	// badSelector is set when spec.selector does not parse: nothing is selected.
	badSelector bool
	// Unwatchable is set when a kind the NodeHealthCheck uses may not be listed and watched, so a
	// change to it comes without an event: look again after a while.
	Unwatchable bool
	// Skew is the clock skew's verdict when it is measured (Gatherer.Skew), nil otherwise.
	Skew *clockskew.Verdict
	// Verdict is the upgrade gate's state; Upgrade is the NodeHealthCheck's UpgradeInProgress outcome.
	Verdict upgrade.Verdict
	Upgrade upgrade.Outcome
	// Input is what the decision was made from, and Decision the decision.
	Input    health.Input
	Decision health.Decision
}

// Gather reads the NodeHealthCheck's world from the cache at now and decides.
func (g *Gatherer) Gather(ctx context.Context, stored *remediationv1alpha1.NodeHealthCheck, now time.Time, o Options) (*Snapshot, error) {
	s := &Snapshot{Stored: stored, NHC: stored.DeepCopy(), Now: now, Verdict: upgrade.Verdict{Known: true}}
	remediationv1alpha1.SetDefaults(s.NHC)
	if g.Gate != nil {
		s.Verdict = g.Gate.Verdict()
	}
	if o.Templates != nil {
		var err error
		if s.Problem, err = CheckTemplates(ctx, o.Templates, &s.NHC.Spec, s.Verdict.OpenShift); err != nil {
			return nil, err
		}
	}
	if conflict := s.Verdict.MachineHealthChecks.Conflict; conflict != "" {
		s.Problem = &Problem{remediationv1alpha1.ConditionReasonDisabledMHC, conflict}
	}

	var nodes []*corev1.Node
	if _, err := metav1.LabelSelectorAsSelector(&s.NHC.Spec.Selector); err != nil {
		// Admitted without the webhook (CEL cannot check label syntax): nothing is selected, and
		// the CRs it has wait (KeepsOrphans) rather than being taken for those of unselected nodes.
		s.badSelector = true
		if s.Problem == nil {
			s.Problem = &Problem{remediationv1alpha1.ConditionReasonDisabledInvalidConfig, fmt.Sprintf("spec.selector is invalid: %v", err)}
		}
	} else if nodes, err = g.selectedNodes(ctx, s.NHC); err != nil {
		return nil, err
	}
	s.Nodes = nodes
	nhcs := &remediationv1alpha1.NodeHealthCheckList{}
	if err := g.Reader.List(ctx, nhcs, client.UnsafeDisableDeepCopy); err != nil { // read only
		return nil, fmt.Errorf("listing NodeHealthChecks: %w", err)
	}
	if !o.Acting {
		// Reported in status only; the remediation controller's decisions do not need them.
		s.Overlaps = Overlaps(stored.Name, nodes, nhcs.Items)
	}
	for _, n := range nodes {
		if mhc := s.Verdict.CoveredByMachineHealthCheck[n.Name]; mhc != "" {
			if s.CoveredBy == nil {
				s.CoveredBy = map[string]int{}
			}
			s.CoveredBy[mhc]++
		}
	}
	all, kinds, err := g.remediationCRs(ctx, s.NHC, nhcs.Items)
	if err != nil {
		return nil, err
	}
	if kinds.problem != nil && s.Problem == nil {
		s.Problem = kinds.problem
	}
	s.Unwatchable = kinds.problem != nil

	// Ours by node; for the others, who remediates which node.
	s.CRs = map[string][]unstructured.Unstructured{}
	elsewhere := map[string]string{}
	labelledControlPlane := map[string]bool{} // nodes with a CR labelled isControlPlaneNode
	for _, cr := range all {
		name, uid, _ := remediationcr.ControllerNHC(&cr)
		node := remediationcr.NodeName(&cr)
		if _, cp := remediationcr.Label(&cr, remediationv1alpha1.ControlPlaneCRLabel); cp {
			labelledControlPlane[node] = true
		}
		if uid == stored.UID {
			s.CRs[node] = append(s.CRs[node], cr)
		} else if _, seen := elsewhere[node]; !seen {
			elsewhere[node] = name
		}
	}
	selected := map[string]bool{}
	for _, n := range nodes {
		selected[n.Name] = true
	}
	for node := range s.CRs {
		if !selected[node] {
			s.Orphans = append(s.Orphans, node)
		}
	}
	slices.Sort(s.Orphans)
	controlPlaneElsewhere, err := g.controlPlaneElsewhere(ctx, elsewhere, labelledControlPlane, s.Orphans)
	if err != nil {
		return nil, err
	}

	in := health.Input{Now: now, UnhealthyConditions: s.NHC.Spec.UnhealthyConditions, MinHealthy: s.NHC.Spec.MinHealthy,
		MaxUnhealthy: s.NHC.Spec.MaxUnhealthy, ControlPlaneElsewhere: controlPlaneElsewhere, ReturnGrace: g.ReturnGrace, Steps: Steps(&s.NHC.Spec)}
	if kinds.unlisted != "" {
		in.ControlPlaneUnknown = fmt.Sprintf("the remediation CRs of kind %s cannot be listed, so a control-plane remediation of another NodeHealthCheck may be unseen", kinds.unlisted)
	}
	if s.NHC.Spec.HealthyDelay != nil {
		in.HealthyDelay = &s.NHC.Spec.HealthyDelay.Duration
	}
	if s.NHC.Spec.StormCooldownDuration != nil {
		in.StormCooldown = &s.NHC.Spec.StormCooldownDuration.Duration
		in.Storm = StormState(stored.Status.Conditions)
	}
	healthySince := map[string]time.Time{}
	for _, e := range stored.Status.UnhealthyNodes {
		if e.ConditionsHealthyTimestamp != nil {
			healthySince[e.Name] = e.ConditionsHealthyTimestamp.Time
		}
	}
	in.RepairBudget = repairBudget(&s.NHC.Spec)
	s.realRepairs, s.simulatedRepairs = map[string][]time.Time{}, map[string][]time.Time{}
	for _, n := range nodes {
		var repairs []time.Time
		if in.RepairBudget != nil {
			real, simulated := s.repairStarts(n)
			s.realRepairs[n.Name], s.simulatedRepairs[n.Name] = real, simulated
			repairs = slices.Concat(real, simulated)
			slices.SortFunc(repairs, func(a, b time.Time) int { return a.Compare(b) })
		}
		_, confirmed := n.Annotations[remediationv1alpha1.ManuallyConfirmedHealthyAnnotation]
		controlPlane, err := g.controlPlane(ctx, n)
		if err != nil {
			return nil, err
		}
		hn := health.Node{Name: n.Name, Conditions: n.Status.Conditions, Remediating: len(s.CRs[n.Name]) > 0 || len(s.Simulated(n.Name)) > 0, CRs: s.stepCRs(n.Name),
			HealthySince: healthySince[n.Name], ConfirmedHealthy: confirmed,
			Excluded: n.Labels[remediationv1alpha1.ExcludeFromRemediationLabel] == "true", ControlPlane: controlPlane,
			LeftToMachineHealthCheck: upgrade.LeftToMachineHealthCheck(s.Verdict.MachineHealthChecks, n), Created: n.CreationTimestamp.Time,
			Repairs: repairs, CoveredBy: s.Verdict.CoveredByMachineHealthCheck[n.Name]}
		if !hn.Remediating {
			hn.RemediatedElsewhere = elsewhere[n.Name]
		}
		in.Nodes = append(in.Nodes, hn)
	}
	s.Upgrade = upgradeOutcome(g.Gate, stored, s.Verdict, nodes, s.CRs, s.NHC.Spec.UnhealthyConditions, g.MaxPause, now)
	if o.AsReported {
		if c := meta.FindStatusCondition(stored.Status.Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress); c != nil && c.Status != metav1.ConditionFalse {
			s.Upgrade.Blocked = c.Message
		}
		if c := meta.FindStatusCondition(stored.Status.Conditions, remediationv1alpha1.ConditionTypeDisabled); c != nil && c.Status == metav1.ConditionTrue &&
			c.Reason == remediationv1alpha1.ConditionReasonDisabledMHC && s.Problem == nil {
			s.Problem = &Problem{c.Reason, c.Message}
		}
	}
	if s.Problem != nil {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipDisabled, Message: s.Problem.Message})
	}
	if len(s.NHC.Spec.PauseRequests) > 0 {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipPaused, Message: fmt.Sprintf("paused by %q", s.NHC.Spec.PauseRequests)})
	}
	if s.Upgrade.Blocked != "" {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipUpgrade, Message: s.Upgrade.Blocked})
	}
	if g.Skew != nil {
		v := g.Skew.Verdict()
		s.Skew = &v
		if b := skewBlocker(v); b != nil {
			in.Blockers = append(in.Blockers, *b)
		}
	}
	if o.Acting && in.StormCooldown != nil && meta.FindStatusCondition(stored.Status.Conditions, remediationv1alpha1.ConditionTypeStormActive) == nil {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipStorm,
			Message: "storm recovery is on and its state has not been reported in status yet"})
	}
	if err := g.addHolds(ctx, s, &in); err != nil {
		return nil, err
	}
	s.Input = in
	s.Decision = health.Decide(in)
	if s.DryRun() && in.RepairBudget != nil {
		// A simulated start is recorded with the status write that records its first step: no CR
		// event brings the NodeHealthCheck back to record it later, as one does for a real start.
		for _, d := range s.Decision.Nodes {
			if d.Action == health.StartRemediation && len(s.CRs[d.Name]) == 0 {
				s.simulatedRepairs[d.Name] = append(s.simulatedRepairs[d.Name], now)
			}
		}
	}
	return s, nil
}

// SkewMeter tells the skew between this process's clock and the API server's (clockskew.Monitor).
type SkewMeter interface {
	Verdict() clockskew.Verdict
}

// skewBlocker holds new remediations (and escalations) while the clock skew is beyond its bound or
// not measured yet: every duration a decision judges (conditions written by
// kube-controller-manager, CRs created by the API server) compares timestamps of other clocks with
// this one's.
func skewBlocker(v clockskew.Verdict) *health.Blocker {
	switch {
	case !v.Known:
		return &health.Blocker{Reason: health.SkipClockSkew, Message: "the skew between the manager's clock and the API server's is not measured yet"}
	case v.Exceeded:
		return &health.Blocker{Reason: health.SkipClockSkew, Message: SkewMessage(v)}
	}
	return nil
}

// SkewMessage says which way the manager's clock is off and by more than which bound, without the
// measured value, which moves with every response (the gauge and the events carry it): status that
// quotes it would be written on every reconcile.
func SkewMessage(v clockskew.Verdict) string {
	direction := "ahead of"
	if v.Offset > 0 {
		direction = "behind"
	}
	return fmt.Sprintf("the manager's clock is %s the API server's by more than %s (--max-clock-skew)", direction, v.Bound)
}

// SelectedNode returns the selected node of that name, as read.
func (s *Snapshot) SelectedNode(name string) (*corev1.Node, bool) {
	i, found := slices.BinarySearchFunc(s.Nodes, name, func(n *corev1.Node, name string) int { return strings.Compare(n.Name, name) })
	if !found {
		return nil, false
	}
	return s.Nodes[i], true
}

// Next is the earliest time the snapshot's decision changes on its own: a node's condition
// duration, a running step's timeout (a dry-run NodeHealthCheck's simulated one too), a healthy
// delay, a storm cooldown, a hold's end or the maximum upgrade pause; zero when nothing is pending.
func (s *Snapshot) Next() time.Time {
	return health.Earliest(s.Decision.Next, s.Upgrade.Expires)
}

// stepCRs returns the node's remediation CRs as escalation sees them: its CRs of this
// NodeHealthCheck, or, for a dry-run NodeHealthCheck without any, its simulated remediations.
func (s *Snapshot) stepCRs(node string) []health.StepCR {
	crs := s.CRs[node]
	if len(crs) == 0 {
		return simulatedStepCRs(s.Simulated(node))
	}
	out := make([]health.StepCR, len(crs))
	for i := range crs {
		out[i] = remediationcr.StepCR(&crs[i])
	}
	return out
}

// Node returns the decision about the named node and whether it is selected and not simply healthy.
func (s *Snapshot) Node(name string) (health.NodeDecision, bool) {
	i, found := slices.BinarySearchFunc(s.Decision.Nodes, name, func(d health.NodeDecision, n string) int {
		switch {
		case d.Name < n:
			return -1
		case d.Name > n:
			return 1
		}
		return 0
	})
	if !found {
		return health.NodeDecision{}, false
	}
	return s.Decision.Nodes[i], true
}

// controlPlaneElsewhere returns a control-plane node in remediation that this NodeHealthCheck's
// decision does not see: one with a CR labelled isControlPlaneNode (another NodeHealthCheck's, or
// ours for a node no longer selected), then the first (by name) control-plane node another
// NodeHealthCheck remediates; "" when there is none.
func (g *Gatherer) controlPlaneElsewhere(ctx context.Context, elsewhere map[string]string, labelled map[string]bool, orphans []string) (string, error) {
	names := slices.Sorted(maps.Keys(elsewhere))
	// A CR labelled as a control-plane node's counts whatever its node is now: the node may be gone
	// (being reprovisioned) or relabelled. Our own CRs of selected nodes are the decision's to count.
	for _, name := range slices.Concat(names, orphans) {
		if labelled[name] {
			return name, nil
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	if g.Nodes != nil {
		// Each looked up in the node store: no copy, no scan of every node.
		if _, _, known := g.Nodes.Node(names[0]); known {
			for _, name := range names {
				if n, exists, _ := g.Nodes.Node(name); exists && remediationcr.IsControlPlane(n.Labels) {
					return name, nil
				}
			}
			return "", nil
		}
	}
	// The control-plane nodes (a few), not every node remediated elsewhere (900 in the scale
	// benchmark's outage, each read and copied on every decision).
	controlPlane := map[string]bool{}
	for _, label := range []string{remediationcr.ControlPlaneRoleLabel, remediationcr.MasterRoleLabel} {
		list := &corev1.NodeList{}
		if err := g.Reader.List(ctx, list, client.HasLabels{label}, client.UnsafeDisableDeepCopy); err != nil {
			return "", fmt.Errorf("listing control-plane nodes: %w", err)
		}
		for i := range list.Items {
			controlPlane[list.Items[i].Name] = true
		}
	}
	for _, name := range names {
		if controlPlane[name] {
			return name, nil
		}
	}
	return "", nil
}

// StormState reads storm recovery's state from the stored conditions: the cooldown started when
// StormCooldownActive became True.
func StormState(conditions []metav1.Condition) health.StormState {
	var s health.StormState
	s.Active = meta.IsStatusConditionTrue(conditions, remediationv1alpha1.ConditionTypeStormActive)
	if c := meta.FindStatusCondition(conditions, remediationv1alpha1.ConditionTypeStormCooldownActive); s.Active && c != nil && c.Status == metav1.ConditionTrue {
		s.CooldownSince = c.LastTransitionTime.Time
	}
	return s
}

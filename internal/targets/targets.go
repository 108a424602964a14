package targets

import (
	"cmp"
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
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clockskew"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/nodetaints"
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
	// Gate is the upgrade gate, read only; nil: no upgrade awareness (tests of one controller alone).
	Gate UpgradeGate
	// MaxPause bounds how long each upgrade signal holds new remediations back; zero: no bound.
	MaxPause time.Duration
	// ReturnGrace is the returning-node hold (health.Input.ReturnGrace); zero: off.
	ReturnGrace time.Duration
	// RemovalHold bounds how long a node's removal holds its remediation back
	// (health.Input.RemovalHold); zero: no bound.
	RemovalHold time.Duration
	// Nodes, when set, finds the selected nodes without listing every node (watch.Affected); nil:
	// they are listed from Reader.
	Nodes NodeSource
	// Changes tells when this process saw nodes' conditions change (watch.ConditionChanges), for the
	// returning-node hold; nil: the conditions' lastTransitionTime alone counts.
	Changes ConditionChangeSource
	// Indexes are the cache's indexed stores of the remediation kinds and the nodes (watch.Indexes):
	// a decision looks up the CRs it depends on (its own, and other NodeHealthChecks' of its nodes
	// and of control-plane nodes) instead of listing every CR of the cluster. nil: every CR is
	// listed from Reader.
	Indexes Indexes
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
	// WatchErrors are the cache's list and watch errors (KindSync.Errors); nil: none recorded.
	WatchErrors *WatchErrors
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
	// Wall is the real clock, for the bounds on what the cache and its informers do, which happens
	// in real seconds whatever the decisions' clock (Gather's now) says: how long a CR this process
	// created counts before the cache shows it (Created), how long a decision waits for a kind's
	// first sync and how often a kind that does not sync is probed. nil: clock.RealClock.
	Wall clock.PassiveClock

	mu sync.Mutex
	// seen are the remediation kinds read since the process started: CRs of a kind no spec and no
	// status names any more (a template changed before the status listed its CR) are still found.
	seen []schema.GroupVersionKind
	// created are CRs this process created that the cache may not show yet (see Created).
	created []created
	// kinds is the readable-or-skip rule for the remediation kinds (kindReadable), made from
	// Informers, APIReader and Wall on first use.
	kinds *KindSync
	// overlaps are, by NodeHealthCheck, its overlaps with the others as last computed, and what
	// they were computed from (knownOverlaps).
	overlaps map[types.UID]overlapsMemo
	// kindMemo holds each NodeHealthCheck's remediation kinds at its resourceVersion (kindsOf).
	kindMemo kindsMemo
	// selectors are every NodeHealthCheck's selectors, indexed, as last parsed (knownOverlaps).
	selectors selectorsMemo
	// removals remembers when this gatherer first saw each node's removal whose signal carries no
	// time (removalSince); domains the failure domains it saw each node in (otherDomains).
	removals removalsSeen
	domains  domainsSeen
}

// Mode says who gathers: what a snapshot includes and what it takes from where follow from it.
type Mode int

const (
	// Reporting is the nhc controller, which writes status: the snapshot includes the overlaps
	// with other NodeHealthChecks, which only status reports.
	Reporting Mode = iota
	// Acting is the remediation controller: state that only the stored status holds (storm
	// recovery) must have been reported once before a new remediation starts on it.
	Acting
	// Explaining is a Gatherer outside the operator (kubectl nhc explain): what only the operator's
	// upgrade detectors know (upgrade signals, a conflicting OpenShift MachineHealthCheck) is taken
	// from the operator's report in the stored status.
	Explaining
)

// wall returns the real clock (Wall).
func (g *Gatherer) wall() clock.PassiveClock {
	if g.Wall == nil {
		return clock.RealClock{}
	}
	return g.Wall
}

// Options select what a snapshot includes.
type Options struct {
	// Templates, when set, reads every referenced template and reports a missing or invalid one as
	// a Problem (the nhc controller); the snapshot keeps them, for the CRs built from them
	// (Snapshot.Template).
	Templates TemplateGetter
	// TemplatesIf, when set, reads the templates only when the decision made without them asks for
	// it (the remediation controller: when it creates a CR; a template that may not be watched costs
	// a GET per read). The decision is then made again from the same reading with them: nothing
	// else is read again.
	TemplatesIf func(*Snapshot) bool
	// Mode says who gathers.
	Mode Mode
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
	Overlaps []health.Overlap
	// CoveredBy counts, per Cluster API MachineHealthCheck ("namespace/name"), the selected nodes it
	// covers (they are left to it).
	CoveredBy map[string]int
	// realRepairs and simulatedRepairs are the remediation starts the repair budget counts, by node
	// (repairStarts).
	realRepairs, simulatedRepairs map[string][]time.Time
	// refused are the values the selected nodes wrote that the decision does not act on
	// (RefusedInputs); inputDue is when the first of those dated a moment ahead takes effect.
	refused  []RefusedInput
	inputDue time.Time
	// budgetResets is the NodeHealthCheck's repair-budget-reset annotation, parsed (resets).
	budgetResets *budgetResets
	// CRs are the NodeHealthCheck's remediation CRs by node name, found by their owner reference in
	// every remediation kind any NodeHealthCheck references now or lists in its status.
	CRs map[string][]unstructured.Unstructured
	// Orphans are the nodes with CRs of this NodeHealthCheck that it does not select (deleted, or no
	// longer matched), sorted.
	Orphans []string
	// Previous are, by selected node, the NodeHealthCheck's CRs made for an earlier Node object of
	// that name (created before the node was: the Node was deleted and created again, whether or not
	// the watch showed it), but those of a remediator replacing the machine (KeptOrphanCR, the
	// node's remediation still): not the node's remediation. They are deleted as orphans are.
	Previous map[string][]unstructured.Unstructured
	// templates are the NodeHealthCheck's templates as read (Options.Templates set, no Problem), for
	// the CRs built from them (Template).
	templates map[templateKey]*unstructured.Unstructured
	// reading is what the snapshot was assembled from (Recheck decides again from it).
	reading *reading
	// baselines are, by selected node with a pending remediation request whose CRs record no
	// baseline, the node as the snapshot read it (RequestBaseline).
	baselines map[string]health.RequestBaseline
	// links are the selected nodes' Machine links as read (MachineLink).
	links map[string]machineLink
	// unselected are the nodes the stored status lists with CRs that the NodeHealthCheck does not
	// select, as read (nil: gone), for OutcomeNode.
	unselected map[string]*corev1.Node
	// unknown is what the snapshot cannot tell: kinds whose CRs cannot be read now, and the nodes
	// whose remediation may run unseen (LeaseUnknown, Unreadable).
	unknown unknownState
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

// Gather reads the NodeHealthCheck's world from the cache at now and decides, in four parts: read
// (the I/O: everything the decision depends on), assemble (pure: what was read, as the snapshot and
// the decision's input), the holds of the nodes that may act now (I/O for those nodes only: their
// leases and the etcd guard), and decide (pure).
func (g *Gatherer) Gather(ctx context.Context, stored *remediationv1alpha1.NodeHealthCheck, now time.Time, o Options) (*Snapshot, error) {
	upfront := o.Templates
	if o.TemplatesIf != nil {
		upfront = nil
	}
	r, err := g.read(ctx, stored, now, upfront)
	if err != nil {
		return nil, err
	}
	s, err := g.decideFrom(ctx, r, o.Mode)
	if err != nil || upfront != nil || o.Templates == nil || o.TemplatesIf == nil || !o.TemplatesIf(s) {
		return s, err
	}
	if r.templates, r.templateProblem, err = readTemplates(ctx, o.Templates, &r.nhc.Spec, r.verdict.OpenShift); err != nil {
		return nil, err
	}
	return g.decideFrom(ctx, r, o.Mode)
}

// decideFrom assembles what was read into the snapshot and the decision's input, adds what the
// gatherer remembers (removals, failure domains) and the holds of the nodes that may act, and
// decides. The same reading decides alike (what is remembered is updated at the same now).
func (g *Gatherer) decideFrom(ctx context.Context, r *reading, mode Mode) (*Snapshot, error) {
	if mode != Acting {
		g.knownOverlaps(r)
	}
	s, in := assemble(r, mode, g.ReturnGrace)
	in.RemovalHold = g.RemovalHold
	g.removalSince(&in, r.now)
	if fd := s.NHC.Spec.FailureDomain; fd != nil {
		g.otherDomains(&in, fd.TopologyKey, s.CRs, r.now)
	}
	if err := g.addHolds(ctx, s, &in); err != nil {
		return nil, err
	}
	s.decide(in)
	return s, nil
}

// reading is what Gather read for one NodeHealthCheck at one moment, before any policy.
type reading struct {
	// stored is the NodeHealthCheck as read, nhc a copy with defaults applied (objects admitted
	// without the webhook).
	stored, nhc *remediationv1alpha1.NodeHealthCheck
	now         time.Time
	// verdict is the upgrade gate's state; upgrade the NodeHealthCheck's UpgradeInProgress outcome.
	verdict upgrade.Verdict
	upgrade upgrade.Outcome
	// templateProblem is a missing or invalid template (when templates were read); templates are
	// those read, when none is.
	templateProblem *Problem
	templates       map[templateKey]*unstructured.Unstructured
	// links are the Machine links of the selected nodes that claim a Machine, or whose link could
	// not be read.
	links map[string]machineLink
	// selectorErr is why spec.selector does not parse (nothing is selected then).
	selectorErr error
	// nodes are the selected nodes, sorted by name, shared with the cache.
	nodes []*corev1.Node
	// unselected are the nodes the stored status lists with remediation CRs that are not selected,
	// shared with the cache (nil: the node does not exist).
	unselected map[string]*corev1.Node
	// seenChanging is, per selected node, when this process saw its conditions change (Changes);
	// countFrom, per selected node, when each condition whose time is not trusted counts from.
	seenChanging, countFrom map[string]map[corev1.NodeConditionType]time.Time
	// nhcs are every NodeHealthCheck, shared with the cache: read only.
	nhcs []*remediationv1alpha1.NodeHealthCheck
	// crs are the remediation CRs of every NodeHealthCheck, by owner; kinds what could not be read.
	crs   owned
	kinds kindsRead
	// controlPlane are the selected nodes that are control-plane nodes (by role label, or by their
	// verified Machine); controlPlaneElsewhere is a control-plane node in remediation that the
	// decision does not see (controlPlaneElsewhere), "" when there is none.
	controlPlane          map[string]bool
	controlPlaneElsewhere string
	// controlPlaneUnknown says why a selected node may be a control-plane node unseen (its Machine
	// cannot be read: it counts as one in controlPlane), "" when none may.
	controlPlaneUnknown string
	// skew is the clock skew's verdict when it is measured (Gatherer.Skew), nil otherwise.
	skew *clockskew.Verdict
	// labelEpoch is the node source's LabelEpoch before the nodes were read (epochKnown: it has
	// one); overlaps are the overlaps with other NodeHealthChecks when known before assemble
	// (overlapsKnown: Gatherer.knownOverlaps).
	labelEpoch    uint64
	epochKnown    bool
	overlaps      []health.Overlap
	overlapsKnown bool
}

// read does Gather's I/O: it reads, through the cache, everything the NodeHealthCheck's decision
// depends on but the holds of the nodes that may act (addHolds), which depend on the decision's input.
func (g *Gatherer) read(ctx context.Context, stored *remediationv1alpha1.NodeHealthCheck, now time.Time, templates TemplateGetter) (*reading, error) {
	r := &reading{stored: stored, nhc: stored.DeepCopy(), now: now, verdict: upgrade.Verdict{Known: true}}
	remediationv1alpha1.SetDefaults(r.nhc)
	if g.Gate != nil {
		r.verdict = g.Gate.Verdict()
	}
	var err error
	if templates != nil {
		if r.templates, r.templateProblem, err = readTemplates(ctx, templates, &r.nhc.Spec, r.verdict.OpenShift); err != nil {
			return nil, err
		}
	}
	if epochs, ok := g.Nodes.(LabelEpochSource); ok {
		r.labelEpoch, r.epochKnown = epochs.LabelEpoch(), true // before the nodes: a later change invalidates
	}
	if _, r.selectorErr = metav1.LabelSelectorAsSelector(&r.nhc.Spec.Selector); r.selectorErr == nil {
		if r.nodes, err = g.selectedNodes(ctx, r.nhc); err != nil {
			return nil, err
		}
	}
	if r.unselected, err = g.unselectedListed(ctx, stored, r.nodes); err != nil {
		return nil, err
	}
	if g.Changes != nil {
		r.seenChanging = map[string]map[corev1.NodeConditionType]time.Time{}
		for _, n := range r.nodes {
			seen, from := g.Changes.For(n)
			if seen != nil {
				r.seenChanging[n.Name] = seen
			}
			if from != nil {
				if r.countFrom == nil {
					r.countFrom = map[string]map[corev1.NodeConditionType]time.Time{}
				}
				r.countFrom[n.Name] = from
			}
		}
	}
	if err := g.readCRs(ctx, r); err != nil {
		return nil, err
	}
	r.controlPlane = map[string]bool{}
	for _, n := range r.nodes {
		m := g.machineLink(ctx, n)
		if m.link.Claimed || m.err != nil {
			if r.links == nil {
				r.links = map[string]machineLink{}
			}
			r.links[n.Name] = m
		}
		var unknown string
		if r.controlPlane[n.Name], unknown, err = controlPlaneOf(n, m); err != nil {
			return nil, err
		}
		r.controlPlaneUnknown = cmp.Or(r.controlPlaneUnknown, unknown)
	}
	r.upgrade = upgradeOutcome(g.Gate, stored, r.verdict, r.nodes, r.crs.ours, r.nhc.Spec.UnhealthyConditions, g.MaxPause, now)
	if g.Skew != nil {
		v := g.Skew.Verdict()
		r.skew = &v
	}
	return r, nil
}

// readCRs reads the NodeHealthChecks and the remediation CRs of every one of them, and the
// control-plane node in remediation that the decision does not see.
func (g *Gatherer) readCRs(ctx context.Context, r *reading) error {
	var err error
	if r.nhcs, err = g.nodeHealthChecks(ctx); err != nil {
		return err
	}
	all, kinds, err := g.remediationCRs(ctx, r.nhc, r.nhcs, r.nodes)
	if err != nil {
		return err
	}
	r.crs, r.kinds = sortByOwner(all, r.stored.UID, r.nodes), kinds
	r.controlPlaneElsewhere, err = g.controlPlaneElsewhere(ctx, r.crs.elsewhere, r.crs.labelledControlPlane, r.crs.orphans)
	return err
}

// NodeHealthCheckStore is what Indexes also offer when they can: the NodeHealthCheck informer's store,
// whose objects are the cache's (read only).
type NodeHealthCheckStore interface {
	NodeHealthChecks() (toolscache.Store, bool)
}

// nodeHealthChecks returns every NodeHealthCheck, shared with the cache (read only), in the cache's
// order. From the informer's store when the Indexes offer it (NodeHealthCheckStore): a list through
// the cache copies each object's struct (about 700 bytes) into a new slice, 250 of them on each
// decision at 25,000 nodes, held while the decision's writes are in flight.
func (g *Gatherer) nodeHealthChecks(ctx context.Context) ([]*remediationv1alpha1.NodeHealthCheck, error) {
	var out []*remediationv1alpha1.NodeHealthCheck
	if x, ok := g.Indexes.(NodeHealthCheckStore); ok {
		if store, ok := x.NodeHealthChecks(); ok {
			objs := store.List()
			out = make([]*remediationv1alpha1.NodeHealthCheck, 0, len(objs))
			for _, obj := range objs {
				if nhc, ok := obj.(*remediationv1alpha1.NodeHealthCheck); ok {
					out = append(out, nhc)
				}
			}
		}
	}
	if out == nil {
		list := &remediationv1alpha1.NodeHealthCheckList{}
		if err := g.Reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // read only
			return nil, fmt.Errorf("listing NodeHealthChecks: %w", err)
		}
		out = make([]*remediationv1alpha1.NodeHealthCheck, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
	}
	return out, nil
}

// Recheck decides again from the snapshot's reading with the remediation CRs read again (through
// the cache, as Gather reads them) and the holds of the nodes that may act: the one-at-a-time rule of
// control-plane nodes then sees a control-plane remediation another NodeHealthCheck started since
// the snapshot was taken, at the moment of the start. Nothing else is read again: the nodes, the
// templates and the Machine links are the snapshot's.
func (g *Gatherer) Recheck(ctx context.Context, s *Snapshot, mode Mode) (*Snapshot, error) {
	r := *s.reading
	if err := g.readCRs(ctx, &r); err != nil {
		return nil, err
	}
	r.upgrade = upgradeOutcome(g.Gate, r.stored, r.verdict, r.nodes, r.crs.ours, r.nhc.Spec.UnhealthyConditions, g.MaxPause, r.now)
	return g.decideFrom(ctx, &r, mode)
}

// owned is the remediation CRs sorted by owner: the NodeHealthCheck's own by node, and, for the
// others, who remediates which node.
type owned struct {
	// ours are the NodeHealthCheck's CRs by node name (never nil).
	ours map[string][]unstructured.Unstructured
	// elsewhere names, per node with CRs of other NodeHealthChecks, the first of them (in list order).
	elsewhere map[string]string
	// labelledControlPlane are the nodes with a CR (anyone's) labelled isControlPlaneNode.
	labelledControlPlane map[string]bool
	// orphans are the nodes with CRs of ours that the NodeHealthCheck does not select, sorted.
	orphans []string
	// previous are, by selected node, our CRs made for an earlier Node object of its name: created
	// before this one was.
	previous map[string][]unstructured.Unstructured
}

// sortByOwner sorts the CRs by owner, for the NodeHealthCheck uid that selects nodes.
func sortByOwner(crs []unstructured.Unstructured, uid types.UID, nodes []*corev1.Node) owned {
	o := owned{ours: map[string][]unstructured.Unstructured{}, elsewhere: map[string]string{}, labelledControlPlane: map[string]bool{}}
	for _, cr := range crs {
		name, owner, _ := remediationcr.ControllerNHC(&cr)
		node := remediationcr.NodeName(&cr)
		if _, cp := remediationcr.Label(&cr, remediationv1alpha1.ControlPlaneCRLabel); cp {
			o.labelledControlPlane[node] = true
		}
		if owner == uid {
			o.ours[node] = append(o.ours[node], cr)
		} else if _, seen := o.elsewhere[node]; !seen {
			o.elsewhere[node] = name
		}
	}
	selected := map[string]*corev1.Node{}
	for _, n := range nodes {
		selected[n.Name] = n
	}
	for node, crs := range o.ours {
		n, ok := selected[node]
		if !ok {
			o.orphans = append(o.orphans, node)
			continue
		}
		// A Node deleted and created again under the same name (a node that registered anew) is
		// another node: a CR created before it was (both times are the API server's) was made for the
		// earlier one, even where the watch never showed the deletion. But for a CR whose remediator
		// replaces the machine (KeptOrphanCR): the new Node is what it makes, and the CR goes on as
		// the node's remediation (removed once the node is healthy: NodeReplaced), as the public
		// operator, which compares names only, treats every CR.
		var current []unstructured.Unstructured
		for _, cr := range crs {
			if created := cr.GetCreationTimestamp().Time; !created.IsZero() && created.Before(n.CreationTimestamp.Time) && !KeptOrphanCR(&cr) {
				if o.previous == nil {
					o.previous = map[string][]unstructured.Unstructured{}
				}
				o.previous[node] = append(o.previous[node], cr)
				continue
			}
			current = append(current, cr)
		}
		if len(current) == 0 {
			delete(o.ours, node)
		} else {
			o.ours[node] = current
		}
	}
	slices.Sort(o.orphans)
	return o
}

// assemble turns what was read into the snapshot and the decision's input, for the mode: the
// NodeHealthCheck's problem, its overlaps, and the input's nodes, budget and blockers. It reads
// nothing: every rule that turns the cluster's state into the decision's input is here, and
// table-tested (assemble_test.go).
func assemble(r *reading, mode Mode, returnGrace time.Duration) (*Snapshot, health.Input) {
	s := &Snapshot{reading: r, Stored: r.stored, NHC: r.nhc, Now: r.now, Verdict: r.verdict, Upgrade: r.upgrade, Nodes: r.nodes,
		CRs: r.crs.ours, Orphans: r.crs.orphans, Previous: r.crs.previous, unselected: r.unselected, Skew: r.skew, badSelector: r.selectorErr != nil, Unwatchable: r.kinds.problem != nil}
	s.Problem, s.unknown, s.templates, s.links = r.templateProblem, unknownOf(r), r.templates, r.links
	if conflict := r.verdict.MachineHealthChecks.Conflict; conflict != "" {
		s.Problem = &Problem{remediationv1alpha1.ConditionReasonDisabledMHC, conflict}
	}
	if r.selectorErr != nil && s.Problem == nil {
		// Admitted without the webhook (CEL cannot check label syntax): nothing is selected, and
		// the CRs it has wait (KeepsOrphans) rather than being taken for those of unselected nodes.
		s.Problem = &Problem{remediationv1alpha1.ConditionReasonDisabledInvalidConfig, fmt.Sprintf("spec.selector is invalid: %v", r.selectorErr)}
	}
	if r.kinds.problem != nil && s.Problem == nil {
		s.Problem = r.kinds.problem
	}
	if mode != Acting {
		// Reported in status only; the remediation controller's decisions do not need them.
		if s.Overlaps = r.overlaps; !r.overlapsKnown {
			s.Overlaps = health.Overlaps(r.stored.Name, r.nodes, r.nhcs)
		}
	}
	for _, n := range r.nodes {
		if mhc := r.verdict.CoveredByMachineHealthCheck[n.Name]; mhc != "" {
			if s.CoveredBy == nil {
				s.CoveredBy = map[string]int{}
			}
			s.CoveredBy[mhc]++
		}
	}

	spec, stored := &s.NHC.Spec, r.stored
	in := health.Input{Now: r.now, UnhealthyConditions: spec.UnhealthyConditions, MinHealthy: spec.MinHealthy,
		MaxUnhealthy: spec.MaxUnhealthy, ControlPlaneElsewhere: r.controlPlaneElsewhere, ReturnGrace: returnGrace, Steps: Steps(spec), DryRun: s.DryRun()}
	if r.kinds.unlisted != "" {
		in.ControlPlaneUnknown = fmt.Sprintf("the remediation CRs of kind %s cannot be listed, so a control-plane remediation of another NodeHealthCheck may be unseen", r.kinds.unlisted)
	}
	in.ControlPlaneUnknown = cmp.Or(in.ControlPlaneUnknown, r.controlPlaneUnknown)
	if spec.HealthyDelay != nil {
		in.HealthyDelay = &spec.HealthyDelay.Duration
	}
	if spec.StormCooldownDuration != nil {
		in.StormCooldown = &spec.StormCooldownDuration.Duration
		in.Storm = StormState(stored.Status.Conditions)
	}
	healthySince := map[string]time.Time{}
	for _, e := range stored.Status.UnhealthyNodes {
		if e.ConditionsHealthyTimestamp != nil {
			healthySince[e.Name] = e.ConditionsHealthyTimestamp.Time
		}
	}
	in.RepairBudget = repairBudget(spec)
	in.MaxInFlight = spec.MaxInFlight
	if in.MaxInFlight != nil {
		in.InFlightUnselected = s.inFlightUnselected()
	}
	if fd := spec.FailureDomain; fd != nil {
		in.FailureDomain = &health.FailureDomain{TopologyKey: fd.TopologyKey, MaxUnhealthy: fd.MaxUnhealthy}
	}
	s.realRepairs, s.simulatedRepairs = map[string][]time.Time{}, map[string][]time.Time{}
	// One allocation for the nodes' inputs: grown by append, they were a fifth of the manager's
	// allocations at 5,000 nodes (a health.Node is large, and every decision makes one per node).
	in.Nodes = make([]health.Node, 0, len(r.nodes))
	for _, n := range r.nodes {
		var repairs []time.Time
		if in.RepairBudget != nil {
			real, simulated := s.repairStarts(n)
			s.realRepairs[n.Name], s.simulatedRepairs[n.Name] = real, simulated
			repairs = slices.Concat(real, simulated)
			slices.SortFunc(repairs, func(a, b time.Time) int { return a.Compare(b) })
		}
		_, confirmed := n.Annotations[remediationv1alpha1.ManuallyConfirmedHealthyAnnotation]
		hn := health.Node{Name: n.Name, Conditions: n.Status.Conditions, Remediating: len(s.CRs[n.Name]) > 0 || len(s.Simulated(n.Name)) > 0, CRs: s.stepCRs(n.Name),
			Simulated:    len(s.CRs[n.Name]) == 0 && len(s.Simulated(n.Name)) > 0,
			HealthySince: healthySince[n.Name], ConfirmedHealthy: confirmed,
			Excluded: n.Labels[remediationv1alpha1.ExcludeFromRemediationLabel] == "true", ControlPlane: r.controlPlane[n.Name],
			LeftToMachineHealthCheck: upgrade.LeftToMachineHealthCheck(r.verdict.MachineHealthChecks, n), Created: n.CreationTimestamp.Time,
			SeenChanging: r.seenChanging[n.Name], CountFrom: countFrom(spec.UnhealthyConditions, n, r.countFrom[n.Name]),
			Repairs: repairs, CoveredBy: r.verdict.CoveredByMachineHealthCheck[n.Name]}
		if !hn.Remediating {
			hn.RemediatedElsewhere, hn.ElsewhereUnknown = r.crs.elsewhere[n.Name], s.unknown.elsewhere(n.Name)
		}
		if fd := spec.FailureDomain; fd != nil {
			hn.Domain = n.Labels[fd.TopologyKey]
		}
		if spec.SkipNodesBeingRemoved {
			removal := nodetaints.BeingRemoved(n)
			hn.BeingRemovedBy, hn.BeingRemovedSince = removal.By, removal.Since
		}
		var due time.Time
		hn.Requested, hn.RunningRequest, due = s.request(n)
		s.inputDue = health.Earliest(s.inputDue, due)
		recorded := remediationcr.BaselineOf(s.CRs[n.Name])
		if !hn.RunningRequest.IsZero() {
			hn.RequestBaseline = recorded
		}
		if !hn.Requested.IsZero() && recorded == nil {
			// The node as a remediation answering its request finds it, recorded on its first CR.
			if s.baselines == nil {
				s.baselines = map[string]health.RequestBaseline{}
			}
			s.baselines[n.Name] = health.Baseline(spec.UnhealthyConditions, n.Status.Conditions, s.Now)
		}
		in.Nodes = append(in.Nodes, hn)
	}
	if mode == Explaining {
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
	if len(spec.PauseRequests) > 0 {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipPaused, Message: fmt.Sprintf("paused by %q", spec.PauseRequests)})
	}
	if s.Upgrade.Blocked != "" {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipUpgrade, Message: s.Upgrade.Blocked})
	}
	if r.skew != nil {
		if b := skewBlocker(*r.skew); b != nil {
			in.Blockers = append(in.Blockers, *b)
		}
	}
	if mode == Acting && in.StormCooldown != nil && meta.FindStatusCondition(stored.Status.Conditions, remediationv1alpha1.ConditionTypeStormActive) == nil {
		in.Blockers = append(in.Blockers, health.Blocker{Reason: health.SkipStorm,
			Message: "storm recovery is on and its state has not been reported in status yet"})
	}
	return s, in
}

// countFrom keeps, of when each of the node's conditions whose time is not trusted counts from,
// those an unhealthy condition matches (type and status): only they weigh in a decision, and only
// they are reported (nil: none).
func countFrom(rules []remediationv1alpha1.UnhealthyCondition, n *corev1.Node, from map[corev1.NodeConditionType]time.Time) map[corev1.NodeConditionType]time.Time {
	var out map[corev1.NodeConditionType]time.Time
	for _, c := range n.Status.Conditions {
		at, untrusted := from[c.Type]
		if !untrusted || !slices.ContainsFunc(rules, func(u remediationv1alpha1.UnhealthyCondition) bool { return u.Type == c.Type && u.Status == c.Status }) {
			continue
		}
		if out == nil {
			out = map[corev1.NodeConditionType]time.Time{}
		}
		out[c.Type] = at
	}
	return out
}

// decide makes the snapshot's decision from the input.
func (s *Snapshot) decide(in health.Input) {
	s.Input = in
	s.Decision = health.Decide(in)
	if s.DryRun() && in.RepairBudget != nil {
		// A simulated start is recorded with the status write that records its first step: no CR
		// event brings the NodeHealthCheck back to record it later, as one does for a real start.
		for _, d := range s.Decision.Nodes {
			if d.Action == health.StartRemediation && len(s.CRs[d.Name]) == 0 {
				s.simulatedRepairs[d.Name] = append(s.simulatedRepairs[d.Name], s.Now)
			}
		}
	}
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
		return &health.Blocker{Reason: health.SkipClockSkew, Message: v.Beyond()}
	}
	return nil
}

// Template returns the template the reference names as this snapshot read it (a copy): the CR the
// decision asks for is built from it, never from a template read again. False when the snapshot
// read no templates (Options.Templates unset) or found a Problem.
func (s *Snapshot) Template(ref corev1.ObjectReference) (*unstructured.Unstructured, bool) {
	t, ok := s.templates[keyOf(ref)]
	if !ok {
		return nil, false
	}
	return t.DeepCopy(), true
}

// MachineLink returns the selected node's link to its Machine as the snapshot read it, verified
// (the decision's control-plane rule read the same link), for the CRs built for the node; an error
// when it could not be read (a Machine kind not synced: no CR is built without its Machine).
func (s *Snapshot) MachineLink(node string) (MachineLink, error) {
	m := s.links[node]
	return m.link, m.err
}

// RequestBaseline returns the node as the snapshot read it, for the first CR of a remediation
// answering its pending request to record (remediationcr.EncodeBaseline); false when the node has no
// pending request, or its CRs record a baseline already.
func (s *Snapshot) RequestBaseline(node string) (health.RequestBaseline, bool) {
	b, ok := s.baselines[node]
	return b, ok
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
// delay, a storm cooldown, a hold's end, the maximum upgrade pause or a node's request or budget reset
// dated a moment ahead; zero when nothing is pending.
func (s *Snapshot) Next() time.Time {
	return health.Earliest(health.Earliest(s.Decision.Next, s.Upgrade.Expires), s.inputDue)
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

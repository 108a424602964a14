package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clusterapi"
	"github.com/medik8s/node-healthcheck/internal/openshift"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/targets"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// Options are the operator's settings the decisions depend on; they must match the running
// operator's flags.
type Options struct {
	// Now is the time to decide at (zero: now).
	Now time.Time
	// LeaseNamespace is where node leases live (the operator's --lease-namespace).
	LeaseNamespace string
	// ReturnGrace is the operator's --returning-node-grace.
	ReturnGrace time.Duration
	// RemovalHold is the operator's --removal-hold (as it publishes it, else its default).
	RemovalHold time.Duration
	// SettingsFrom says where LeaseNamespace and ReturnGrace come from (the operator's published
	// settings, the flags, or the defaults and why), printed with the answer; empty: not printed.
	SettingsFrom string
	// Output is the answer's format: OutputText (""), OutputJSON or OutputYAML.
	Output string
}

// Check is one NodeHealthCheck's snapshot and decision.
type Check struct {
	Snapshot *targets.Snapshot
}

// Gather reads and decides every NodeHealthCheck (sorted by name).
func Gather(ctx context.Context, c client.Client, o Options) ([]Check, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	list := &remediationv1alpha1.NodeHealthCheckList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing NodeHealthChecks: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b remediationv1alpha1.NodeHealthCheck) int { return strings.Compare(a.Name, b.Name) })
	// The nodes Cluster API MachineHealthChecks cover, as the operator's detector finds them.
	coverage, err := clusterAPICoverage(ctx, c)
	if err != nil {
		return nil, err
	}
	// OpenShift's rules as the operator's detectors find them: OpenShift when its Infrastructure kind
	// is served (the Metal3 template rule, the etcd guard), and the Machine API's MachineHealthChecks
	// (a conflicting one disables, the termination handler takes terminating nodes).
	openShift, mhcs, err := openShiftView(ctx, c)
	if err != nil {
		return nil, err
	}
	gate := gateAsSeen{upgrade.Verdict{Known: true, OpenShift: openShift, MachineHealthChecks: mhcs, CoveredByMachineHealthCheck: coverage}}
	// Nodes' Machines straight from the API server, kinds from the RESTMapper alone (the user may not
	// be allowed to read CRDs).
	g := &targets.Gatherer{Reader: c, ReturnGrace: o.ReturnGrace, RemovalHold: o.RemovalHold, Gate: gate, Machines: &targets.Machines{Reader: c, Mapper: c.RESTMapper()},
		Leases: c, LeaseNamespace: o.LeaseNamespace, Etcd: &targets.EtcdReader{Reader: c, Mapper: c.RESTMapper()}}
	var out []Check
	for i := range list.Items {
		snap, err := g.Gather(ctx, &list.Items[i], o.Now, targets.Options{Templates: c, Mode: targets.Explaining})
		if err != nil {
			return nil, fmt.Errorf("NodeHealthCheck %s: %w", list.Items[i].Name, err)
		}
		out = append(out, Check{Snapshot: snap})
	}
	return out, nil
}

// gateAsSeen is the upgrade gate as explain sees it from outside the operator: known, with the
// Cluster API coverage it finds itself (clusterAPICoverage). What only the operator's detectors know
// (upgrade signals, a conflicting OpenShift MachineHealthCheck) comes from the operator's report in
// status (targets.Explaining). It is a targets.UpgradeGate that nothing writes.
type gateAsSeen struct{ v upgrade.Verdict }

// Verdict implements targets.UpgradeGate.
func (g gateAsSeen) Verdict() upgrade.Verdict { return g.v }

// NodeSince implements targets.UpgradeGate: explain sees no node-level detector on, and remembers
// nothing, so a signal without Since begins now.
func (g gateAsSeen) NodeSince(_ string, signals []upgrade.Signal, now time.Time) []upgrade.Signal {
	out := slices.Clone(signals)
	for i := range out {
		if out[i].Since.IsZero() {
			out[i].Since = now
		}
	}
	return out
}

// etcdVerdict is the etcd quorum guard's verdict on disrupting a control-plane node now, on
// OpenShift, as the operator would find it before it starts a remediation ("" for a worker, or
// off OpenShift).
func etcdVerdict(ctx context.Context, c client.Client, checks []Check, node *corev1.Node) string {
	controlPlane, openShift := remediationcr.IsControlPlane(node.Labels), false
	for _, ch := range checks {
		openShift = openShift || ch.Snapshot.Verdict.OpenShift
		if n, ok := inputNode(ch.Snapshot, node.Name); ok && n.ControlPlane {
			controlPlane = true
		}
	}
	if !controlPlane || !openShift {
		return ""
	}
	objections, err := (&targets.EtcdReader{Reader: c, Mapper: c.RESTMapper()}).Objections(ctx, []string{node.Name})
	switch {
	case err != nil:
		return "not known: " + err.Error()
	case objections[node.Name] != "":
		return objections[node.Name] + "; no remediation of the node starts meanwhile"
	}
	return "disrupting the node now keeps etcd quorum"
}

// openShiftView reports whether the cluster is OpenShift (its Infrastructure kind is served, as the
// operator's Infrastructure detector decides) and classifies its MachineHealthChecks as the
// operator's MachineHealthCheck detector does (none where the kind is not served).
func openShiftView(ctx context.Context, c client.Client) (bool, upgrade.MachineHealthChecks, error) {
	_, err := c.RESTMapper().RESTMapping(openshift.Infrastructure.GroupKind(), openshift.Infrastructure.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, upgrade.MachineHealthChecks{}, nil
	case err != nil:
		return false, upgrade.MachineHealthChecks{}, fmt.Errorf("finding OpenShift's Infrastructure kind: %w", err)
	}
	mapping, err := c.RESTMapper().RESTMapping(openshift.MachineHealthCheck.GroupKind(), openshift.MachineHealthCheck.Version)
	if meta.IsNoMatchError(err) {
		return true, upgrade.MachineHealthChecks{}, nil
	}
	if err != nil {
		return true, upgrade.MachineHealthChecks{}, fmt.Errorf("finding the Machine API's MachineHealthCheck kind: %w", err)
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind("MachineHealthCheckList"))
	if err := c.List(ctx, l); err != nil {
		return true, upgrade.MachineHealthChecks{}, fmt.Errorf("listing MachineHealthChecks: %w", err)
	}
	return true, upgrade.ClassifyMachineHealthChecks(l.Items), nil
}

// clusterAPICoverage lists Cluster API MachineHealthChecks and Machines (none where the kinds are not
// served) and returns the nodes they cover.
func clusterAPICoverage(ctx context.Context, c client.Client) (map[string]string, error) {
	var lists [2][]unstructured.Unstructured
	for i, gk := range []schema.GroupKind{clusterapi.MachineHealthCheck, clusterapi.Machine} {
		kind := gk.Kind
		mapping, err := c.RESTMapper().RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("finding Cluster API's %s kind: %w", kind, err)
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(kind + "List"))
		if err := c.List(ctx, l); err != nil {
			return nil, fmt.Errorf("listing Cluster API %ss: %w", kind, err)
		}
		lists[i] = l.Items
	}
	return upgrade.ClusterAPICoverage(lists[0], lists[1]), nil
}

package upgradeguard

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/clusterapi"
	"github.com/medik8s/node-healthcheck/internal/openshift"
	"github.com/medik8s/node-healthcheck/internal/upgrade"
)

// detector is one source of upgrade information. Each is evaluated as a whole, under its own
// reconcile request (its name), whenever one of the objects of its kinds changes.
type detector struct {
	name string
	// kinds are the kinds it reads; the served ones are watched through the shared cache.
	kinds []schema.GroupKind
	// auto detectors are on when the API server serves one of their kinds (OpenShift); the others
	// are on when their flag is.
	auto bool
	// evaluate reads the served kinds and reports to the gate; it returns when to look again without
	// an event (zero: only on events).
	evaluate func(ctx context.Context, g *Guard, served []schema.GroupVersionKind) (time.Time, error)
}

// Groups and kinds the detectors read.
var (
	clusterVersionKind     = openshift.ClusterVersion.GroupKind()
	infrastructureKind     = openshift.Infrastructure.GroupKind()
	machineHealthCheckKind = openshift.MachineHealthCheck.GroupKind()
)

// detectors in the order their signals are reported.
var detectors = []detector{
	{name: upgrade.DetectorClusterVersion, kinds: []schema.GroupKind{clusterVersionKind}, auto: true, evaluate: evaluateClusterVersion},
	{name: upgrade.DetectorInfrastructure, kinds: []schema.GroupKind{infrastructureKind}, auto: true, evaluate: evaluateInfrastructure},
	{name: upgrade.DetectorMachineHealthCheck, kinds: []schema.GroupKind{machineHealthCheckKind}, auto: true, evaluate: evaluateMachineHealthChecks},
	{name: upgrade.DetectorClusterAPI, kinds: []schema.GroupKind{clusterapi.KubeadmControlPlane, clusterapi.MachineDeployment}, evaluate: evaluateClusterAPI},
	{name: upgrade.DetectorClusterAPIMachineHealthCheck, kinds: []schema.GroupKind{clusterapi.MachineHealthCheck, clusterapi.Machine}, auto: true, evaluate: evaluateClusterAPIMachineHealthChecks},
	{name: upgrade.DetectorPauseObject, evaluate: evaluatePauseObject},
}

// list lists every object of the served kinds from the cache.
func list(ctx context.Context, c client.Reader, served []schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, gvk := range served {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, l); err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		out = append(out, l.Items...)
	}
	return out, nil
}

func evaluateClusterVersion(ctx context.Context, g *Guard, served []schema.GroupVersionKind) (time.Time, error) {
	cvs, err := list(ctx, g.Client, served)
	if err != nil {
		return time.Time{}, err
	}
	var signals []upgrade.Signal
	for i := range cvs {
		if s := upgrade.ClusterVersionProgressing(&cvs[i]); s != nil {
			signals = append(signals, *s)
		}
	}
	g.report(ctx, upgrade.DetectorClusterVersion, signals)
	return time.Time{}, nil
}

// evaluateInfrastructure tells the gate whether this is OpenShift (the Infrastructure kind is
// served): there, as for the public operator, a node being updated by the Machine Config Operator
// holds new remediations, whatever the control-plane topology.
func evaluateInfrastructure(_ context.Context, g *Guard, served []schema.GroupVersionKind) (time.Time, error) {
	g.Gate.SetOpenShift(len(served) > 0)
	return time.Time{}, nil
}

func evaluateMachineHealthChecks(ctx context.Context, g *Guard, served []schema.GroupVersionKind) (time.Time, error) {
	mhcs, err := list(ctx, g.Client, served)
	if err != nil {
		return time.Time{}, err
	}
	m := upgrade.ClassifyMachineHealthChecks(mhcs)
	before, known := g.Gate.MachineHealthChecks()
	g.Gate.SetMachineHealthChecks(m)
	if known && m == before {
		return time.Time{}, nil
	}
	if m.Conflict != "" {
		ctrl.LoggerFrom(ctx).Info("Conflicting MachineHealthCheck found, NodeHealthChecks are disabled", "detail", m.Conflict)
	}
	for i := range mhcs {
		ref := &corev1.ObjectReference{APIVersion: mhcs[i].GetAPIVersion(), Kind: mhcs[i].GetKind(), Namespace: mhcs[i].GetNamespace(), Name: mhcs[i].GetName(), UID: mhcs[i].GetUID()}
		switch {
		case m.Conflict != "":
			g.event(ref, corev1.EventTypeWarning, remediationv1alpha1.EventReasonConflictingMachineHealthCheck,
				"NodeHealthChecks are disabled while this MachineHealthCheck exists: it would remediate the same machines")
		case m.Terminating != "":
			g.event(ref, corev1.EventTypeNormal, remediationv1alpha1.EventReasonTerminationHandlerTolerated,
				fmt.Sprintf("NodeHealthChecks leave nodes with condition %s=%s to this MachineHealthCheck", upgrade.TerminatingCondition, m.Terminating))
		}
	}
	return time.Time{}, nil
}

// evaluateClusterAPIMachineHealthChecks finds the nodes Cluster API MachineHealthChecks cover: those
// nodes are left to them (health.SkipCoveredByMachineHealthCheck). Each MachineHealthCheck whose
// coverage changed gets an event saying how many nodes NodeHealthChecks leave to it.
func evaluateClusterAPIMachineHealthChecks(ctx context.Context, g *Guard, served []schema.GroupVersionKind) (time.Time, error) {
	objs, err := list(ctx, g.Client, served)
	if err != nil {
		return time.Time{}, err
	}
	var mhcs, machines []unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == clusterapi.MachineHealthCheck.Kind {
			mhcs = append(mhcs, o)
		} else {
			machines = append(machines, o)
		}
	}
	coverage := upgrade.ClusterAPICoverage(mhcs, machines)
	before := upgrade.CoverageCounts(g.Gate.SetClusterAPICoverage(coverage))
	after := upgrade.CoverageCounts(coverage)
	for i := range mhcs {
		key := mhcs[i].GetNamespace() + "/" + mhcs[i].GetName()
		if after[key] == before[key] || after[key] == 0 {
			continue
		}
		ref := &corev1.ObjectReference{APIVersion: mhcs[i].GetAPIVersion(), Kind: mhcs[i].GetKind(), Namespace: mhcs[i].GetNamespace(), Name: mhcs[i].GetName(), UID: mhcs[i].GetUID()}
		g.event(ref, corev1.EventTypeWarning, remediationv1alpha1.EventReasonConflictingMachineHealthCheck,
			fmt.Sprintf("This MachineHealthCheck covers %d node(s) that NodeHealthChecks select or may select; NodeHealthChecks leave them to it", after[key]))
		ctrl.LoggerFrom(ctx).Info("Cluster API MachineHealthCheck covers nodes; NodeHealthChecks leave them to it", "machineHealthCheck", key, "nodes", after[key])
	}
	return time.Time{}, nil
}

func evaluateClusterAPI(ctx context.Context, g *Guard, served []schema.GroupVersionKind) (time.Time, error) {
	objs, err := list(ctx, g.Client, served)
	if err != nil {
		return time.Time{}, err
	}
	g.report(ctx, upgrade.DetectorClusterAPI, upgrade.ClusterAPIRollouts(objs))
	return time.Time{}, nil
}

func evaluatePauseObject(ctx context.Context, g *Guard, _ []schema.GroupVersionKind) (time.Time, error) {
	key := client.ObjectKey{Namespace: g.PauseObject.Namespace, Name: g.PauseObject.Name}
	cm := &corev1.ConfigMap{}
	switch err := g.pauseCache.Get(ctx, key, cm); {
	case err == nil:
		g.report(ctx, upgrade.DetectorPauseObject, []upgrade.Signal{*upgrade.PauseConfigMap(cm)})
		return time.Time{}, nil
	case !apierrors.IsNotFound(err):
		return time.Time{}, fmt.Errorf("getting pause ConfigMap %s: %w", key, err)
	}
	lease := &coordinationv1.Lease{}
	switch err := g.pauseCache.Get(ctx, key, lease); {
	case err == nil:
		var signals []upgrade.Signal
		s, until := upgrade.PauseLease(lease, g.Clock.Now())
		if s != nil {
			signals = append(signals, *s)
		}
		g.report(ctx, upgrade.DetectorPauseObject, signals)
		return until, nil
	case !apierrors.IsNotFound(err):
		return time.Time{}, fmt.Errorf("getting pause Lease %s: %w", key, err)
	}
	g.report(ctx, upgrade.DetectorPauseObject, nil)
	return time.Time{}, nil
}

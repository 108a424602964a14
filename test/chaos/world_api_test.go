package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/nodetaints"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// world is the driver: the model, the API (an uncached client), the managers, the fault injector,
// the CR recorder and the checker.
type world struct {
	t        testing.TB
	k8s      client.Client
	clock    *clocktesting.FakeClock
	start    time.Time
	rng      *rand.Rand
	cur      *state
	managers *managers
	faults   *faults
	rec      *recorder
	checker  *checker
	nhcUIDs  map[string]types.UID
	// env is the control plane, whose API server a move restarts; conv the conversion webhook of
	// conv-1's remediator, which a move stops and starts.
	env  *envtest.Environment
	conv *testutil.ConversionWebhook

	// faultRate is the rate of random API failures while turned on (0: off).
	faultRate float64
	// poked is set when this step made the controllers reconcile every NodeHealthCheck.
	poked bool
	// watchesHeld is set while the managers' watches wait for the step's moves to be done;
	// reportLists when the step dropped watches or restarted the API server.
	watchesHeld, reportLists bool
	// skip are kinds of moves a random run does not make (CHAOS_SKIP).
	skip []string
	// writes are the objects the driver wrote in this step, by key.
	writes map[string]written
	// leaderName is the leader at the last settle; depthBaseline and awaitReconciles: see settle.
	leaderName      string
	depthBaseline   float64
	awaitReconciles float64

	settleTotal, settleLongest time.Duration
	unsettled                  int
	// moveCounts counts the moves made, by kind (a step of several, as "burst").
	moveCounts map[string]int
}

func (w *world) logf(format string, args ...any) {
	w.t.Helper()
	w.t.Logf(format, args...)
}

// fakeElapsed formats how far the fake clock is from the start.
func (w *world) fakeElapsed() string {
	return "+" + w.cur.Now.Sub(w.start).String()
}

func (w *world) wrote(obj client.Object, deleted bool) {
	key := fmt.Sprintf("%T/%s", obj, client.ObjectKeyFromObject(obj))
	if u, ok := obj.(*unstructured.Unstructured); ok {
		key = u.GetKind() + "/" + client.ObjectKeyFromObject(obj).String()
	}
	if w.writes == nil {
		w.writes = map[string]written{}
	}
	w.writes[key] = written{obj: obj, rv: resourceVersion(obj), deleted: deleted}
}

// patchNode merge-patches the node (or its status) and records the write.
func (w *world) patchNode(ctx context.Context, name string, status bool, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if status {
		err = w.k8s.Status().Patch(ctx, n, client.RawPatch(types.MergePatchType, raw))
	} else {
		err = w.k8s.Patch(ctx, n, client.RawPatch(types.MergePatchType, raw))
	}
	if err != nil {
		return fmt.Errorf("patching node %s: %w", name, err)
	}
	w.wrote(n, false)
	return nil
}

// setReady sets the node's Ready condition, changed at the fake clock's now, in the API and the
// model.
func (w *world) setReady(ctx context.Context, name string, status corev1.ConditionStatus) error {
	return w.writeReady(ctx, name, status, w.cur.Now)
}

// writeReady writes the node's Ready condition as changed at since, by a writer whose clock says
// since (its heartbeat too): the fake clock's now, or earlier for a slow writer.
func (w *world) writeReady(ctx context.Context, name string, status corev1.ConditionStatus, since time.Time) error {
	at := metav1.NewTime(since)
	err := w.patchNode(ctx, name, true, map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: status, LastTransitionTime: at, LastHeartbeatTime: at, Reason: "Chaos", Message: "set by the chaos driver",
	}}}})
	if err != nil {
		return err
	}
	n := w.cur.Nodes[name]
	if n.Ready != corev1.ConditionTrue || status != corev1.ConditionTrue {
		n.HealthyFrom = w.cur.Step
	}
	if n.Ready == corev1.ConditionTrue && status != corev1.ConditionTrue {
		n.Failures++
	}
	if n.Ready != status || !n.Since.Equal(since) {
		// A write of the status and time the node has already (a script's fix of a healthy node
		// within the second it was written) changes nothing the operator can see.
		n.Writes++
	}
	n.Ready, n.Since = status, since
	n.Written, n.WrittenManagers, n.SeenBy = w.cur.Now, w.managers.seq, time.Time{}
	w.cur.Nodes[name] = n
	return nil
}

// seen records, after a settled step, that the leader's watch has shown every condition written
// since the last settled step, by now (node.SeenBy).
func (w *world) seen() {
	for name, n := range w.cur.Nodes {
		if n.Exists && n.SeenBy.IsZero() {
			n.SeenBy = w.cur.Now
			w.cur.Nodes[name] = n
		}
	}
}

// setLabels writes the model node's labels (pool, exclusion) to the API.
func (w *world) setLabels(ctx context.Context, n node) error {
	labels := map[string]any{poolLabel: nil, excludeLabel: nil}
	for k, v := range n.labels() {
		labels[k] = v
	}
	if err := w.patchNode(ctx, n.Name, false, map[string]any{"metadata": map[string]any{"labels": labels}}); err != nil {
		return err
	}
	w.cur.Nodes[n.Name] = n
	return nil
}

// createNode creates the model node, healthy.
// createNode creates the model node with its Ready condition, as a kubelet registers its node with
// its status: there is no moment at which the node exists without conditions (which the operator
// would count healthy and not just back, a state the model does not have).
func (w *world) createNode(ctx context.Context, n node) error {
	now := metav1.NewTime(w.cur.Now)
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.labels(), Annotations: n.annotations()},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: n.Ready, LastTransitionTime: now,
			LastHeartbeatTime: now, Reason: "Chaos", Message: "set by the chaos driver"}}}}
	if err := w.k8s.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating node %s: %w", n.Name, err)
	}
	if len(obj.Status.Conditions) != 1 {
		return fmt.Errorf("creating node %s: the API server dropped its status", n.Name)
	}
	w.wrote(obj, false)
	n.Exists, n.Created, n.CreatedStep, n.Since, n.HealthyFrom = true, obj.CreationTimestamp.Time, w.cur.Step, w.cur.Now, w.cur.Step
	n.Written, n.WrittenManagers, n.SeenBy = w.cur.Now, w.managers.seq, time.Time{}
	n.Writes++
	// A new Node object: no request, no handled record.
	n.Request, n.RequestAt, n.RequestStep, n.PrevRequestAt, n.HandledForged = "", time.Time{}, 0, time.Time{}, false
	w.cur.Nodes[n.Name] = n
	return nil
}

// request plays a client (kubectl nhc request, or the node's own kubelet) that asks for the node's
// remediation: its request-remediation annotation dated as the kind says (model.requestTimes), or
// not a time.
func (w *world) request(ctx context.Context, name, kind string) (string, error) {
	n := w.cur.Nodes[name]
	value, at := "soon", time.Time{}
	if d, ok := requestTimes[kind]; ok {
		at = w.cur.Now.Add(d)
		value = at.UTC().Format(time.RFC3339)
	}
	if err := w.patchNode(ctx, name, false, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		remediationv1alpha1.RemediationRequestAnnotation: value}}}); err != nil {
		return "", err
	}
	if n.RequestAt.After(n.PrevRequestAt) {
		n.PrevRequestAt = n.RequestAt
	}
	n.Request, n.RequestAt, n.RequestStep = kind, at, w.cur.Step
	w.cur.Nodes[name] = n
	return fmt.Sprintf("%s's remediation requested: %s=%s (%s)", name, remediationv1alpha1.RemediationRequestAnnotation, value, kind), nil
}

// forgeHandled plays a node's kubelet that writes its own remediation-request-handled annotation
// dated an hour ahead: were it trusted, every request until then would count as answered.
func (w *world) forgeHandled(ctx context.Context, name string) (string, error) {
	value := w.cur.Now.Add(time.Hour).UTC().Format(time.RFC3339)
	if err := w.patchNode(ctx, name, false, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		remediationv1alpha1.RemediationRequestHandledAnnotation: value}}}); err != nil {
		return "", err
	}
	n := w.cur.Nodes[name]
	n.HandledForged = true
	w.cur.Nodes[name] = n
	return fmt.Sprintf("%s's kubelet forges %s=%s (an hour ahead)", name, remediationv1alpha1.RemediationRequestHandledAnnotation, value), nil
}

// setClaim writes the node's Machine claim (the model node's annotations) to the API.
func (w *world) setClaim(ctx context.Context, n node) error {
	annotations := map[string]any{machines.ClusterAPIMachineAnnotation: nil, machines.ClusterAPINamespaceAnnotation: nil, machines.ClusterAPIClusterNameAnnotation: nil}
	for k, v := range n.annotations() {
		annotations[k] = v
	}
	if err := w.patchNode(ctx, n.Name, false, map[string]any{"metadata": map[string]any{"annotations": annotations}}); err != nil {
		return err
	}
	w.cur.Nodes[n.Name] = n
	return nil
}

// machineObject returns the node's Machine, as Cluster API's controllers leave it: of cluster
// "chaos", its status.nodeRef naming the node, a control-plane Machine for a control-plane node.
func machineObject(n node) *unstructured.Unstructured {
	m := &unstructured.Unstructured{Object: map[string]any{
		"spec":   map[string]any{"clusterName": machineCluster},
		"status": map[string]any{"nodeRef": map[string]any{"kind": "Node", "name": n.Name}},
	}}
	m.SetAPIVersion("cluster.x-k8s.io/v1beta1")
	m.SetKind("Machine")
	m.SetNamespace(templateNamespace)
	m.SetName(machineOf(n.Name))
	if n.ControlPlane {
		m.SetLabels(map[string]string{machines.ClusterAPIControlPlaneLabel: ""})
	}
	return m
}

// deleteNode deletes the node; one whose deletion a finalizer holds goes once it is released.
func (w *world) deleteNode(ctx context.Context, name string) error {
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if w.cur.Nodes[name].RemovedBy == "deletion" {
		if err := w.patchNode(ctx, name, false, map[string]any{"metadata": map[string]any{"finalizers": nil}}); err != nil {
			return err
		}
	} else if err := w.k8s.Delete(ctx, obj); err != nil {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	w.wrote(obj, true)
	n := w.cur.Nodes[name]
	n.Exists, n.Excluded = false, false // a reset stays: it is on the NodeHealthChecks, by name
	n.RemovedBy, n.RemovalSince = "", time.Time{}
	w.cur.Nodes[name] = n
	return nil
}

// removalFinalizer keeps a node that is being deleted, as Karpenter's termination finalizer does
// while it drains the node.
const removalFinalizer = "chaos.medik8s.io/drain"

// remove plays a party that removes the node: the cluster autoscaler (its taint's value the unix
// time it began, on the decisions' clock: now, or 40 minutes ago, past the removal hold),
// Karpenter (a taint without a time) or a deletion that a finalizer holds.
func (w *world) remove(ctx context.Context, name, how string) (string, error) {
	n := w.cur.Nodes[name]
	taint := func(key, value string, since time.Time) error {
		if err := w.patchNode(ctx, name, false, map[string]any{"spec": map[string]any{"taints": []corev1.Taint{{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule}}}}); err != nil {
			return err
		}
		n.RemovalSince = since
		return nil
	}
	var err error
	desc := ""
	switch how {
	case "autoscaler", "autoscaler-old":
		since := w.cur.Now
		if how == "autoscaler-old" {
			since = since.Add(-40 * time.Minute)
		}
		err = taint(nodetaints.ClusterAutoscaler, fmt.Sprint(since.Unix()), since)
		desc = fmt.Sprintf("the cluster autoscaler removes %s: taint %s=%d (%s)", name, nodetaints.ClusterAutoscaler, since.Unix(), since.Format(time.TimeOnly))
	case "karpenter":
		err = taint(nodetaints.Karpenter, "", w.cur.Now)
		desc = fmt.Sprintf("Karpenter disrupts %s: taint %s, no time", name, nodetaints.Karpenter)
	case "deletion":
		if err = w.patchNode(ctx, name, false, map[string]any{"metadata": map[string]any{"finalizers": []string{removalFinalizer}}}); err != nil {
			return "", err
		}
		obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err = w.k8s.Delete(ctx, obj); err != nil {
			return "", fmt.Errorf("deleting node %s: %w", name, err)
		}
		if err = w.k8s.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return "", fmt.Errorf("reading node %s being deleted: %w", name, err)
		}
		w.wrote(obj, false)
		n.RemovalSince = obj.DeletionTimestamp.Time
		desc = fmt.Sprintf("%s deleted at %s; finalizer %s keeps it while it drains", name, n.RemovalSince.Format(time.TimeOnly), removalFinalizer)
	}
	if err != nil {
		return "", err
	}
	n.RemovedBy = strings.TrimSuffix(how, "-old")
	w.cur.Nodes[name] = n
	return desc, nil
}

// unremove ends the node's removal: the taint is lifted (the removal given up), or the finalizer
// released and the node goes.
func (w *world) unremove(ctx context.Context, name string) (string, error) {
	n := w.cur.Nodes[name]
	if n.RemovedBy == "deletion" {
		return fmt.Sprintf("%s drained: finalizer %s released, the node goes", name, removalFinalizer), w.deleteNode(ctx, name)
	}
	if err := w.patchNode(ctx, name, false, map[string]any{"spec": map[string]any{"taints": nil}}); err != nil {
		return "", err
	}
	by := n.RemovedBy
	n.RemovedBy, n.RemovalSince = "", time.Time{}
	w.cur.Nodes[name] = n
	return fmt.Sprintf("%s's removal by %s given up: taint lifted", name, by), nil
}

// patchNHC merge-patches a NodeHealthCheck's spec or metadata; the API server may refuse it.
func (w *world) patchNHC(ctx context.Context, name string, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	h := &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := w.k8s.Patch(ctx, h, client.RawPatch(types.MergePatchType, raw)); err != nil {
		return err
	}
	w.wrote(h, false)
	return nil
}

// poke makes both controllers reconcile every NodeHealthCheck (each reconciles one whose
// annotations changed): after the fake clock moved, deadlines that passed are noticed (requeues
// wait in real time).
func (w *world) poke(ctx context.Context) error {
	w.poked = true
	for _, name := range w.cur.nhcNames() {
		if err := w.patchNHC(ctx, name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{"chaos.medik8s.io/touched": fmt.Sprint(time.Now().UnixNano())}}}); err != nil {
			return fmt.Errorf("touching %s: %w", name, err)
		}
	}
	return nil
}

// listCRs lists the remediation CRs of every kind in the template namespace, from the API.
func (w *world) listCRs(ctx context.Context) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	for _, k := range crKinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(k[0])
		list.SetKind(k[1] + "List")
		if err := w.k8s.List(ctx, list, client.InNamespace(templateNamespace)); err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
	}
	slices.SortFunc(out, func(a, b unstructured.Unstructured) int {
		return int(resourceVersion(&a)) - int(resourceVersion(&b))
	})
	return out, nil
}

func crNode(cr *unstructured.Unstructured) string {
	if n := cr.GetAnnotations()[remediationv1alpha1.NodeNameAnnotation]; n != "" {
		return n
	}
	return cr.GetName()
}

// crsOf returns the node's CRs from the API, oldest first.
func (w *world) crsOf(ctx context.Context, node string) ([]unstructured.Unstructured, error) {
	all, err := w.listCRs(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(cr unstructured.Unstructured) bool { return crNode(&cr) != node }), nil
}

// leases reads the node leases.
func (w *world) leases(ctx context.Context) ([]leaseInfo, error) {
	list := &coordinationv1.LeaseList{}
	if err := w.k8s.List(ctx, list, client.InNamespace(leaseNamespace)); err != nil {
		return nil, err
	}
	var out []leaseInfo
	for _, l := range list.Items {
		node, ok := strings.CutPrefix(l.Name, "node-")
		if !ok {
			continue
		}
		info := leaseInfo{UID: l.UID, Node: node}
		if l.Spec.HolderIdentity != nil {
			info.Holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
			info.Expires = l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
		}
		out = append(out, info)
	}
	return out, nil
}

// snapshot reads what the check needs from the API; faulty: random faults failed requests in the
// step.
func (w *world) snapshot(ctx context.Context, settled, faulty bool) (snapshot, error) {
	rv, err := w.rec.sync(ctx, w.k8s)
	if err != nil {
		return snapshot{}, err
	}
	leases, err := w.leases(ctx)
	if err != nil {
		return snapshot{}, err
	}
	snap := snapshot{RV: rv, CRs: w.rec.records(), Leases: leases, Settled: settled, Faulty: faulty, Poked: w.poked}
	w.poked = false
	return snap, nil
}

// describe returns the state of the API that explains a violation: each NodeHealthCheck's status,
// the CRs and the leases.
func (w *world) describe(ctx context.Context) string {
	var b strings.Builder
	for _, name := range w.cur.nhcNames() {
		h := &remediationv1alpha1.NodeHealthCheck{}
		if err := w.k8s.Get(ctx, client.ObjectKey{Name: name}, h); err != nil {
			fmt.Fprintf(&b, "  nhc %s: %v\n", name, err)
			continue
		}
		var entries []string
		for _, e := range h.Status.UnhealthyNodes {
			s := fmt.Sprintf("%s(%d CRs", e.Name, len(e.Remediations))
			if e.ConditionsHealthyTimestamp != nil {
				s += ", healthy"
			}
			entries = append(entries, s+")")
		}
		fmt.Fprintf(&b, "  nhc %s: templates %s, paused %v, dry-run %v; status %s: %s; unhealthyNodes %v; remediationHistory %v\n", name, templateConfigs[w.cur.NHCs[name].Config].Name,
			w.cur.NHCs[name].paused(), w.cur.NHCs[name].Spec.DryRun, h.Status.Phase, h.Status.Reason, entries, h.Status.RemediationHistory)
	}
	if crs, err := w.listCRs(ctx); err == nil {
		for _, cr := range crs {
			owner := ""
			for _, o := range cr.GetOwnerReferences() {
				owner = o.Name
			}
			_, timedOut := cr.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation]
			fmt.Fprintf(&b, "  CR %s %s: node %s, nhc %s, template %s, created %s, timed out %v, Succeeded=%q\n", cr.GetKind(), cr.GetName(), crNode(&cr), owner,
				cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation], cr.GetCreationTimestamp().Format(time.TimeOnly), timedOut,
				crCondition(&cr, remediationv1alpha1.RemediationConditionSucceeded))
		}
	}
	if leases, err := w.leases(context.Background()); err == nil {
		for _, l := range leases {
			fmt.Fprintf(&b, "  lease node-%s: %s until %s\n", l.Node, l.Holder, l.Expires.Format(time.TimeOnly))
		}
	}
	var nodes []string
	for _, name := range w.cur.nodeNames() {
		nodes = append(nodes, w.cur.Nodes[name].String())
	}
	fmt.Fprintf(&b, "  model at %s (%s), skew %s: %s", w.cur.Now.Format(time.TimeOnly), w.fakeElapsed(), w.cur.Skew, strings.Join(nodes, " "))
	return b.String()
}

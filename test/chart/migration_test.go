package chart

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// The remediation kinds of the migration test: a self-node-remediation step and a test remediator.
var (
	snrKind  = [2]string{"self-node-remediation.medik8s.io/v1alpha1", "SelfNodeRemediation"}
	testKind = [2]string{"test.medik8s.io/v1alpha1", "TestRemediation"}
	// crKinds are both, SelfNodeRemediation (the first escalation step here) first: CRs created
	// within one second are listed in this order.
	crKinds = []schema.GroupVersionKind{testutil.SelfNodeRemediationKind, testutil.TestRemediationKind}
)

// The steps of docs/migration.md on a real API server. The cluster is left as the public operator
// (v0.12.0) leaves it when it is uninstalled through OLM: its CRD as its bundle publishes it, two
// NodeHealthChecks (one with a single template, one escalating) with the status it wrote, the
// remediation CRs it created (named after the node, annotated and labelled, owned by the
// NodeHealthCheck without being its controller), the first escalation step of one node marked timed
// out, and node leases held as NodeHealthCheck-<name>. The chart adopts the CRD and this operator,
// started with the chart's arguments as the chart's ServiceAccount, takes over: it creates no
// second CR and restarts no remediation, keeps the leases, escalates at the time the public
// operator would have (the running step's timer is not restarted), rewrites both statuses in place,
// and, when nodes recover, deletes the CRs the public operator created and releases its leases.
// (Webhooks are off: the manager runs outside the cluster, where the API server cannot call it.)
// One story, not split into parallel tests: each phase checks what the ones before left (the
// adopted CRD, the takeover 30 s into esc-step1's running step, the CRs and leases taken over), and
// most of its time is that step's one-minute timeout, which any part that checks it would wait too.
func TestMigrationFromThePublicOperator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	g := gomega.NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	g.SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
	bin := managerBinary(t)
	c := startCluster(t)
	c.startAggregation(t)
	ctx := context.Background()
	k := c.k8s

	// The public operator's CRD, applied as OLM applies it.
	raw, err := os.ReadFile(testutil.Path("test", "crds", "upstream", "remediation.medik8s.io_nodehealthchecks.yaml"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(raw, crd)).To(gomega.Succeed())
	g.Expect(k.Create(ctx, crd)).To(gomega.Succeed())
	g.Eventually(func() error { return k.List(ctx, newList("remediation.medik8s.io/v1alpha1", "NodeHealthCheck")) }).
		Should(gomega.Succeed(), "the public CRD served")

	// A remediator: its templates, and its role aggregated into the remediating operator's.
	g.Expect(k.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "migration-remediators", Labels: map[string]string{remediationv1alpha1.AggregateToExtRemediationLabel: "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediationtemplates"}, Verbs: []string{"get"}},
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediations"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"self-node-remediation.medik8s.io"}, Resources: []string{"selfnoderemediationtemplates"}, Verbs: []string{"get"}},
			{APIGroups: []string{"self-node-remediation.medik8s.io"}, Resources: []string{"selfnoderemediations"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		},
	})).To(gomega.Succeed())
	reboot := remediationTemplate("test.medik8s.io/v1alpha1", "TestRemediationTemplate", "reboot", map[string]any{"strategy": "reboot"})
	powerOff := remediationTemplate("test.medik8s.io/v1alpha1", "TestRemediationTemplate", "power-off", map[string]any{"strategy": "power-off"})
	snr := remediationTemplate("self-node-remediation.medik8s.io/v1alpha1", "SelfNodeRemediationTemplate", "automatic", map[string]any{"remediationStrategy": "Automatic"})
	for _, tmpl := range []*unstructured.Unstructured{reboot, powerOff, snr} {
		g.Expect(k.Create(ctx, tmpl)).To(gomega.Succeed())
	}

	// Nodes: Ready=False for an hour on the sick ones (envtest runs no node lifecycle controller).
	nodes := map[string]*corev1.Node{}
	for name, group := range map[string]string{
		"classic-sick": "classic", "classic-ok-1": "classic", "classic-ok-2": "classic",
		"esc-step2": "escalating", "esc-step1": "escalating", "esc-ok-1": "escalating", "esc-ok-2": "escalating",
		"long-step2": "long", "long-marked": "long", "long-ok-1": "long", "long-ok-2": "long", "long-ok-3": "long",
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"migration": group}}}
		g.Expect(k.Create(ctx, n)).To(gomega.Succeed())
		status := corev1.ConditionTrue
		if !strings.Contains(name, "-ok-") {
			status = corev1.ConditionFalse
		}
		setReady(ctx, g, k, n, status, time.Now().Add(-time.Hour))
		nodes[name] = n
	}

	// The NodeHealthChecks, written under the public CRD (no webhook of either operator runs). The
	// classic one relies on the CRD's default unhealthyConditions; the escalating one uses
	// maxUnhealthy, a field of the v0.10+ schema.
	classic := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck", "metadata": map[string]any{"name": "classic"},
		"spec": map[string]any{
			"selector":            map[string]any{"matchLabels": map[string]any{"migration": "classic"}},
			"minHealthy":          "51%",
			"remediationTemplate": templateRef(reboot),
		},
	}}
	escalating := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck", "metadata": map[string]any{"name": "escalating"},
		"spec": map[string]any{
			"selector":     map[string]any{"matchLabels": map[string]any{"migration": "escalating"}},
			"maxUnhealthy": int64(2),
			"unhealthyConditions": []any{
				map[string]any{"type": "Ready", "status": "False", "duration": "300s"},
				map[string]any{"type": "Ready", "status": "Unknown", "duration": "300s"},
			},
			"escalatingRemediations": []any{
				map[string]any{"order": int64(0), "timeout": "1m", "remediationTemplate": templateRef(snr)},
				map[string]any{"order": int64(1), "timeout": "10m", "remediationTemplate": templateRef(powerOff)},
			},
		},
	}}
	// A NodeHealthCheck whose first step is long: its remediations began hours before the switch.
	long := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck", "metadata": map[string]any{"name": "long"},
		"spec": map[string]any{
			"selector":   map[string]any{"matchLabels": map[string]any{"migration": "long"}},
			"minHealthy": "51%",
			"escalatingRemediations": []any{
				map[string]any{"order": int64(0), "timeout": "2h", "remediationTemplate": templateRef(snr)},
				map[string]any{"order": int64(1), "timeout": "45m", "remediationTemplate": templateRef(powerOff)},
			},
		},
	}}
	for _, nhc := range []*unstructured.Unstructured{classic, escalating, long} {
		g.Expect(k.Create(ctx, nhc)).To(gomega.Succeed())
	}

	// The remediation CRs the public operator created. esc-step1's first step is created first: its
	// one-minute timeout runs from its creation, whoever watches it.
	runningStep := upstreamCR(snrKind, snr, "esc-step1", escalating)
	timedOutStep := upstreamCR(snrKind, snr, "esc-step2", escalating)
	timedOutAt := metav1.Now().Rfc3339Copy()
	timedOutStep.SetAnnotations(map[string]string{
		remediationv1alpha1.NodeNameAnnotation:     "esc-step2",
		remediationv1alpha1.TemplateNameAnnotation: snr.GetName(),
		remediationv1alpha1.NHCTimedOutAnnotation:  timedOutAt.UTC().Format(time.RFC3339),
	})
	nextStep := upstreamCR(testKind, powerOff, "esc-step2", escalating)
	classicCR := upstreamCR(testKind, reboot, "classic-sick", classic)
	// Under "long", with timestamps from before the switch (a CR's creationTimestamp is the API
	// server's, so the CRs themselves are new): long-step2 has been at its second step for 31
	// minutes, after a first step that ran two hours; long-marked's first step timed out 31 minutes
	// ago and the public operator stopped before it created the next. Their leases were acquired for
	// the first step, 2h31m ago, and kept across steps, as medik8s/common does.
	remediationBegan, markedAt := time.Now().Add(-151*time.Minute), metav1.NewTime(time.Now().Add(-31*time.Minute).Truncate(time.Second))
	markedUpstream := func(cr *unstructured.Unstructured) *unstructured.Unstructured {
		a := cr.GetAnnotations()
		a[remediationv1alpha1.NHCTimedOutAnnotation] = markedAt.UTC().Format(time.RFC3339)
		cr.SetAnnotations(a)
		return cr
	}
	longFirst := markedUpstream(upstreamCR(snrKind, snr, "long-step2", long))
	longSecond := upstreamCR(testKind, powerOff, "long-step2", long)
	longMarked := markedUpstream(upstreamCR(snrKind, snr, "long-marked", long))
	for _, cr := range []*unstructured.Unstructured{runningStep, timedOutStep, nextStep, classicCR, longFirst, longSecond, longMarked} {
		g.Expect(k.Create(ctx, cr)).To(gomega.Succeed())
	}
	stepStarted := runningStep.GetCreationTimestamp().Time

	// The node leases, as medik8s/common's lease manager writes them for the public operator: the
	// duration is the running step's timeout (10 minutes for a single template) plus a minute; the
	// acquire time is the first step's, kept across escalation.
	leases := map[string]*coordinationv1.Lease{
		"classic-sick": upstreamLease(nodes["classic-sick"], classic, 11*time.Minute, classicCR, classicCR),
		"esc-step2":    upstreamLease(nodes["esc-step2"], escalating, 11*time.Minute, timedOutStep, nextStep),
		"esc-step1":    upstreamLease(nodes["esc-step1"], escalating, 2*time.Minute, runningStep, runningStep),
		"long-step2":   upstreamLease(nodes["long-step2"], long, 46*time.Minute, longFirst, longSecond),
		"long-marked":  upstreamLease(nodes["long-marked"], long, 121*time.Minute, longMarked, longMarked),
	}
	// The old rule ("overdue three lease durations after acquireTime") would time long-step2's second
	// step out at once: 3 x 46m after its lease's acquisition 2h31m ago.
	for _, node := range []string{"long-step2", "long-marked"} {
		leases[node].Spec.AcquireTime = &metav1.MicroTime{Time: remediationBegan}
		leases[node].Spec.RenewTime = &metav1.MicroTime{Time: markedAt.Time}
	}
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "medik8s-leases"}})).To(gomega.Succeed())
	for _, l := range leases {
		g.Expect(k.Create(ctx, l)).To(gomega.Succeed())
	}

	// The status the public operator wrote.
	oldUpdate := metav1.Now().Rfc3339Copy()
	enabled := map[string]any{"type": "Disabled", "status": "False", "reason": "NodeHealthCheckEnabled",
		"message": "No issues found, NodeHealthCheck is enabled.", "lastTransitionTime": rfc3339(oldUpdate.Time)}
	writeStatus(ctx, g, k, classic, map[string]any{
		"observedNodes": int64(3), "healthyNodes": int64(2), "phase": "Remediating", "reason": "NHC is remediating 1 nodes",
		"lastUpdateTime": rfc3339(oldUpdate.Time), "conditions": []any{enabled},
		"unhealthyNodes": []any{map[string]any{"name": "classic-sick", "remediations": []any{statusRemediation(classicCR, nil)}}},
	})
	writeStatus(ctx, g, k, escalating, map[string]any{
		"observedNodes": int64(4), "healthyNodes": int64(2), "phase": "Remediating", "reason": "NHC is remediating 2 nodes",
		"lastUpdateTime": rfc3339(oldUpdate.Time), "conditions": []any{enabled},
		"unhealthyNodes": []any{
			map[string]any{"name": "esc-step2", "remediations": []any{statusRemediation(timedOutStep, &timedOutAt), statusRemediation(nextStep, nil)}},
			map[string]any{"name": "esc-step1", "remediations": []any{statusRemediation(runningStep, nil)}},
		},
	})
	writeStatus(ctx, g, k, long, map[string]any{
		"observedNodes": int64(5), "healthyNodes": int64(3), "phase": "Remediating", "reason": "NHC is remediating 2 nodes",
		"lastUpdateTime": rfc3339(oldUpdate.Time), "conditions": []any{enabled},
		"unhealthyNodes": []any{
			map[string]any{"name": "long-step2", "remediations": []any{statusRemediation(longFirst, &markedAt), statusRemediation(longSecond, nil)}},
			map[string]any{"name": "long-marked", "remediations": []any{statusRemediation(longMarked, &markedAt)}},
		},
	})
	wantCRs := map[string][]types.UID{
		"classic-sick": {classicCR.GetUID()},
		"esc-step2":    {timedOutStep.GetUID(), nextStep.GetUID()},
		"esc-step1":    {runningStep.GetUID()},
		"long-step2":   {longFirst.GetUID(), longSecond.GetUID()},
		"long-marked":  {longMarked.GetUID()},
	}
	g.Expect(crUIDsByNode(ctx, k)).To(gomega.Equal(wantCRs), "the public operator's CRs")

	install := action.NewInstall(c.helm(t))
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Timeout = releaseName, namespace, true, time.Minute
	values := map[string]any{"webhooks": map[string]any{"enabled": false}, "certManager": map[string]any{"enabled": false}}

	// Helm refuses a CRD it does not own...
	_, err = install.Run(loadChart(t), values)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("invalid ownership metadata")), "helm install over the public CRD")
	t.Logf("helm install over the public CRD: %v", err)
	// ... and adopts it once labelled and annotated as docs/migration.md says.
	g.Expect(k.Patch(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}}, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},"annotations":{"meta.helm.sh/release-name":"`+releaseName+
			`","meta.helm.sh/release-namespace":"`+namespace+`"}}}`)))).To(gomega.Succeed())
	install = action.NewInstall(c.helm(t))
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Timeout = releaseName, namespace, true, time.Minute
	rel, err := install.Run(loadChart(t), values)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "helm install adopting the public CRD")
	adopted := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(k.Get(ctx, client.ObjectKey{Name: crd.Name}, adopted)).To(gomega.Succeed())
	g.Expect(adopted.UID).To(gomega.Equal(crd.UID), "the CRD was updated, not replaced")
	g.Expect(adopted.Annotations).To(gomega.HaveKeyWithValue("helm.sh/resource-policy", "keep"))
	g.Expect(adopted.Spec.Versions).To(gomega.HaveLen(1))
	g.Expect(adopted.Spec.Versions[0].AdditionalPrinterColumns).NotTo(gomega.BeEmpty(), "this chart's CRD (the public one has no printer columns)")
	g.Expect(adopted.Status.StoredVersions).To(gomega.Equal([]string{"v1alpha1"}))

	g.Eventually(func() int {
		agg := &rbacv1.ClusterRole{}
		if k.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-ext-remediation"}, agg) != nil {
			return 0
		}
		return len(agg.Rules)
	}).Should(gomega.Equal(4), "the remediator's rules aggregated into the chart's ext-remediation role")

	// The public operator ran for a while before the switch: the takeover begins at least 30 seconds
	// into esc-step1's running step, so a timer restarted at takeover would end 30 seconds late.
	// This waits for the precondition of the test, not for a controller.
	time.Sleep(time.Until(stepStarted.Add(30 * time.Second)))
	takeover := time.Now()
	// The public operator ran in this namespace and stopped just now: its leader-election lock, of
	// the same name as this chart's, holds this operator off until it expires (a second guard
	// against running both; docs/migration.md).
	oldLeader := "node-healthcheck-controller-manager-5f7c9d_0e1c"
	lock := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "e1f13584.medik8s.io"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &oldLeader, LeaseDurationSeconds: ptr.To(int32(10)),
			AcquireTime: &metav1.MicroTime{Time: takeover.Add(-time.Hour)}, RenewTime: &metav1.MicroTime{Time: takeover}}}
	g.Expect(k.Create(ctx, lock)).To(gomega.Succeed())
	lockExpiry := takeover.Add(10 * time.Second)
	// The nodes were created a moment ago with conditions dated an hour back: times the manager
	// would not trust.
	_, log := c.startManager(t, bin, rel.Manifest, map[string]string{"--condition-time-bound": "-1s"})

	// Both statuses rewritten in place, by this operator: same objects, the same CRs listed.
	rewritten := func(name string, want map[string][]types.UID) func(gomega.Gomega) {
		return func(g gomega.Gomega) {
			nhc := &remediationv1alpha1.NodeHealthCheck{}
			g.Expect(k.Get(ctx, client.ObjectKey{Name: name}, nhc)).To(gomega.Succeed())
			g.Expect(nhc.Status.LastUpdateTime).NotTo(gomega.BeNil())
			g.Expect(nhc.Status.LastUpdateTime.After(oldUpdate.Time)).To(gomega.BeTrue(), "lastUpdateTime rewritten")
			up := meta.FindStatusCondition(nhc.Status.Conditions, remediationv1alpha1.ConditionTypeUpgradeInProgress)
			g.Expect(up).NotTo(gomega.BeNil(), "this operator's UpgradeInProgress condition")
			g.Expect(up.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(meta.IsStatusConditionFalse(nhc.Status.Conditions, remediationv1alpha1.ConditionTypeDisabled)).To(gomega.BeTrue())
			g.Expect(nhc.Status.Phase).To(gomega.Equal(remediationv1alpha1.PhaseRemediating), nhc.Status.Reason)
			g.Expect(statusUIDs(nhc)).To(gomega.Equal(want))
		}
	}
	g.Eventually(rewritten("classic", map[string][]types.UID{"classic-sick": wantCRs["classic-sick"]})).Should(gomega.Succeed())
	g.Eventually(rewritten("escalating", map[string][]types.UID{"esc-step2": wantCRs["esc-step2"], "esc-step1": wantCRs["esc-step1"]})).Should(gomega.Succeed())
	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(lock), lock)).To(gomega.Succeed())
	g.Expect(lock.Spec.HolderIdentity).NotTo(gomega.Equal(&oldLeader), "this operator holds the lock now")
	g.Expect(lock.Spec.AcquireTime.Time).To(gomega.BeTemporally(">=", lockExpiry), "taken once the public operator's hold expired")
	for _, old := range []*unstructured.Unstructured{classic, escalating} {
		nhc := &remediationv1alpha1.NodeHealthCheck{}
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(old), nhc)).To(gomega.Succeed())
		g.Expect(nhc.UID).To(gomega.Equal(old.GetUID()), "the NodeHealthCheck %s is the one the public operator wrote", old.GetName())
		g.Expect(nhc.Status.LastUpdateTime.Time).To(gomega.BeTemporally(">=", lockExpiry.Truncate(time.Second)), "written by this operator, after the lock expired")
		if old == escalating {
			i := slices.IndexFunc(nhc.Status.UnhealthyNodes, func(n remediationv1alpha1.UnhealthyNode) bool { return n.Name == "esc-step2" })
			g.Expect(i).NotTo(gomega.Equal(-1))
			steps := nhc.Status.UnhealthyNodes[i].Remediations
			g.Expect(steps[0].TimedOut).NotTo(gomega.BeNil(), "the public operator's timeout kept")
			g.Expect(steps[0].TimedOut.Time).To(gomega.BeTemporally("==", timedOutAt.Time))
			g.Expect(steps[1].TimedOut).To(gomega.BeNil())
		}
	}

	// long-marked's first step timed out under the public operator: its next step starts now, and
	// its timer starts now too (not at the mark, not at the lease's acquisition).
	var longNext unstructured.Unstructured
	g.Eventually(func(g gomega.Gomega) {
		crs, err := testutil.ListCRs(ctx, k, "", "long-marked", crKinds...)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(crs).To(gomega.HaveLen(2))
		g.Expect(crs[1].GetKind()).To(gomega.Equal(testKind[1]))
		longNext = crs[1]
	}).Should(gomega.Succeed())
	wantCRs["long-marked"] = append(wantCRs["long-marked"], longNext.GetUID())
	g.Eventually(func(g gomega.Gomega) {
		l := &coordinationv1.Lease{}
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(leases["long-marked"]), l)).To(gomega.Succeed())
		g.Expect(l.Spec.LeaseDurationSeconds).To(gomega.Equal(ptr.To(int32(46*60))), "renewed for the next step: its timeout plus a minute")
		g.Expect(l.Spec.AcquireTime.Time).To(gomega.BeTemporally(">", takeover), "acquired again for the step that started now")
	}).Should(gomega.Succeed())
	delete(leases, "long-marked") // renewed for the new step; checked above
	g.Eventually(rewritten("long", map[string][]types.UID{"long-step2": wantCRs["long-step2"], "long-marked": wantCRs["long-marked"]})).Should(gomega.Succeed())

	// Having acted, it starts nothing again: no second CR, the same CRs, no timeout marked on the
	// running steps (long-step2's second step is 31 minutes into 45 by the public operator's
	// account, and 2h31m into its lease, and times out neither now nor early), the leases held as
	// before.
	unchanged := func(g gomega.Gomega) {
		g.Expect(crUIDsByNode(ctx, k)).To(gomega.Equal(wantCRs))
		for _, cr := range []*unstructured.Unstructured{runningStep, nextStep, classicCR, longSecond, &longNext} {
			got := newObject(cr.GetAPIVersion(), cr.GetKind(), cr.GetNamespace(), cr.GetName())
			g.Expect(k.Get(ctx, client.ObjectKeyFromObject(got), got)).To(gomega.Succeed())
			g.Expect(got.GetAnnotations()).NotTo(gomega.HaveKey(remediationv1alpha1.NHCTimedOutAnnotation), "%s %s", got.GetKind(), got.GetName())
		}
		for node, want := range leases {
			l := &coordinationv1.Lease{}
			g.Expect(k.Get(ctx, client.ObjectKeyFromObject(want), l)).To(gomega.Succeed())
			g.Expect(l.UID).To(gomega.Equal(want.UID), "lease of %s", node)
			g.Expect(l.Spec.HolderIdentity).To(gomega.Equal(want.Spec.HolderIdentity), "lease of %s", node)
			g.Expect(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second)).To(gomega.BeTemporally(">", time.Now()), "lease of %s valid", node)
		}
	}
	g.Consistently(unchanged).WithTimeout(max(time.Until(stepStarted.Add(55*time.Second)), 5*time.Second)).Should(gomega.Succeed())

	// esc-step1's first step times out one minute after the public operator created it, and then
	// only: the next step's CR is created, the timed-out one is marked, kept, and not recreated.
	var next unstructured.Unstructured
	g.Eventually(func(g gomega.Gomega) {
		crs, err := testutil.ListCRs(ctx, k, "", "esc-step1", crKinds...)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(crs).To(gomega.HaveLen(2))
		g.Expect(crs[0].GetUID()).To(gomega.Equal(runningStep.GetUID()))
		g.Expect(crs[0].GetAnnotations()).To(gomega.HaveKey(remediationv1alpha1.NHCTimedOutAnnotation))
		g.Expect(crs[1].GetKind()).To(gomega.Equal(testKind[1]))
		next = crs[1]
	}).WithTimeout(time.Until(stepStarted.Add(80 * time.Second))).Should(gomega.Succeed())
	created := next.GetCreationTimestamp().Time
	t.Logf("esc-step1's next step created %s after its first step, %s after the takeover", created.Sub(stepStarted), created.Sub(takeover))
	g.Expect(created).To(gomega.BeTemporally(">=", stepStarted.Add(time.Minute)), "not before the step's timeout")
	g.Expect(created).To(gomega.BeTemporally("<", stepStarted.Add(time.Minute+15*time.Second)), "at the public operator's deadline, not a restarted one")
	g.Expect(next.GetName()).To(gomega.Equal("esc-step1"))
	g.Expect(next.GetAnnotations()).To(gomega.HaveKeyWithValue(remediationv1alpha1.TemplateNameAnnotation, powerOff.GetName()))
	wantCRs["esc-step1"] = append(wantCRs["esc-step1"], next.GetUID())
	g.Expect(crUIDsByNode(ctx, k)).To(gomega.Equal(wantCRs))
	g.Eventually(func(g gomega.Gomega) {
		l := &coordinationv1.Lease{}
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(leases["esc-step1"]), l)).To(gomega.Succeed())
		g.Expect(l.UID).To(gomega.Equal(leases["esc-step1"].UID))
		g.Expect(l.Spec.HolderIdentity).To(gomega.Equal(ptr.To("NodeHealthCheck-escalating")))
		g.Expect(l.Spec.LeaseDurationSeconds).To(gomega.Equal(ptr.To(int32(11*60))), "renewed for the next step: its timeout plus a minute")
		g.Expect(l.Spec.RenewTime.Time).To(gomega.BeTemporally(">", takeover))
	}).Should(gomega.Succeed())
	g.Eventually(rewritten("escalating", map[string][]types.UID{"esc-step2": wantCRs["esc-step2"], "esc-step1": wantCRs["esc-step1"]})).Should(gomega.Succeed())
	g.Eventually(func(g gomega.Gomega) {
		nhc := &remediationv1alpha1.NodeHealthCheck{}
		g.Expect(k.Get(ctx, client.ObjectKey{Name: "escalating"}, nhc)).To(gomega.Succeed())
		i := slices.IndexFunc(nhc.Status.UnhealthyNodes, func(n remediationv1alpha1.UnhealthyNode) bool { return n.Name == "esc-step1" })
		g.Expect(i).NotTo(gomega.Equal(-1))
		g.Expect(nhc.Status.UnhealthyNodes[i].Remediations[0].TimedOut).NotTo(gomega.BeNil(), "the first step's timeout in status")
		g.Expect(nhc.Status.UnhealthyNodes[i].Remediations[1].TimedOut).To(gomega.BeNil())
	}).Should(gomega.Succeed())

	// Recovery: the CRs the public operator created are deleted and its leases released.
	setReady(ctx, g, k, nodes["classic-sick"], corev1.ConditionTrue, time.Now())
	setReady(ctx, g, k, nodes["esc-step2"], corev1.ConditionTrue, time.Now())
	delete(wantCRs, "classic-sick")
	delete(wantCRs, "esc-step2")
	g.Eventually(func() (map[string][]types.UID, error) { return crUIDsByNode(ctx, k) }).Should(gomega.Equal(wantCRs))
	for _, node := range []string{"classic-sick", "esc-step2"} {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(leases[node]), &coordinationv1.Lease{}))
		}).Should(gomega.BeTrue(), "lease of %s released", node)
	}
	g.Eventually(func(g gomega.Gomega) {
		nhc := &remediationv1alpha1.NodeHealthCheck{}
		g.Expect(k.Get(ctx, client.ObjectKey{Name: "classic"}, nhc)).To(gomega.Succeed())
		g.Expect(nhc.Status.UnhealthyNodes).To(gomega.BeEmpty())
		g.Expect(nhc.Status.Phase).To(gomega.Equal(remediationv1alpha1.PhaseEnabled))
	}).Should(gomega.Succeed())
	g.Eventually(rewritten("escalating", map[string][]types.UID{"esc-step1": wantCRs["esc-step1"]})).Should(gomega.Succeed())
	g.Expect(k.Get(ctx, client.ObjectKeyFromObject(leases["esc-step1"]), &coordinationv1.Lease{})).To(gomega.Succeed(), "the remediating node keeps its lease")

	if strings.Contains(strings.ToLower(log.String()), "forbidden") {
		t.Errorf("the manager was refused something:\n%s", grep(log.String(), "orbidden"))
	}
}

func remediationTemplate(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := newObject(apiVersion, kind, testutil.TemplateNamespace, name)
	u.Object["spec"] = map[string]any{"template": map[string]any{"spec": spec}}
	return u
}

func templateRef(tmpl *unstructured.Unstructured) map[string]any {
	return map[string]any{"apiVersion": tmpl.GetAPIVersion(), "kind": tmpl.GetKind(), "namespace": tmpl.GetNamespace(), "name": tmpl.GetName()}
}

func newObject(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func newList(apiVersion, kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind + "List")
	return l
}

// upstreamCR is the remediation CR the public operator builds for the node from the template: the
// template's kind without "Template", in its namespace, named after the node, with the template's
// spec.template.spec, the node-name and template-name annotations, the part-of label and a plain
// owner reference to the NodeHealthCheck (controller: false, no blockOwnerDeletion).
func upstreamCR(kind [2]string, tmpl *unstructured.Unstructured, node string, nhc *unstructured.Unstructured) *unstructured.Unstructured {
	cr := newObject(kind[0], kind[1], tmpl.GetNamespace(), node)
	spec, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "template", "spec")
	cr.Object["spec"] = spec
	cr.SetAnnotations(map[string]string{remediationv1alpha1.NodeNameAnnotation: node, remediationv1alpha1.TemplateNameAnnotation: tmpl.GetName()})
	cr.SetLabels(map[string]string{remediationv1alpha1.PartOfLabel: remediationv1alpha1.PartOfValue})
	cr.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: nhc.GetAPIVersion(), Kind: nhc.GetKind(), Name: nhc.GetName(), UID: nhc.GetUID(),
		Controller: ptr.To(false)}})
	return cr
}

// upstreamLease is the node lease medik8s/common's lease manager holds for the public operator:
// acquired when the first CR was created, renewed when the last one was.
func upstreamLease(node *corev1.Node, nhc *unstructured.Unstructured, duration time.Duration, first, last *unstructured.Unstructured) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "medik8s-leases", Name: "node-" + node.Name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("NodeHealthCheck-" + nhc.GetName()),
			LeaseDurationSeconds: ptr.To(int32(duration / time.Second)),
			AcquireTime:          &metav1.MicroTime{Time: first.GetCreationTimestamp().Time},
			RenewTime:            &metav1.MicroTime{Time: last.GetCreationTimestamp().Time},
			LeaseTransitions:     ptr.To(int32(0)),
		},
	}
}

// statusRemediation is a status.unhealthyNodes[].remediations entry as the public operator writes it.
func statusRemediation(cr *unstructured.Unstructured, timedOut *metav1.Time) map[string]any {
	r := map[string]any{
		"resource": map[string]any{"apiVersion": cr.GetAPIVersion(), "kind": cr.GetKind(), "namespace": cr.GetNamespace(),
			"name": cr.GetName(), "uid": string(cr.GetUID())},
		"started":      rfc3339(cr.GetCreationTimestamp().Time),
		"templateName": cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation],
	}
	if timedOut != nil {
		r["timedOut"] = rfc3339(timedOut.Time)
	}
	return r
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func writeStatus(ctx context.Context, g *gomega.WithT, k client.Client, nhc *unstructured.Unstructured, status map[string]any) {
	nhc.Object["status"] = status
	g.ExpectWithOffset(1, k.Status().Update(ctx, nhc)).To(gomega.Succeed())
}

func setReady(ctx context.Context, g *gomega.WithT, k client.Client, n *corev1.Node, status corev1.ConditionStatus, since time.Time) {
	base := n.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status,
		LastTransitionTime: metav1.NewTime(since), LastHeartbeatTime: metav1.Now()}}
	g.ExpectWithOffset(1, k.Status().Patch(ctx, n, client.MergeFrom(base))).To(gomega.Succeed())
}

// crUIDsByNode maps each node (by the node-name annotation, the CR name when it is missing) to the
// UIDs of its remediation CRs, oldest first.
func crUIDsByNode(ctx context.Context, k client.Client) (map[string][]types.UID, error) {
	all, err := testutil.ListCRs(ctx, k, "", "", crKinds...)
	if err != nil {
		return nil, err
	}
	out := map[string][]types.UID{}
	for _, cr := range all {
		node := cr.GetAnnotations()[remediationv1alpha1.NodeNameAnnotation]
		if node == "" {
			node = cr.GetName()
		}
		out[node] = append(out[node], cr.GetUID())
	}
	return out, nil
}

// statusUIDs maps each node of status.unhealthyNodes to the UIDs of its listed remediations.
func statusUIDs(nhc *remediationv1alpha1.NodeHealthCheck) map[string][]types.UID {
	out := map[string][]types.UID{}
	for _, n := range nhc.Status.UnhealthyNodes {
		out[n.Name] = []types.UID{}
		for _, r := range n.Remediations {
			out[n.Name] = append(out[n.Name], r.Resource.UID)
		}
	}
	return out
}

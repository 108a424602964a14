package chart

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// managerBinary returns the manager that the chart's Deployment runs: extracted from the image that
// `make image` built, for this machine's platform (or $MANAGER_BINARY).
func managerBinary(t *testing.T) string {
	t.Helper()
	bin, err := localcluster.ManagerBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startAggregation runs kube-controller-manager with only the ClusterRole aggregation controller,
// which fills the chart's ext-remediation role from remediators' labelled roles.
func (c *cluster) startAggregation(t *testing.T) {
	t.Helper()
	kcm := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"), //nolint:gosec // our binary
		"--kubeconfig="+c.kubeconfig, "--controllers=clusterrole-aggregation-controller", "--leader-elect=false", "--secure-port=0")
	var out bytes.Buffer
	kcm.Stdout, kcm.Stderr = &out, &out
	if err := kcm.Start(); err != nil {
		t.Fatalf("starting kube-controller-manager: %v", err)
	}
	t.Cleanup(func() {
		_ = kcm.Process.Kill()
		_ = kcm.Wait()
		if t.Failed() {
			t.Logf("kube-controller-manager:\n%s", out.String())
		}
	})
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the chart's ServiceAccount with
// a bound token, as a pod would.
func (c *cluster) serviceAccountKubeconfig(t *testing.T, sa string) string {
	t.Helper()
	path, err := localcluster.ServiceAccountKubeconfig(c.env.Config, t.TempDir(), namespace, sa)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startManager runs the manager out of cluster as the chart's ServiceAccount, with the arguments of
// the release's Deployment (probe and, unless overrides set it, metrics on free local ports;
// overrides replace flags by name, or add those the chart does not set).
// It returns the probe address and the manager's output.
func (c *cluster) startManager(t *testing.T, bin, manifest string, overrides map[string]string) (string, *bytes.Buffer) {
	t.Helper()
	probe, err := localcluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if overrides == nil {
		overrides = map[string]string{}
	}
	if overrides["--metrics-bind-address"] == "" {
		if overrides["--metrics-bind-address"], err = localcluster.FreeAddr(); err != nil {
			t.Fatal(err)
		}
	}
	overrides["--health-probe-bind-address"] = probe
	args := []string{"--kubeconfig=" + c.serviceAccountKubeconfig(t, "nhc-node-healthcheck"), "--leader-election-namespace=" + namespace}
	used := map[string]bool{}
	for _, a := range chartArgs(t, manifest) {
		if name, _, _ := strings.Cut(a, "="); overrides[name] != "" {
			a, used[name] = name+"="+overrides[name], true
		}
		args = append(args, a)
	}
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if !used[name] {
			args = append(args, name+"="+overrides[name]) // a flag the chart does not set
		}
	}
	log := &bytes.Buffer{}
	manager := exec.Command(bin, args...) //nolint:gosec // our binary
	manager.Stdout, manager.Stderr = log, log
	if err := manager.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = manager.Process.Signal(os.Interrupt)
		_ = manager.Wait()
		if t.Failed() {
			t.Logf("manager (args %v):\n%s", args, log.String())
		}
	})
	return probe, log
}

// chartArgs returns the manager arguments of the Deployment in the release's manifest.
func chartArgs(t *testing.T, manifest string) []string {
	t.Helper()
	args, err := localcluster.DeploymentArgs(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// The manager, run with the chart's arguments as the chart's ServiceAccount (a bound token) with only
// the chart's RBAC, reconciles a NodeHealthCheck and creates a remediation CR with the permissions a
// remediator grants through aggregation, exactly as documented for remediators: get on its
// templates, everything on its remediation CRs. Proof that the chart's RBAC is enough. A remediator
// granting less (no list and watch on its CRs) disables only the NodeHealthCheck that uses it.
func TestChartRBACIsEnoughForTheManager(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	// For the testutil builders, which use gomega's global Expect. The registration is global, so
	// this test is not parallel: a parallel test's failure could be reported to it.
	gomega.RegisterTestingT(t)
	bin := managerBinary(t)
	c := startCluster(t)
	c.startAggregation(t)
	ctx := context.Background()

	install := action.NewInstall(c.helm(t))
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Timeout = releaseName, namespace, true, time.Minute
	rel, err := install.Run(loadChart(t), map[string]any{
		"webhooks":    map[string]any{"enabled": false},
		"certManager": map[string]any{"enabled": false},
		"upgrade":     map[string]any{"pauseObject": map[string]any{"enabled": true}, "nodeRollout": true},
	})
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}

	// A remediator's role, as the reference documentation shows it.
	createRemediatorRole(ctx, t, c)
	waitFor(t, "the remediator's rules aggregated into the ext-remediation role", func() bool {
		agg := &rbacv1.ClusterRole{}
		return c.k8s.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-ext-remediation"}, agg) == nil && len(agg.Rules) == 2
	})

	template := testutil.TemplateObject("reboot", true)
	nodes := []*corev1.Node{}
	for _, name := range []string{"worker-1", "worker-2", "worker-3"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/worker": ""}}}
		if err := c.k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	sick := nodes[2]
	long := metav1.NewTime(time.Now().Add(-time.Hour))
	for _, n := range nodes {
		status := corev1.ConditionTrue
		if n == sick {
			status = corev1.ConditionUnknown
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: long, LastHeartbeatTime: long}}
		if err := c.k8s.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.k8s.Create(ctx, template); err != nil {
		t.Fatal(err)
	}
	nhc := testutil.NewNHC("workers")
	nhc.Spec.RemediationTemplate = testutil.TestTemplateRef(template.GetName())
	if err := c.k8s.Create(ctx, nhc); err != nil {
		t.Fatal(err)
	}

	// The nodes were created a moment ago, "unhealthy for an hour": condition times the manager would
	// not trust.
	_, log := c.startManager(t, bin, rel.Manifest, map[string]string{"--condition-time-bound": "-1s"})

	waitFor(t, "a remediation CR for the unhealthy node", func() bool {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("test.medik8s.io/v1alpha1")
		list.SetKind("TestRemediationList")
		return c.k8s.List(ctx, list, client.InNamespace(testutil.TemplateNamespace)) == nil && len(list.Items) == 1 && list.Items[0].GetName() == sick.Name
	})
	waitFor(t, "the NodeHealthCheck's status", func() bool {
		got := &remediationv1alpha1.NodeHealthCheck{}
		return c.k8s.Get(ctx, client.ObjectKeyFromObject(nhc), got) == nil && got.Status.Phase == remediationv1alpha1.PhaseRemediating
	})
	// The node lease was taken in the lease namespace the chart created, with no right to create
	// namespaces (which the manager would use only if it were missing).
	if !c.exists(t, "coordination.k8s.io/v1", "Lease", "medik8s-leases", "node-"+sick.Name) {
		t.Error("no node lease for the remediated node in medik8s-leases")
	}
	if lease := mustGetNamespace(t, c, "medik8s-leases"); lease.Annotations["meta.helm.sh/release-name"] != releaseName {
		t.Errorf("the lease namespace was not created by the chart: %v", lease.Annotations)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + namespace + ":nhc-node-healthcheck",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "namespaces"},
	}}
	if err := c.k8s.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	if review.Status.Allowed {
		t.Errorf("the chart's ServiceAccount may create namespaces: %s", review.Status.Reason)
	}
	// The clock skew probe (GET /version on a replica that no other request keeps measuring) is
	// allowed to every client by the default system:public-info-viewer ClusterRole.
	probe := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  "system:serviceaccount:" + namespace + ":nhc-node-healthcheck",
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/version"},
	}}
	if err := c.k8s.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if !probe.Status.Allowed {
		t.Errorf("the chart's ServiceAccount may not GET /version, the clock skew probe: %s", probe.Status.Reason)
	}

	// A remediator that forgets list and watch on its CRs: the NodeHealthCheck using it is disabled
	// with a reason that says so, within seconds, and the others keep working (no informer waits
	// forever for a kind it may not list).
	blind := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "blind-remediator", Labels: map[string]string{remediationv1alpha1.AggregateToExtRemediationLabel: "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"self-node-remediation.medik8s.io"}, Resources: []string{"selfnoderemediationtemplates"}, Verbs: []string{"get"}},
			{APIGroups: []string{"self-node-remediation.medik8s.io"}, Resources: []string{"selfnoderemediations"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
		},
	}
	if err := c.k8s.Create(ctx, blind); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both remediators' rules aggregated", func() bool {
		agg := &rbacv1.ClusterRole{}
		return c.k8s.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-ext-remediation"}, agg) == nil && len(agg.Rules) == 4
	})
	snrTemplate := &unstructured.Unstructured{}
	snrTemplate.SetAPIVersion("self-node-remediation.medik8s.io/v1alpha1")
	snrTemplate.SetKind("SelfNodeRemediationTemplate")
	snrTemplate.SetNamespace(testutil.TemplateNamespace)
	snrTemplate.SetName("blind")
	if err := unstructured.SetNestedMap(snrTemplate.Object, map[string]any{"spec": map[string]any{}}, "spec", "template"); err != nil {
		t.Fatal(err)
	}
	if err := c.k8s.Create(ctx, snrTemplate); err != nil {
		t.Fatal(err)
	}
	blindNHC := testutil.NewNHC("blind")
	blindNHC.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"blind": "true"}}
	blindNHC.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: snrTemplate.GetAPIVersion(), Kind: snrTemplate.GetKind(),
		Namespace: snrTemplate.GetNamespace(), Name: snrTemplate.GetName()}
	if err := c.k8s.Create(ctx, blindNHC); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	waitFor(t, "the NodeHealthCheck of the remediator without list and watch disabled", func() bool {
		got := &remediationv1alpha1.NodeHealthCheck{}
		if c.k8s.Get(ctx, client.ObjectKeyFromObject(blindNHC), got) != nil {
			return false
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, remediationv1alpha1.ConditionTypeDisabled)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == remediationv1alpha1.ConditionReasonDisabledRemediationNotWatchable
	})
	if took := time.Since(created); took > 10*time.Second {
		t.Errorf("disabled after %s, want within seconds", took)
	}
	waitFor(t, "the sick node ready again", func() bool {
		if c.k8s.Get(ctx, client.ObjectKeyFromObject(sick), sick) != nil {
			return false
		}
		sick.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
		return c.k8s.Status().Update(ctx, sick) == nil
	})
	waitFor(t, "the first NodeHealthCheck still working: the recovered node's CR deleted", func() bool {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("test.medik8s.io/v1alpha1")
		list.SetKind("TestRemediationList")
		return c.k8s.List(ctx, list, client.InNamespace(testutil.TemplateNamespace)) == nil && len(list.Items) == 0
	})

	if strings.Contains(strings.ToLower(log.String()), "forbidden") {
		t.Errorf("the manager was refused something:\n%s", grep(log.String(), "orbidden"))
	}
}

func mustGetNamespace(t *testing.T, c *cluster, name string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := c.k8s.Get(context.Background(), client.ObjectKey{Name: name}, ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// An upgrade with Helm 3 (the SDK's client-side three-way merge) never clears the rules the
// aggregation controller filled into the ext-remediation role, neither from the chart as it was
// (which declared `rules: []`) nor from this one: without the rules the operator could neither read
// templates nor write remediation CRs until the controller filled them again. Every version of the
// role from before the first upgrade to after the last is watched.
func TestUpgradeKeepsAggregatedRules(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.startAggregation(t)
	ctx := context.Background()
	createRemediatorRole(ctx, t, c)
	values := map[string]any{"webhooks": map[string]any{"enabled": false}, "certManager": map[string]any{"enabled": false}}
	install := action.NewInstall(c.helm(t))
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Timeout = releaseName, namespace, true, time.Minute
	if _, err := install.Run(previousChart(t), values); err != nil {
		t.Fatalf("helm install of the chart as it was: %v", err)
	}
	const role = "nhc-node-healthcheck-ext-remediation"
	agg := &rbacv1.ClusterRole{}
	waitFor(t, "the remediator's rules aggregated", func() bool {
		return c.k8s.Get(ctx, client.ObjectKey{Name: role}, agg) == nil && len(agg.Rules) == 2
	})
	cs, err := kubernetes.NewForConfig(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.RbacV1().ClusterRoles().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + role, ResourceVersion: agg.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	from, err := strconv.ParseInt(agg.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	c.upgrade(t, values) // from the chart as it was
	c.upgrade(t, values) // from this one

	// Every version up to now: the watch has delivered the role's current resourceVersion.
	if err := c.k8s.Get(ctx, client.ObjectKey{Name: role}, agg); err != nil {
		t.Fatal(err)
	}
	now, err := strconv.ParseInt(agg.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for seen := from; seen < now; {
		select {
		case ev := <-w.ResultChan():
			r, ok := ev.Object.(*rbacv1.ClusterRole)
			if !ok {
				t.Fatalf("watch event %s: %v", ev.Type, ev.Object)
			}
			t.Logf("%s %s: %d rules", ev.Type, r.ResourceVersion, len(r.Rules))
			if len(r.Rules) != 2 {
				t.Errorf("an upgrade set the aggregated role's rules to %v (version %s)", r.Rules, r.ResourceVersion)
			}
			if seen, err = strconv.ParseInt(r.ResourceVersion, 10, 64); err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatalf("the watch did not reach version %d", now)
		}
	}
	t.Logf("The role's version before the upgrades %d, after %d", from, now)
	if len(agg.Rules) != 2 {
		t.Errorf("after the upgrades the role has %d rules, want 2", len(agg.Rules))
	}
}

// previousChart is the chart as it was before it stopped declaring the aggregated role's rules:
// `rules: []` for every Helm.
func previousChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch := loadChart(t)
	for _, f := range ch.Templates {
		if f.Name != "templates/rbac.yaml" {
			continue
		}
		before := string(f.Data)
		after := regexp.MustCompile(`(?s)\{\{- if hasPrefix "v3\." \.Capabilities\.HelmVersion\.Version \}\}.*?\{\{- end \}\}`).ReplaceAllLiteralString(before, "\nrules: []")
		if after == before {
			t.Fatal("templates/rbac.yaml has no Helm 3 block for the aggregated role's rules")
		}
		f.Data = []byte(after)
		return ch
	}
	t.Fatal("no templates/rbac.yaml")
	return nil
}

// The uninstall hook's Job, run as its ServiceAccount with only its Roles and the Job's arguments,
// deletes the leader election Lease held by a manager of the release and the node Leases of
// NodeHealthChecks its release labelled, and leaves another holder's node Lease, another release's
// and the public operator's (unlabelled) node Leases of NodeHealthChecks in the same namespace, and
// every other Lease.
func TestCleanupHook(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	bin := managerBinary(t)
	c := startCluster(t)
	ctx := context.Background()
	r := mustRender(t, nil)
	for _, ns := range []string{namespace, "medik8s-leases"} {
		if err := c.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	var job *unstructured.Unstructured
	for i := range r {
		if !strings.HasSuffix(r[i].GetName(), "-cleanup") {
			continue
		}
		if r[i].GetAnnotations()["helm.sh/hook"] != "post-delete" {
			t.Errorf("%s %s is not a post-delete hook", r[i].GetKind(), r[i].GetName())
		}
		if r[i].GetKind() == "Job" {
			job = &r[i]
			continue
		}
		o := r[i].DeepCopy()
		if err := c.k8s.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	if job == nil {
		t.Fatal("no cleanup Job rendered")
	}
	containers, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	// Its pod is not one the operator's Services, budget or Deployment select, and the restricted
	// Pod Security profile admits it.
	labels, _, _ := unstructured.NestedStringMap(job.Object, "spec", "template", "metadata", "labels")
	if labels["app.kubernetes.io/name"] == "node-healthcheck" && labels["app.kubernetes.io/instance"] == releaseName {
		t.Errorf("the cleanup pod carries the operator's selector labels: %v", labels)
	}
	restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if err := c.k8s.Create(ctx, restricted); err != nil {
		t.Fatal(err)
	}
	podSpec, _, _ := unstructured.NestedMap(job.Object, "spec", "template", "spec")
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"namespace": restricted.Name, "name": "cleanup"}, "spec": podSpec}}
	unstructured.RemoveNestedField(pod.Object, "spec", "serviceAccountName")
	if err := c.k8s.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Errorf("the restricted Pod Security profile refuses the cleanup pod: %v", err)
	}

	now := metav1.NewMicroTime(time.Now())
	leaseOf := func(ns, name, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &now}}
	}
	// The lease namespace is shared by two releases and the public operator: this release's node
	// Leases are labelled with the identity its managers got, the other's with its own, the public
	// operator's (the same holder identities) with none.
	release := releaseIdentity(args)
	if release == "" {
		t.Fatalf("the cleanup's args %v name no release identity", args)
	}
	of := func(release string, l *coordinationv1.Lease) *coordinationv1.Lease {
		l.Labels = map[string]string{nodelease.ReleaseLabel: release}
		return l
	}
	gone := []*coordinationv1.Lease{
		leaseOf(namespace, "e1f13584.medik8s.io", "nhc-node-healthcheck-6f7c9d-x2x4z_8a3e5b0e-1f0b-4f8e-9a53-2b7c1d9e0f11"),
		of(release, leaseOf("medik8s-leases", "node-worker-0", "NodeHealthCheck-workers")),
		of(release, leaseOf("medik8s-leases", "node-worker-3", "NodeHealthCheck-other")),
	}
	kept := []*coordinationv1.Lease{
		leaseOf("medik8s-leases", "node-worker-1", "node-maintenance"),
		leaseOf(namespace, "pause-remediation", "an-upgrade-tool"),
		of("other-team.nhc", leaseOf("medik8s-leases", "node-worker-2", "NodeHealthCheck-workers")),
		leaseOf("medik8s-leases", "node-worker-4", "NodeHealthCheck-workers"),
	}
	for _, l := range append(slices.Clone(gone), kept...) {
		if err := c.k8s.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, append(args, "--kubeconfig="+c.serviceAccountKubeconfig(t, "nhc-node-healthcheck-cleanup"))...) //nolint:gosec // our binary
	out, err := cmd.CombinedOutput()
	t.Logf("manager %v:\n%s", args, out)
	if err != nil {
		t.Fatalf("the cleanup failed: %v", err)
	}
	for _, l := range gone {
		if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
			t.Errorf("Lease %s/%s (holder %s) not deleted: %v", l.Namespace, l.Name, *l.Spec.HolderIdentity, err)
		}
	}
	for _, l := range kept {
		if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{}); err != nil {
			t.Errorf("Lease %s/%s (holder %s): %v", l.Namespace, l.Name, *l.Spec.HolderIdentity, err)
		}
	}
}

// createRemediatorRole creates a remediator's ClusterRole as the reference documentation shows it,
// labelled for aggregation into the operator's ext-remediation role (two rules).
func createRemediatorRole(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	remediator := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-remediator", Labels: map[string]string{remediationv1alpha1.AggregateToExtRemediationLabel: "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediationtemplates"}, Verbs: []string{"get"}},
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediations"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		},
	}
	if err := c.k8s.Create(ctx, remediator); err != nil {
		t.Fatal(err)
	}
}

// Package chart tests the Helm chart charts/node-healthcheck with the Helm v3 SDK: lint, rendering
// for each option set, and refusal of contradictory values.
package chart

import (
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

const (
	releaseName = "nhc"
	namespace   = "node-healthcheck"
	// kubeVersion is the control plane the tests run (Makefile K8S_VERSION).
	kubeVersion = "v1.37.2"
)

func chartDir() string { return testutil.Path("charts", "node-healthcheck") }

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rendered is one render of the chart: its objects, hooks included.
type rendered []unstructured.Unstructured

// render renders the chart as `helm template` would, for the values (merged over values.yaml) and,
// optionally, extra API versions the cluster serves.
func render(t *testing.T, values map[string]any, apiVersions ...string) (rendered, error) {
	t.Helper()
	return renderChart(t, loadChart(t), values, apiVersions...)
}

// renderChart is render for a loaded chart (the folder, or a packaged archive).
func renderChart(t *testing.T, c *chart.Chart, values map[string]any, apiVersions ...string) (rendered, error) {
	t.Helper()
	return renderRelease(t, c, releaseName, namespace, values, apiVersions...)
}

// dryRun is the release `helm template` (a client-only dry-run install) makes of the chart, for a
// release of that name in that namespace: its manifest and, apart, its hooks.
func dryRun(t *testing.T, c *chart.Chart, name, ns string, values map[string]any, apiVersions ...string) (*release.Release, error) {
	t.Helper()
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = name, ns
	install.APIVersions = chartutil.VersionSet(apiVersions)
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install.KubeVersion = kv
	return install.Run(c, values)
}

// renderRelease is renderChart for a release of that name in that namespace.
func renderRelease(t *testing.T, c *chart.Chart, name, ns string, values map[string]any, apiVersions ...string) (rendered, error) {
	t.Helper()
	rel, err := dryRun(t, c, name, ns, values, apiVersions...)
	if err != nil {
		return nil, err
	}
	manifests := []string{}
	for _, m := range releaseutil.SplitManifests(rel.Manifest) {
		manifests = append(manifests, m)
	}
	for _, h := range rel.Hooks {
		manifests = append(manifests, h.Manifest)
	}
	var out rendered
	for _, m := range manifests {
		u := unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m), &u.Object); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, m)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

func mustRender(t *testing.T, values map[string]any, apiVersions ...string) rendered {
	t.Helper()
	r, err := render(t, values, apiVersions...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// get returns the object of the kind and name; nil when absent.
func (r rendered) get(kind, name string) *unstructured.Unstructured {
	for i := range r {
		if r[i].GetKind() == kind && r[i].GetName() == name {
			return &r[i]
		}
	}
	return nil
}

// kinds returns "<kind>/<name>" of each object, sorted.
func (r rendered) kinds() []string {
	var out []string
	for _, u := range r {
		out = append(out, u.GetKind()+"/"+u.GetName())
	}
	slices.Sort(out)
	return out
}

func TestChartLints(t *testing.T) {
	for _, values := range []map[string]any{nil, {"webhooks": map[string]any{"enabled": false}, "certManager": map[string]any{"enabled": false}}} {
		linter := lint.AllWithKubeVersion(chartDir(), values, namespace, nil)
		for _, m := range linter.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("lint (%v): %s", values, m)
			}
		}
	}
}

// The chart templates copies of what `make manifests` generates; they must be the same bytes.
func TestChartFilesMatchTheGeneratedManifests(t *testing.T) {
	for copyPath, generated := range map[string]string{
		"files/crds/remediation.medik8s.io_nodehealthchecks.yaml": testutil.Path("config", "crd", "bases", "remediation.medik8s.io_nodehealthchecks.yaml"),
		"files/rbac/role.yaml":         testutil.Path("config", "rbac", "role.yaml"),
		"files/webhook/manifests.yaml": testutil.Path("config", "webhook", "manifests.yaml"),
	} {
		a, err := os.ReadFile(testutil.Path("charts", "node-healthcheck", copyPath))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(generated)
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("charts/node-healthcheck/%s differs from %s: run make manifests", copyPath, generated)
		}
	}
}

// API versions a cluster with cert-manager, or with the Prometheus operator, serves (as Helm's
// .Capabilities.APIVersions lists them from discovery).
var (
	certManagerAPI = []string{"cert-manager.io/v1", "cert-manager.io/v1/Certificate", "cert-manager.io/v1/Issuer"}
	monitoringAPI  = []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"}
)

// With no values on a bare cluster (no cert-manager, no Prometheus operator) the chart renders only
// what such a cluster serves: the operator makes its own webhook certificate.
// hookObjects are the hooks' objects (helm test's, uninstall's), rendered with every release.
var hookObjects = []string{"ClusterRole/nhc-node-healthcheck-self-test", "ClusterRoleBinding/nhc-node-healthcheck-self-test",
	"Pod/nhc-node-healthcheck-self-test", "ServiceAccount/nhc-node-healthcheck-self-test",
	// The post-delete hook that deletes the Leases the operator leaves: Roles in the release's
	// namespace and the lease namespace.
	"Job/nhc-node-healthcheck-cleanup", "Role/nhc-node-healthcheck-cleanup", "Role/nhc-node-healthcheck-cleanup",
	"RoleBinding/nhc-node-healthcheck-cleanup", "RoleBinding/nhc-node-healthcheck-cleanup", "ServiceAccount/nhc-node-healthcheck-cleanup"}

func TestDefaultRender(t *testing.T) {
	r := mustRender(t, nil)
	want := []string{
		"ClusterRole/nhc-node-healthcheck-ext-remediation", "ClusterRole/nhc-node-healthcheck-manager",
		"ClusterRole/nhc-node-healthcheck-metrics-reader", "ClusterRoleBinding/nhc-node-healthcheck-ext-remediation", "ClusterRoleBinding/nhc-node-healthcheck-manager",
		"ConfigMap/nhc-node-healthcheck-settings", "CustomResourceDefinition/nodehealthchecks.remediation.medik8s.io", "Deployment/nhc-node-healthcheck",
		"FlowSchema/nhc-node-healthcheck-leader-election", "MutatingWebhookConfiguration/nhc-node-healthcheck-mutating", "Namespace/medik8s-leases", "PodDisruptionBudget/nhc-node-healthcheck",
		"Role/nhc-node-healthcheck-leader-election", "Role/nhc-node-healthcheck-node-leases", "RoleBinding/nhc-node-healthcheck-leader-election",
		"RoleBinding/nhc-node-healthcheck-node-leases", "Secret/nhc-node-healthcheck-webhook-cert", "Service/nhc-node-healthcheck-metrics", "Service/nhc-node-healthcheck-webhook",
		"ServiceAccount/nhc-node-healthcheck", "ValidatingWebhookConfiguration/nhc-node-healthcheck-validating",
	}
	want = slices.Sorted(slices.Values(append(want, hookObjects...)))
	if got := r.kinds(); !slices.Equal(got, want) {
		t.Errorf("objects:\n got %v\nwant %v", got, want)
	}
	crd := r.get("CustomResourceDefinition", "nodehealthchecks.remediation.medik8s.io")
	if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Error("crds.keep is on by default: the CRD must carry helm.sh/resource-policy: keep")
	}
	if ns := r.get("Namespace", "medik8s-leases"); ns.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Error("the shared lease namespace must be kept on uninstall")
	}
}

// With no values on a cluster that serves cert-manager and the Prometheus operator, cert-manager
// issues the webhook certificate and a ServiceMonitor is created (not the PrometheusRule, whose
// operator-down alert needs a Prometheus that scrapes the operator).
func TestDefaultRenderWithCertManagerAndPrometheusOperator(t *testing.T) {
	r := mustRender(t, nil, append(certManagerAPI, monitoringAPI...)...)
	want := []string{
		"Certificate/nhc-node-healthcheck-webhook", "Certificate/nhc-node-healthcheck-webhook-ca", "ClusterRole/nhc-node-healthcheck-ext-remediation", "ClusterRole/nhc-node-healthcheck-manager",
		"ClusterRole/nhc-node-healthcheck-metrics-reader", "ClusterRoleBinding/nhc-node-healthcheck-ext-remediation", "ClusterRoleBinding/nhc-node-healthcheck-manager",
		"ClusterRoleBinding/nhc-node-healthcheck-metrics-scraper",
		"ConfigMap/nhc-node-healthcheck-settings", "CustomResourceDefinition/nodehealthchecks.remediation.medik8s.io", "Deployment/nhc-node-healthcheck", "FlowSchema/nhc-node-healthcheck-leader-election", "Issuer/nhc-node-healthcheck-selfsigned", "Issuer/nhc-node-healthcheck-webhook-ca",
		"MutatingWebhookConfiguration/nhc-node-healthcheck-mutating", "Namespace/medik8s-leases", "PodDisruptionBudget/nhc-node-healthcheck",
		"Role/nhc-node-healthcheck-leader-election", "Role/nhc-node-healthcheck-node-leases", "RoleBinding/nhc-node-healthcheck-leader-election",
		"RoleBinding/nhc-node-healthcheck-node-leases", "Secret/nhc-node-healthcheck-metrics-scraper-token", "Service/nhc-node-healthcheck-metrics",
		"Service/nhc-node-healthcheck-webhook", "ServiceAccount/nhc-node-healthcheck", "ServiceAccount/nhc-node-healthcheck-metrics-scraper", "ServiceMonitor/nhc-node-healthcheck", "ValidatingWebhookConfiguration/nhc-node-healthcheck-validating",
	}
	want = slices.Sorted(slices.Values(append(want, hookObjects...)))
	if got := r.kinds(); !slices.Equal(got, want) {
		t.Errorf("objects:\n got %v\nwant %v", got, want)
	}
}

// certificateSource tells where the rendered release gets its webhook certificate from: "cert-manager",
// "self-managed" or "none", and fails the test when the objects, the manager's arguments, the CA
// injection and the Secret access disagree about it.
func certificateSource(t *testing.T, r rendered) string {
	t.Helper()
	certManager := r.get("Certificate", "nhc-node-healthcheck-webhook") != nil
	secret := r.get("Secret", "nhc-node-healthcheck-webhook-cert") != nil
	selfManagedArg := slices.Contains(deploymentArgs(t, r), "--webhook-cert-secret=node-healthcheck/nhc-node-healthcheck-webhook-cert")
	webhooks := r.get("ValidatingWebhookConfiguration", "nhc-node-healthcheck-validating")
	injected := webhooks != nil && webhooks.GetAnnotations()["cert-manager.io/inject-ca-from"] != ""
	secretAccess := strings.Contains(toYAML(t, r.get("Role", "nhc-node-healthcheck-leader-election")), "secrets")
	switch {
	case certManager && injected && !secret && !selfManagedArg && !secretAccess:
		return "cert-manager"
	case !certManager && !injected && secret && selfManagedArg && secretAccess:
		return "self-managed"
	case webhooks == nil && !certManager && !injected && !secret && !selfManagedArg && !secretAccess:
		return "none"
	}
	t.Fatalf("inconsistent: Certificate %v, CA injection %v, chart's Secret %v, --webhook-cert-secret %v, Secret access %v",
		certManager, injected, secret, selfManagedArg, secretAccess)
	return ""
}

// certManager.enabled: auto (the default) follows what the cluster serves; true and false force.
func TestCertificateSourceFollowsTheCluster(t *testing.T) {
	for _, tt := range []struct {
		name        string
		values      map[string]any
		apiVersions []string
		want        string
	}{
		{"defaults, bare cluster", nil, nil, "self-managed"},
		{"defaults, cert-manager served", nil, certManagerAPI, "cert-manager"},
		{"auto, bare cluster", map[string]any{"certManager": map[string]any{"enabled": "auto"}}, nil, "self-managed"},
		{"auto, cert-manager served", map[string]any{"certManager": map[string]any{"enabled": "auto"}}, certManagerAPI, "cert-manager"},
		{"true, bare cluster", map[string]any{"certManager": map[string]any{"enabled": true}}, nil, "cert-manager"},
		{"false, cert-manager served", map[string]any{"certManager": map[string]any{"enabled": false}}, certManagerAPI, "self-managed"},
		{"an issuer, cert-manager served", map[string]any{"certManager": map[string]any{"issuerRef": map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}}}, certManagerAPI, "cert-manager"},
		{"webhooks off, cert-manager served", map[string]any{"webhooks": map[string]any{"enabled": false}}, certManagerAPI, "none"},
		{"webhooks off, cert-manager forced", map[string]any{"webhooks": map[string]any{"enabled": false}, "certManager": map[string]any{"enabled": true}}, nil, "none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := certificateSource(t, mustRender(t, tt.values, tt.apiVersions...)); got != tt.want {
				t.Errorf("webhook certificate from %s, want %s", got, tt.want)
			}
		})
	}
}

// The ServiceMonitor and the PrometheusRule are created when forced, or with auto when the cluster
// serves their kinds; never without metrics unless forced (which fails, see TestContradictoryValuesFail).
func TestMonitoringFollowsTheCluster(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		values                 map[string]any
		apiVersions            []string
		serviceMonitor, alerts bool
	}{
		{"defaults, bare cluster", nil, nil, false, false},
		{"defaults, Prometheus operator", nil, monitoringAPI, true, false},
		{"auto, bare cluster", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": "auto"}}}, nil, false, false},
		{"auto, Prometheus operator", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": "auto"}}}, monitoringAPI, true, true},
		{"auto, only ServiceMonitors served", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": "auto"}}},
			[]string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"}, true, false},
		{"forced, bare cluster", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}}}, nil, true, true},
		{"off, Prometheus operator", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": false}}}, monitoringAPI, false, false},
		{"auto without metrics, Prometheus operator", map[string]any{"metrics": map[string]any{"enabled": false, "prometheusRule": map[string]any{"enabled": "auto"}}}, monitoringAPI, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRender(t, tt.values, tt.apiVersions...)
			if got := r.get("ServiceMonitor", "nhc-node-healthcheck") != nil; got != tt.serviceMonitor {
				t.Errorf("ServiceMonitor rendered: %v, want %v", got, tt.serviceMonitor)
			}
			if got := r.get("PrometheusRule", "nhc-node-healthcheck") != nil; got != tt.alerts {
				t.Errorf("PrometheusRule rendered: %v, want %v", got, tt.alerts)
			}
		})
	}
}

func TestDeploymentIsSecureAndHighlyAvailable(t *testing.T) {
	d := mustRender(t, nil).get("Deployment", "nhc-node-healthcheck")
	spec := d.Object["spec"].(map[string]any)
	if spec["replicas"] != float64(2) && spec["replicas"] != int64(2) {
		t.Errorf("replicas %v, want 2", spec["replicas"])
	}
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	podSec := pod["securityContext"].(map[string]any)
	if podSec["runAsNonRoot"] != true || podSec["seccompProfile"].(map[string]any)["type"] != "RuntimeDefault" {
		t.Errorf("pod security context %v", podSec)
	}
	c := pod["containers"].([]any)[0].(map[string]any)
	sec := c["securityContext"].(map[string]any)
	if sec["allowPrivilegeEscalation"] != false || sec["readOnlyRootFilesystem"] != true || sec["runAsNonRoot"] != true ||
		!slices.Equal(toStrings(sec["capabilities"].(map[string]any)["drop"]), []string{"ALL"}) {
		t.Errorf("container security context %v", sec)
	}
	args := toStrings(c["args"])
	for _, a := range []string{"--leader-elect=true", "--enable-webhooks=true", "--metrics-secure=true", "--lease-namespace=medik8s-leases",
		"--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs", "--leader-election-lease-duration=12s",
		"--leader-election-renew-deadline=8s", "--leader-election-retry-period=2s", "--shutdown-delay=5s"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %v lack %s", args, a)
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--upgrade-") {
			t.Errorf("plain-Kubernetes upgrade detectors must be off by default: %s", a)
		}
	}
	if c["livenessProbe"] == nil || c["readinessProbe"] == nil {
		t.Error("probes missing")
	}
	spread := pod["topologySpreadConstraints"].([]any)[0].(map[string]any)
	if spread["topologyKey"] != "kubernetes.io/hostname" {
		t.Errorf("replicas must spread across nodes: %v", spread)
	}
}

// The returning-node hold is on by default (as the manager's flag) and can be tuned or turned off.
func TestReturningNodeGraceValue(t *testing.T) {
	args := func(values map[string]any) []string {
		return toStrings(mustRender(t, values).get("Deployment", "nhc-node-healthcheck").Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
	}
	if a := args(nil); !slices.Contains(a, "--returning-node-grace=60s") {
		t.Errorf("default args %v lack --returning-node-grace=60s", a)
	}
	if a := args(map[string]any{"returningNodeGrace": "0s"}); !slices.Contains(a, "--returning-node-grace=0s") {
		t.Errorf("args %v lack --returning-node-grace=0s", a)
	}
}

// The removal hold is 30m by default (as the manager's flag) and can be tuned or turned off.
func TestRemovalHoldValue(t *testing.T) {
	if a := deploymentArgs(t, mustRender(t, nil)); !slices.Contains(a, "--removal-hold=30m") {
		t.Errorf("default args %v lack --removal-hold=30m", a)
	}
	if a := deploymentArgs(t, mustRender(t, map[string]any{"removalHold": "0s"})); !slices.Contains(a, "--removal-hold=0s") {
		t.Errorf("args %v lack --removal-hold=0s", a)
	}
}

// The clock skew bound is on by default (as the manager's flag) and can be tuned or turned off.
func TestMaxClockSkewValue(t *testing.T) {
	if a := deploymentArgs(t, mustRender(t, nil)); !slices.Contains(a, "--max-clock-skew=10s") {
		t.Errorf("default args %v lack --max-clock-skew=10s", a)
	}
	for _, v := range []string{"0s", "0", "30s", "1m30s"} {
		if a := deploymentArgs(t, mustRender(t, map[string]any{"maxClockSkew": v})); !slices.Contains(a, "--max-clock-skew="+v) {
			t.Errorf("maxClockSkew %s: args %v lack --max-clock-skew=%s", v, a, v)
		}
	}
}

func TestUpgradeDetectorValues(t *testing.T) {
	r := mustRender(t, map[string]any{"upgrade": map[string]any{
		"clusterAPI": true, "nodeRollout": true, "pauseObject": map[string]any{"enabled": true, "name": "pause-remediation"}, "maxPause": "6h",
	}})
	args := toStrings(r.get("Deployment", "nhc-node-healthcheck").Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
	for _, a := range []string{"--upgrade-detect-cluster-api", "--upgrade-detect-node-rollout", "--upgrade-pause-object=node-healthcheck/pause-remediation", "--upgrade-max-pause=6h"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %v lack %s", args, a)
		}
	}
	role := r.get("Role", "nhc-node-healthcheck-leader-election")
	if !strings.Contains(toYAML(t, role), "configmaps") {
		t.Error("the pause object needs configmaps get/list/watch in the release namespace")
	}
	// Without the pause object, only the settings ConfigMap, by name.
	plain := &rbacv1.Role{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mustRender(t, nil).get("Role", "nhc-node-healthcheck-leader-election").Object, plain); err != nil {
		t.Fatal(err)
	}
	for _, rule := range plain.Rules {
		if slices.Contains(rule.Resources, "configmaps") && !slices.Equal(rule.ResourceNames, []string{"nhc-node-healthcheck-settings"}) {
			t.Errorf("without the pause object, configmaps only by the settings ConfigMap's name: %+v", rule)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func toYAML(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	if u == nil {
		t.Fatal("object missing")
	}
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The chart README's values table documents every value of values.yaml.
func TestReadmeDocumentsEveryValue(t *testing.T) {
	raw, err := os.ReadFile(testutil.Path("charts", "node-healthcheck", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	values := loadChart(t).Values
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !strings.Contains(string(raw), "`"+key+"`") {
				walk(key+".", sub)
				continue
			}
			if !strings.Contains(string(raw), "`"+key+"`") {
				t.Errorf("charts/node-healthcheck/README.md does not document %s", key)
			}
		}
	}
	walk("", values)
}

// readableBy tells whether a process of the pod can read a file of a secret volume, as the kubelet
// lays such files out (pkg/volume/volume_linux.go, SetVolumeOwnership; secret volumes are read-only
// and get no fsUser): owned by root with the volume's mode; with an fsGroup, group-owned by it with
// group read added (mode | 0440). The containers run as runAsUser with runAsGroup and, as a
// supplementary group, the fsGroup.
func readableBy(sec *corev1.PodSecurityContext, mode int32) bool {
	if sec.RunAsUser == nil || *sec.RunAsUser == 0 {
		return true // root reads anything
	}
	fileGroup := int64(0)
	if sec.FSGroup != nil {
		fileGroup, mode = *sec.FSGroup, mode|0o440
	}
	groups := []int64{}
	if sec.RunAsGroup != nil {
		groups = append(groups, *sec.RunAsGroup)
	}
	if sec.FSGroup != nil {
		groups = append(groups, *sec.FSGroup)
	}
	return mode&0o004 != 0 || (slices.Contains(groups, fileGroup) && mode&0o040 != 0)
}

// The webhook certificate volume mounts only tls.crt and tls.key (not the CA nor, without
// cert-manager, the CA's key, which the operator reads through the API), with mode 0400; the pod
// runs as the image's non-root user 65532 with fsGroup 65532, without which a 0400 file would be
// root's alone and the manager could not read its key. On OpenShift the security context
// constraints assign the user and the fsGroup (an explicit 65532 would be refused there).
func TestCertificateVolumeIsReadableByTheOperatorOnly(t *testing.T) {
	for _, tt := range []struct {
		name        string
		apiVersions []string
		optional    bool
		openshift   bool
	}{
		{"self-managed", nil, true, false},
		{"cert-manager", certManagerAPI, false, false},
		{"self-managed on OpenShift", []string{"security.openshift.io/v1"}, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mustRender(t, nil, tt.apiVersions...).get("Deployment", "nhc-node-healthcheck").Object, d); err != nil {
				t.Fatal(err)
			}
			pod := d.Spec.Template.Spec
			var secrets []corev1.Volume
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					secrets = append(secrets, v)
				}
			}
			if len(secrets) != 1 || secrets[0].Secret.SecretName != "nhc-node-healthcheck-webhook-cert" {
				t.Fatalf("secret volumes %+v, want the webhook certificate's only", secrets)
			}
			v := secrets[0].Secret
			if v.DefaultMode == nil || *v.DefaultMode != 0o400 {
				t.Errorf("defaultMode %v, want 0400", v.DefaultMode)
			}
			if want := []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}}; !slices.Equal(v.Items, want) {
				t.Errorf("items %+v, want %+v", v.Items, want)
			}
			// The operator fills its own Secret from this very pod: the volume must mount while it is
			// empty (a missing key of a required volume blocks the pod). cert-manager's must exist.
			if got := v.Optional != nil && *v.Optional; got != tt.optional {
				t.Errorf("optional %v, want %v", got, tt.optional)
			}
			sec := pod.SecurityContext
			if tt.openshift {
				if sec.RunAsUser != nil || sec.RunAsGroup != nil || sec.FSGroup != nil {
					t.Errorf("on OpenShift the SCC assigns user and fsGroup; the chart sets %+v", sec)
				}
				return
			}
			if sec.RunAsUser == nil || *sec.RunAsUser != 65532 || sec.RunAsGroup == nil || *sec.RunAsGroup != 65532 {
				t.Errorf("pod user %v group %v, want the image's 65532", sec.RunAsUser, sec.RunAsGroup)
			}
			if !readableBy(sec, *v.DefaultMode) {
				t.Errorf("the manager (security context %+v) cannot read a file of mode %o", sec, *v.DefaultMode)
			}
			noFSGroup := sec.DeepCopy()
			noFSGroup.FSGroup = nil
			if readableBy(noFSGroup, *v.DefaultMode) {
				t.Error("the check is void: without fsGroup a 0400 root file must be unreadable by 65532")
			}
		})
	}
	d := mustRender(t, map[string]any{"webhooks": map[string]any{"enabled": false}}).get("Deployment", "nhc-node-healthcheck")
	if strings.Contains(toYAML(t, d), "secretName") {
		t.Error("without webhooks no Secret is mounted")
	}
}

package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// cluster is a real control plane for installing the chart: the test remediators' CRDs and the real
// cert-manager and Prometheus-operator CRDs are installed, the NodeHealthCheck CRD is not (the chart
// installs it).
type cluster struct {
	env        *envtest.Environment
	k8s        client.Client
	kubeconfig string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	if err := testutil.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: []string{testutil.TestCRDDir(), testutil.Path("test", "crds", "thirdparty")}},
		ErrorIfCRDPathMissing: true,
		// The package's tests start their control planes side by side, beside make test's other
		// packages: on 2 cores a kube-apiserver took longer than envtest's default 20 s to get ready,
		// five times in a row (TestCleanupHook in a fresh clone's make test).
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := testutil.Scheme()
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	user, err := env.AddUser(envtest.User{Name: "helm-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return &cluster{env: env, k8s: k8s, kubeconfig: kubeconfig}
}

// helm returns a Helm action configuration for the cluster, storing releases in Secrets as the
// helm CLI does. Its Kubernetes client returns from creating or updating a release's objects only
// once the API server serves the kinds of the CRDs among them (servedCRDs).
func (c *cluster) helm(t *testing.T) *action.Configuration {
	t.Helper()
	log := func(format string, v ...any) { t.Logf("helm: "+format, v...) }
	cfg, err := localcluster.Helm(c.kubeconfig, namespace, log)
	if err != nil {
		t.Fatal(err)
	}
	kc, ok := cfg.KubeClient.(*kube.Client)
	if !ok {
		t.Fatalf("Helm's Kubernetes client is a %T, not a *kube.Client", cfg.KubeClient)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.KubeClient = &servedCRDs{Client: kc, k8s: c.k8s, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), log: log}
	return cfg
}

// servedCRDs is Helm's Kubernetes client, except that Create and Update return only once the API
// server serves the kinds of the CustomResourceDefinitions they applied: each Established and its
// kind found by a fresh discovery. Helm waits so only for a chart's crds/ directory
// (Install.installCRDs: KubeClient.Wait, then a reset of its discovery cache and RESTMapper); the
// chart templates its CRD (crds.enabled, crds.keep), which Helm creates with the release's other
// objects and waits for only with --wait (ReadyChecker.crdReady). The post-install hook that comes
// next, the default NodeHealthCheck, is built with a RESTMapper that asks discovery again only once
// (DeferredDiscoveryRESTMapper), and the API server's discovery serves a CRD's kind only some time
// after it is created (Established, then its DiscoveryController): under the parallel tests' load
// the install failed with "no matches for kind NodeHealthCheck". What the README asks of a user with
// the default NodeHealthCheck (--wait) waits for Established; this waits for discovery too.
type servedCRDs struct {
	*kube.Client
	k8s    client.Client
	mapper meta.ResettableRESTMapper
	log    func(format string, v ...any)
}

// crdServedTimeout is Install.installCRDs' wait for a chart's crds/.
const crdServedTimeout = time.Minute

// Create creates the resources as Helm's client does, then waits until their CRDs are served.
func (k *servedCRDs) Create(resources kube.ResourceList) (*kube.Result, error) {
	res, err := k.Client.Create(resources)
	if err != nil {
		return res, err
	}
	return res, k.served(resources)
}

// Update updates the resources as Helm's client does, then waits until the target's CRDs are served.
func (k *servedCRDs) Update(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	res, err := k.Client.Update(original, target, force)
	if err != nil {
		return res, err
	}
	return res, k.served(target)
}

// served polls until every CustomResourceDefinition among the resources is Established and
// discovery, asked afresh, maps each of its served versions' kind.
func (k *servedCRDs) served(resources kube.ResourceList) error {
	for _, info := range resources {
		if info.Mapping.GroupVersionKind.GroupKind() != (schema.GroupKind{Group: apiextensionsv1.GroupName, Kind: "CustomResourceDefinition"}) {
			continue
		}
		var last error
		start := time.Now()
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, crdServedTimeout, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := k.k8s.Get(ctx, client.ObjectKey{Name: info.Name}, crd); err != nil {
				last = err
				return false, nil
			}
			if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
				last = fmt.Errorf("not Established: %v", crd.Status.Conditions)
				return false, nil
			}
			k.mapper.Reset()
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				if _, err := k.mapper.RESTMapping(schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}, v.Name); err != nil {
					last = err
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not served within %s: %w (last: %v)", info.Name, crdServedTimeout, err, last)
		}
		k.log("CRD %s served after %s", info.Name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func (c *cluster) install(t *testing.T, values map[string]any) {
	t.Helper()
	install := action.NewInstall(c.helm(t))
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Timeout = releaseName, namespace, true, time.Minute
	if _, err := install.Run(loadChart(t), values); err != nil {
		t.Fatalf("helm install: %v", err)
	}
}

func (c *cluster) upgrade(t *testing.T, values map[string]any) {
	t.Helper()
	upgrade := action.NewUpgrade(c.helm(t))
	upgrade.Namespace, upgrade.Timeout = namespace, time.Minute
	if _, err := upgrade.Run(releaseName, loadChart(t), values); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
}

func (c *cluster) uninstall(t *testing.T) {
	t.Helper()
	uninstall := action.NewUninstall(c.helm(t))
	// The post-delete hook's Job needs a Job controller and a kubelet, which envtest has not: its
	// rights and arguments are tested by TestCleanupHook, and it runs in test/realnode.
	uninstall.Timeout, uninstall.DisableHooks = time.Minute, true
	if _, err := uninstall.Run(releaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
}

// exists reports whether the object (apiVersion, kind, namespace, name) exists.
func (c *cluster) exists(t *testing.T, apiVersion, kind, ns, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := c.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("getting %s %s/%s: %v", kind, ns, name, err)
	}
	return err == nil
}

func (c *cluster) expect(t *testing.T, want bool, objs ...[4]string) {
	t.Helper()
	for _, o := range objs {
		if got := c.exists(t, o[0], o[1], o[2], o[3]); got != want {
			t.Errorf("%s %s/%s exists: %v, want %v", o[1], o[2], o[3], got, want)
		}
	}
}

// Install, upgrade and uninstall the chart on a real API server, which validates every object
// against the real schemas (the CRD's, cert-manager's, Prometheus-operator's, the built-in kinds').
func TestInstallUpgradeUninstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	c := startCluster(t)
	full := "nhc-node-healthcheck"
	crd := [4]string{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "nodehealthchecks.remediation.medik8s.io"}
	deployment := [4]string{"apps/v1", "Deployment", namespace, full}
	webhooks := [][4]string{
		{"admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", full + "-mutating"},
		{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", full + "-validating"},
		{"cert-manager.io/v1", "Certificate", namespace, full + "-webhook"},
		{"cert-manager.io/v1", "Issuer", namespace, full + "-selfsigned"},
		{"cert-manager.io/v1", "Certificate", namespace, full + "-webhook-ca"},
		{"cert-manager.io/v1", "Issuer", namespace, full + "-webhook-ca"},
	}
	monitoring := [][4]string{
		{"monitoring.coreos.com/v1", "ServiceMonitor", namespace, full},
		{"monitoring.coreos.com/v1", "PrometheusRule", namespace, full},
	}
	// The Grafana dashboard, in a namespace of its own (where a Grafana sidecar would look).
	dashboard := [4]string{"v1", "ConfigMap", "default", full + "-dashboard"}

	t.Run("install with the defaults", func(t *testing.T) {
		c.install(t, nil)
		// cert-manager and the Prometheus operator are served: cert-manager issues the certificate
		// (the chart creates no Secret for the operator to fill) and a ServiceMonitor is created.
		c.expect(t, true, append(webhooks, crd, deployment, monitoring[0],
			[4]string{"v1", "Namespace", "", "medik8s-leases"},
			[4]string{"rbac.authorization.k8s.io/v1", "Role", "medik8s-leases", full + "-node-leases"},
			[4]string{"policy/v1", "PodDisruptionBudget", namespace, full})...)
		c.expect(t, false, monitoring[1], dashboard, [4]string{"v1", "Secret", namespace, full + "-webhook-cert"})
		d := &appsv1.Deployment{}
		if err := c.k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: full}, d); err != nil {
			t.Fatal(err)
		}
		if *d.Spec.Replicas != 2 {
			t.Errorf("replicas %d", *d.Spec.Replicas)
		}
		// The API server's PodSecurity admission, enforcing the restricted profile, admits the pod.
		restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
		if err := c.k8s.Create(context.Background(), restricted); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: restricted.Name, Name: "manager"}, Spec: d.Spec.Template.Spec}
		pod.Spec.ServiceAccountName = ""
		if err := c.k8s.Create(context.Background(), pod, client.DryRunAll); err != nil {
			t.Errorf("the restricted Pod Security profile refuses the operator's pod: %v", err)
		}
		privileged := pod.DeepCopy()
		privileged.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		if err := c.k8s.Create(context.Background(), privileged, client.DryRunAll); err == nil {
			t.Error("the check is void: a pod allowing privilege escalation was admitted too")
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("a helm test that fails leaves no rights behind", func(t *testing.T) {
		// No kubelet runs here: the test pod never starts, and Helm gives up after the timeout.
		test := action.NewReleaseTesting(c.helm(t))
		test.Namespace, test.Timeout = namespace, 3*time.Second
		if _, err := test.Run(releaseName); err == nil {
			t.Fatal("helm test passed without a kubelet")
		}
		rbac := "rbac.authorization.k8s.io/v1"
		c.expect(t, false, [4]string{"v1", "ServiceAccount", namespace, full + "-self-test"}, [4]string{rbac, "ClusterRole", "", full + "-self-test"},
			[4]string{rbac, "ClusterRoleBinding", "", full + "-self-test"})
		c.expect(t, true, [4]string{"v1", "Pod", namespace, full + "-self-test"}) // for its logs and events
	})

	t.Run("upgrade: webhooks off, monitoring, the dashboard and upgrade detectors on", func(t *testing.T) {
		c.upgrade(t, map[string]any{
			"webhooks":    map[string]any{"enabled": false},
			"certManager": map[string]any{"enabled": false},
			"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true},
				"prometheusRule":   map[string]any{"enabled": true},
				"grafanaDashboard": map[string]any{"enabled": true, "namespace": dashboard[2]}},
			"upgrade": map[string]any{"clusterAPI": true, "pauseObject": map[string]any{"enabled": true}, "maxPause": "6h"},
		})
		c.expect(t, false, webhooks...)
		c.expect(t, true, append(monitoring, crd, deployment, dashboard)...)
		// The API server validated the rule against the Prometheus operator's CRD: the new alerts
		// are stored as rendered.
		rule := &unstructured.Unstructured{}
		rule.SetAPIVersion(monitoring[1][0])
		rule.SetKind(monitoring[1][1])
		if err := c.k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: full}, rule); err != nil {
			t.Fatal(err)
		}
		stored := alertRules(t, rendered{*rule})
		for _, alert := range []string{"NodeHealthCheckEscalationExhausted", "NodeHealthCheckRepairBudgetExhausted", "NodeHealthCheckRemediationPastDeadline"} {
			if _, ok := stored[alert]; !ok {
				t.Errorf("the stored PrometheusRule lacks %s", alert)
			}
		}
		cm := &corev1.ConfigMap{}
		if err := c.k8s.Get(context.Background(), client.ObjectKey{Namespace: dashboard[2], Name: dashboard[3]}, cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels["grafana_dashboard"] != "1" || !json.Valid([]byte(cm.Data["node-healthcheck.json"])) {
			t.Errorf("the stored dashboard ConfigMap: labels %v, a dashboard of %d bytes that is JSON: %v", cm.Labels,
				len(cm.Data["node-healthcheck.json"]), json.Valid([]byte(cm.Data["node-healthcheck.json"])))
		}
	})
	t.Run("upgrade: a PodMonitor instead of the ServiceMonitor", func(t *testing.T) {
		c.upgrade(t, map[string]any{
			"webhooks":    map[string]any{"enabled": false},
			"certManager": map[string]any{"enabled": false},
			"metrics": map[string]any{"podMonitor": map[string]any{"enabled": true},
				"serviceMonitor": map[string]any{"scrapeTimeout": "20s", "relabelings": []any{map[string]any{"targetLabel": "cluster", "replacement": "east"}}}},
		})
		// The API server validated it against the Prometheus operator's CRD.
		c.expect(t, true, [4]string{"monitoring.coreos.com/v1", "PodMonitor", namespace, full},
			[4]string{"v1", "Secret", namespace, full + "-metrics-scraper-token"})
		c.expect(t, false, monitoring...)
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("uninstall keeps the CRD and the shared lease namespace", func(t *testing.T) {
		c.uninstall(t)
		c.expect(t, false, append(monitoring, deployment, dashboard)...)
		c.expect(t, true, crd, [4]string{"v1", "Namespace", "", "medik8s-leases"})
	})

	t.Run("install again over the kept CRD, with the default NodeHealthCheck", func(t *testing.T) {
		c.install(t, map[string]any{
			"webhooks":               map[string]any{"enabled": false},
			"certManager":            map[string]any{"enabled": false},
			"defaultNodeHealthCheck": map[string]any{"enabled": true},
		})
		nhc := &remediationv1alpha1.NodeHealthCheck{}
		if err := c.k8s.Get(context.Background(), client.ObjectKey{Name: "nhc-worker-default"}, nhc); err != nil {
			t.Fatalf("the default NodeHealthCheck: %v", err)
		}
		if got := fmt.Sprint(nhc.Spec.MinHealthy); got != "51%" {
			t.Errorf("minHealthy %s", got)
		}
		c.uninstall(t)
		if !c.exists(t, "remediation.medik8s.io/v1alpha1", "NodeHealthCheck", "", "nhc-worker-default") {
			t.Error("uninstalling must not delete NodeHealthChecks")
		}
	})

	t.Run("the default NodeHealthCheck is not created when one exists", func(t *testing.T) {
		c.install(t, map[string]any{
			"webhooks":               map[string]any{"enabled": false},
			"certManager":            map[string]any{"enabled": false},
			"defaultNodeHealthCheck": map[string]any{"enabled": true, "remediationTemplate": map[string]any{"name": "another"}},
		})
		nhc := &remediationv1alpha1.NodeHealthCheck{}
		if err := c.k8s.Get(context.Background(), client.ObjectKey{Name: "nhc-worker-default"}, nhc); err != nil {
			t.Fatal(err)
		}
		if nhc.Spec.RemediationTemplate.Name == "another" {
			t.Error("an existing NodeHealthCheck was overwritten")
		}
	})
}

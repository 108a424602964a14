package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// ChartNamespace is where InstallChart installs the chart, as release "nhc".
const ChartNamespace = "node-healthcheck"

// Names of the release's objects that the local cluster plays a part for.
const (
	// ServiceAccount is the operator's ServiceAccount.
	ServiceAccount = "nhc-node-healthcheck"
	// WebhookService is the webhook Service; StartManager publishes managers' endpoints for it.
	WebhookService = "nhc-node-healthcheck-webhook"
	// WebhookSecret holds the webhook certificate; it is mounted at Cluster.CertDir.
	WebhookSecret = "nhc-node-healthcheck-webhook-cert"
)

// release is what InstallChart installed.
type release struct {
	// managerArgs are the arguments of the Deployment's manager container.
	managerArgs []string
	// serviceAccountKubeconfig authenticates as the operator's ServiceAccount.
	serviceAccountKubeconfig string
	// testHook is the chart's `helm test` hook.
	testHook *TestHook
}

// TestHook is the chart's `helm test` hook: the objects Helm creates before its Pod, and the Pod's
// ServiceAccount and container arguments. Nothing runs pods here: a test creates the objects and
// runs the manager binary with the arguments, as the ServiceAccount.
type TestHook struct {
	Objects        []*unstructured.Unstructured
	ServiceAccount string
	Args           []string
}

// ChartTestHook returns the test hook of the chart InstallChart installed.
func (c *Cluster) ChartTestHook() *TestHook { return c.chart.testHook }

// testHook parses the release's test hooks.
func testHook(hooks []*helmrelease.Hook) (*TestHook, error) {
	h := &TestHook{}
	for _, hook := range hooks {
		if !slices.Contains(hook.Events, helmrelease.HookTest) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(hook.Manifest), &u.Object); err != nil {
			return nil, fmt.Errorf("hook %s: %w", hook.Path, err)
		}
		if u.GetKind() != "Pod" {
			h.Objects = append(h.Objects, u)
			continue
		}
		h.ServiceAccount, _, _ = unstructured.NestedString(u.Object, "spec", "serviceAccountName")
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "containers")
		if len(containers) != 1 {
			return nil, fmt.Errorf("test pod %s: want one container, got %d", u.GetName(), len(containers))
		}
		args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		if err != nil {
			return nil, err
		}
		h.Args = args
	}
	if h.Args == nil {
		return nil, errors.New("the release has no test pod")
	}
	return h, nil
}

// Helm returns a Helm action configuration for the cluster (releases stored in Secrets, as the helm
// CLI does), for the namespace.
func Helm(kubeconfig, namespace string, log func(format string, args ...any)) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	cfg := &action.Configuration{}
	if log == nil {
		log = func(string, ...any) {}
	}
	if err := cfg.Init(flags, namespace, "secret", log); err != nil {
		return nil, err
	}
	return cfg, nil
}

// InstallChart installs charts/node-healthcheck as release "nhc" into ChartNamespace with the values
// and waits until its CRD is served. Nothing runs the chart's Deployment here: StartManager runs
// managers with its arguments, and they authenticate as the chart's ServiceAccount, so that they
// have exactly the chart's RBAC. The webhook certificate Secret is mounted at CertDir from now on,
// only the keys the Deployment's volume mounts. It returns the ServiceAccount's kubeconfig.
func (c *Cluster) InstallChart(values map[string]any) (string, error) {
	cfg, err := Helm(c.Kubeconfig, ChartNamespace, nil)
	if err != nil {
		return "", err
	}
	chrt, err := loader.Load(testutil.Path("charts", "node-healthcheck"))
	if err != nil {
		return "", err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Timeout = "nhc", ChartNamespace, true, time.Minute
	rel, err := install.Run(chrt, values)
	if err != nil {
		return "", fmt.Errorf("helm install: %w", err)
	}
	args, err := DeploymentArgs(rel.Manifest)
	if err != nil {
		return "", err
	}
	if err := c.waitForCRD("nodehealthchecks.remediation.medik8s.io"); err != nil {
		return "", err
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ChartNamespace, ServiceAccount)
	if err != nil {
		return "", err
	}
	hook, err := testHook(rel.Hooks)
	if err != nil {
		return "", err
	}
	keys, err := SecretVolumeKeys(rel.Manifest, WebhookSecret)
	if err != nil {
		return "", err
	}
	c.chart = &release{managerArgs: args, serviceAccountKubeconfig: kubeconfig, testHook: hook}
	c.mountSecret(WebhookSecret, keys)
	return kubeconfig, nil
}

// SecretVolumeKeys returns the keys of the Secret that the Deployment in a release's manifest mounts
// as a volume (its items), or nil when the volume mounts every key.
func SecretVolumeKeys(manifest, secret string) ([]string, error) {
	for _, m := range releaseutil.SplitManifests(manifest) {
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal([]byte(m), d); err != nil {
			return nil, err
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret == nil || v.Secret.SecretName != secret {
				continue
			}
			var keys []string
			for _, item := range v.Secret.Items {
				if item.Path != item.Key {
					return nil, fmt.Errorf("volume %s mounts key %s as %s: not supported here", v.Name, item.Key, item.Path)
				}
				keys = append(keys, item.Key)
			}
			return keys, nil
		}
		return nil, fmt.Errorf("the Deployment mounts no Secret %s", secret)
	}
	return nil, errors.New("the release has no Deployment")
}

// DeploymentArgs returns the manager arguments of the Deployment in a release's manifest.
func DeploymentArgs(manifest string) ([]string, error) {
	for _, m := range releaseutil.SplitManifests(manifest) {
		u := unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m), &u.Object); err != nil {
			return nil, err
		}
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			break
		}
		args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		return args, err
	}
	return nil, errors.New("the release has no Deployment with a container")
}

// waitForCRD waits until the CRD is established.
func (c *Cluster) waitForCRD(name string) error {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	for {
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conditions {
				if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ServiceAccountKubeconfig writes, into the cluster's scratch folder, a kubeconfig that
// authenticates as the ServiceAccount (see ServiceAccountKubeconfig).
func (c *Cluster) ServiceAccountKubeconfig(namespace, name string) (string, error) {
	return ServiceAccountKubeconfig(c.Config, c.Dir, namespace, name)
}

// ServiceAccountKubeconfig writes into dir a kubeconfig for the API server of cfg that authenticates
// as the ServiceAccount with a bound token from the TokenRequest API (valid for a day), as a pod
// would, and returns its path.
func ServiceAccountKubeconfig(cfg *rest.Config, dir, namespace, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", namespace, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["sa"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	kc.CurrentContext = "sa"
	path := filepath.Join(dir, "kubeconfig-"+namespace+"-"+name)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", err
	}
	return path, os.Chmod(path, 0o600)
}

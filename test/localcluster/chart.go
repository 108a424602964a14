package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// ChartNamespace is where InstallChart installs the chart.
const ChartNamespace = "node-healthcheck"

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

// InstallChart installs charts/node-healthcheck as release "nhc" into ChartNamespace with the values,
// and returns a kubeconfig of the chart's ServiceAccount, so that the manager runs with exactly the
// chart's RBAC.
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
	if _, err := install.Run(chrt, values); err != nil {
		return "", fmt.Errorf("helm install: %w", err)
	}
	return c.ServiceAccountKubeconfig(ChartNamespace, "nhc-node-healthcheck")
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

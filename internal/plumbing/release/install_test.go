package release_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/medik8s/node-healthcheck/internal/plumbing/release"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// renderInstall returns install.yaml of the chart as the release writes it.
func renderInstall(t *testing.T) []byte {
	t.Helper()
	_, pkg, err := release.PackageChart(testutil.Path("charts", "node-healthcheck"), created)
	if err != nil {
		t.Fatal(err)
	}
	data, err := release.RenderInstall(context.Background(), pkg, release.InstallOptions{Release: "nhc", Namespace: "nhc-system", KubeVersion: "v1.37.0"})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestInstallYAML reads install.yaml's objects: the Namespace first, the CRD, the operator, its
// webhooks and the self-managed certificate's Secret; no Helm hook; the aggregated ClusterRole
// without rules; everything namespaced in a namespace it creates (the operator's, the leases').
func TestInstallYAML(t *testing.T) {
	data := renderInstall(t)
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) == 0 || objs[0].GetKind() != "Namespace" || objs[0].GetName() != "nhc-system" {
		t.Fatalf("install.yaml does not start with the Namespace nhc-system")
	}
	kinds, namespaces := map[string]int{}, map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			namespaces[u.GetName()] = true
		}
	}
	if !namespaces["medik8s-leases"] {
		t.Errorf("install.yaml does not create the lease namespace")
	}
	for _, u := range objs {
		kinds[u.GetKind()]++
		for k := range u.GetAnnotations() {
			if strings.HasPrefix(k, "helm.sh/hook") {
				t.Errorf("%s %s is a Helm hook", u.GetKind(), u.GetName())
			}
		}
		if ns := u.GetNamespace(); ns != "" && !namespaces[ns] {
			t.Errorf("%s %s is in namespace %s, which install.yaml does not create", u.GetKind(), u.GetName(), ns)
		}
		if u.GetKind() == "ClusterRole" {
			if _, agg := u.Object["aggregationRule"]; agg {
				if _, has := u.Object["rules"]; has {
					t.Errorf("the aggregated ClusterRole %s has rules, which every apply would reset", u.GetName())
				}
			}
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "Deployment", "ServiceAccount", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Secret", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("install.yaml has no %s; it has %v", k, kinds)
		}
	}
	if kinds["Pod"] > 0 || kinds["Job"] > 0 {
		t.Errorf("install.yaml has the test pod or the uninstall job: %v", kinds)
	}
}

// TestInstallYAMLAppliesOnAnEmptyCluster applies install.yaml with kubectl on an empty API server,
// twice (the second apply changes nothing it should not), and finds the operator's objects.
func TestInstallYAMLAppliesOnAnEmptyCluster(t *testing.T) {
	if err := testutil.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, release.InstallFile), renderInstall(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		cmd := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "--kubeconfig", filepath.Join(dir, "kubeconfig"), //nolint:gosec // the test's kubectl
			"apply", "-f", filepath.Join(dir, release.InstallFile))
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(dir, "cache"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply -f install.yaml (%d): %v\n%s", i+1, err, out)
		}
		if i == 1 && strings.Contains(string(out), " created") {
			t.Errorf("the second apply created objects:\n%s", out)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := cs.AppsV1().Deployments("nhc-system").Get(ctx, "nhc-node-healthcheck", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "ghcr.io/medik8s/node-healthcheck:") {
		t.Errorf("the Deployment runs %s", img)
	}
	vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "nhc-node-healthcheck-validating", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc := vwc.Webhooks[0].ClientConfig.Service; svc == nil || svc.Namespace != "nhc-system" {
		t.Errorf("the validating webhook calls %+v", svc)
	}
	if _, err := cs.CoreV1().Secrets("nhc-system").Get(ctx, "nhc-node-healthcheck-webhook-cert", metav1.GetOptions{}); err != nil {
		t.Errorf("the self-managed certificate's Secret: %v", err)
	}
}

package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// declaredModule returns the module path a go.mod declares.
func declaredModule(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// RepoRoot returns the repository's root folder, so tests work from any package directory: found
// from this source file's location, or, in a binary built with -trimpath (the Makefile builds and
// tests so), where source files are named by import path, as the nearest folder above the working
// directory whose go.mod declares this module (go test runs a test in its package's folder).
func RepoRoot() string {
	repoRootOnce.Do(func() { repoRoot = findRepoRoot() })
	return repoRoot
}

var (
	repoRootOnce sync.Once
	repoRoot     string
)

// modulePath is the module RepoRoot looks for.
const modulePath = "github.com/medik8s/node-healthcheck"

func findRepoRoot() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "..", "..")
	}
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("testutil: cannot locate the repository: %v", err))
	}
	for start := dir; ; {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaredModule(data) == modulePath {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic(fmt.Sprintf("testutil: no folder above %s holds the go.mod of %s", start, modulePath))
		}
		dir = parent
	}
}

// Path joins elements onto the repository root.
func Path(elem ...string) string {
	return filepath.Join(append([]string{RepoRoot()}, elem...)...)
}

// CRDDir is the folder of the generated NodeHealthCheck CRD.
func CRDDir() string { return Path("config", "crd", "bases") }

// TestCRDDir is the folder of the test remediators' CRDs.
func TestCRDDir() string { return Path("test", "crds") }

// WebhookManifestDir is the folder of the generated webhook configurations.
func WebhookManifestDir() string { return Path("config", "webhook") }

// CheckAssets fails fast, with a hint, when KUBEBUILDER_ASSETS does not point at a control plane.
// Where it is unset, it is set to the control plane `make controlplane` cached under bin/k8s, so a
// plain `go test ./...` works after one `make test`.
func CheckAssets() error {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		cached, _ := filepath.Glob(Path("bin", "k8s", "*", "kube-apiserver"))
		if len(cached) == 0 {
			return fmt.Errorf("KUBEBUILDER_ASSETS is not set and bin/k8s holds no control plane: run the tests with 'make test', which builds it")
		}
		dir = filepath.Dir(cached[len(cached)-1])
		if err := os.Setenv("KUBEBUILDER_ASSETS", dir); err != nil {
			return err
		}
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("KUBEBUILDER_ASSETS=%s has no %s: run 'make controlplane'", dir, b)
		}
	}
	return nil
}

// LoadNHCCRD reads the generated NodeHealthCheck CRD.
func LoadNHCCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	f, err := os.Open(filepath.Join(CRDDir(), "remediation.medik8s.io_nodehealthchecks.yaml"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(crd); err != nil {
		return nil, fmt.Errorf("decoding NodeHealthCheck CRD: %w", err)
	}
	return crd, nil
}

// StructuralOnly returns a copy of crd whose schemas keep only their structure (types, properties,
// int-or-string, preserve-unknown-fields): no CEL rules, patterns, enums, bounds or defaults. Required
// fields stay: list-map keys must be required. A suite that installs it sees every request reach the admission webhooks, so it can test
// what the webhooks refuse on their own.
func StructuralOnly(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	out := crd.DeepCopy()
	for i := range out.Spec.Versions {
		if s := out.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			stripValidation(s.OpenAPIV3Schema)
		}
	}
	return out
}

func stripValidation(s *apiextensionsv1.JSONSchemaProps) {
	s.XValidations = nil
	s.Pattern = ""
	s.Enum = nil
	s.MinItems, s.MaxItems, s.MinLength, s.MaxLength = nil, nil, nil, nil
	s.Minimum, s.Maximum = nil, nil
	s.Default = nil
	s.AnyOf = nil // int-or-string carries anyOf [integer, string]; x-kubernetes-int-or-string suffices
	for k, p := range s.Properties {
		stripValidation(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		stripValidation(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		stripValidation(s.AdditionalProperties.Schema)
	}
}

// NewEnvironment returns an envtest environment with the given NodeHealthCheck CRD (nil: the
// generated one from config/crd/bases) and the test remediators' CRDs. With webhooks, the generated
// webhook configurations are installed and point at a local server whose address and certificates are
// in env.WebhookInstallOptions.
func NewEnvironment(nhcCRD *apiextensionsv1.CustomResourceDefinition, webhooks bool) *envtest.Environment {
	env := &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: []string{TestCRDDir()}},
		ErrorIfCRDPathMissing: true,
	}
	if nhcCRD == nil {
		env.CRDInstallOptions.Paths = append(env.CRDInstallOptions.Paths, CRDDir())
	} else {
		env.CRDInstallOptions.CRDs = []*apiextensionsv1.CustomResourceDefinition{nhcCRD}
	}
	if webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{WebhookManifestDir()}}
	}
	return env
}

// StartControlPlane starts a control plane (NewEnvironment with the generated NodeHealthCheck CRD,
// no webhooks) for one test, stopped when the test ends, and returns its config. A missing control
// plane fails the test with CheckAssets' message.
func StartControlPlane(tb testing.TB) *rest.Config {
	tb.Helper()
	if err := CheckAssets(); err != nil {
		tb.Fatal(err)
	}
	env := NewEnvironment(nil, false)
	cfg, err := env.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Log(err)
		}
	})
	return cfg
}

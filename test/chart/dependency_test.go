package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// umbrella writes, in a new folder, a chart that has this one as a dependency under charts/ (as
// `helm dependency build` leaves it), enabled by the usual condition node-healthcheck.enabled, and
// with values.yaml as given; it returns the folder.
func umbrella(t *testing.T, values map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	meta := map[string]any{"apiVersion": "v2", "name": "platform", "version": "1.0.0",
		"dependencies": []any{map[string]any{"name": "node-healthcheck", "version": loadChart(t).Metadata.Version,
			"repository": "file://charts/node-healthcheck", "condition": "node-healthcheck.enabled"}}}
	for name, v := range map[string]any{"Chart.yaml": meta, "values.yaml": values} {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.Save(loadChart(t), filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The chart works as a dependency of an umbrella chart: Helm gives every subchart the umbrella's
// `global` values, and umbrellas switch dependencies on and off with a condition, usually
// <name>.enabled, in the subchart's values. Both pass the schema, which still refuses a misspelt
// top-level value (TestContradictoryValuesFail).
func TestChartAsADependency(t *testing.T) {
	global := map[string]any{"imageRegistry": "registry.example.com", "labels": map[string]any{"team": "platform"}}
	for _, tt := range []struct {
		name    string
		values  map[string]any
		enabled bool
	}{
		{"enabled by its condition, with global values", map[string]any{"global": global,
			"node-healthcheck": map[string]any{"enabled": true, "replicaCount": 3, "certManager": map[string]any{"enabled": false}}}, true},
		{"disabled by its condition", map[string]any{"global": global, "node-healthcheck": map[string]any{"enabled": false}}, false},
		{"without its condition set (enabled, as Helm does)", map[string]any{"global": global}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loader.Load(umbrella(t, tt.values))
			if err != nil {
				t.Fatal(err)
			}
			r, err := renderChart(t, c, nil)
			if err != nil {
				t.Fatalf("the umbrella chart does not render: %v", err)
			}
			d := r.get("Deployment", "nhc-node-healthcheck")
			if !tt.enabled {
				if len(r) != 0 {
					t.Errorf("the condition is false, yet the umbrella renders %v", r.kinds())
				}
				return
			}
			if d == nil {
				t.Fatalf("the umbrella renders no operator Deployment: %v", r.kinds())
			}
			if want := mustRender(t, nil).kinds(); !reflect.DeepEqual(r.kinds(), want) {
				t.Errorf("as a dependency the chart renders %v, alone %v", r.kinds(), want)
			}
		})
	}
	t.Run("values of the dependency reach it", func(t *testing.T) {
		c, err := loader.Load(umbrella(t, map[string]any{"global": global, "node-healthcheck": map[string]any{"enabled": true, "replicaCount": 3}}))
		if err != nil {
			t.Fatal(err)
		}
		r, err := renderChart(t, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedFieldNoCopy(r.get("Deployment", "nhc-node-healthcheck").Object, "spec", "replicas"); got != float64(3) {
			t.Errorf("node-healthcheck.replicaCount 3 gave %v replicas", got)
		}
	})
	t.Run("a misspelt value of the dependency is still refused", func(t *testing.T) {
		c, err := loader.Load(umbrella(t, map[string]any{"global": global, "node-healthcheck": map[string]any{"enabled": true, "replicas": 3}}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := renderChart(t, c, nil); err == nil || !strings.Contains(err.Error(), "additional properties 'replicas' not allowed") {
			t.Errorf("got %v, want the schema to refuse node-healthcheck.replicas", err)
		}
	})
	// Argo CD renders an umbrella with `helm template`; run the CLI go.mod pins as it would.
	t.Run("helm template", func(t *testing.T) {
		dir := umbrella(t, map[string]any{"global": global, "node-healthcheck": map[string]any{"enabled": true}})
		cmd := exec.Command("go", "tool", "helm", "template", "nhc", dir, "--namespace", namespace, "--kube-version", kubeVersion)
		cmd.Dir = testutil.RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm template of the umbrella: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "name: nhc-node-healthcheck\n") {
			t.Errorf("helm template of the umbrella renders no operator:\n%s", out)
		}
	})
}

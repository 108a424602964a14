package chart

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// TestChartPackage packages the chart as `make chart` does (the helm CLI go.mod pins) and checks the
// archive: name, version, appVersion and kubeVersion as Chart.yaml says, every file of the chart
// folder in it (templates, the test hook, the schema, the CRD and RBAC copies), and it renders as the
// folder does.
func TestChartPackage(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("go", "tool", "helm", "package", chartDir(), "--destination", out)
	cmd.Dir = testutil.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm package: %v\n%s", err, b)
	}
	folder := loadChart(t)
	archive := filepath.Join(out, "node-healthcheck-"+folder.Metadata.Version+".tgz")
	packaged, err := loader.Load(archive)
	if err != nil {
		t.Fatal(err)
	}
	m := packaged.Metadata
	if m.Name != "node-healthcheck" || m.Version != folder.Metadata.Version || m.AppVersion != folder.Metadata.AppVersion {
		t.Errorf("packaged %s %s (app %s), want node-healthcheck %s (app %s)", m.Name, m.Version, m.AppVersion, folder.Metadata.Version, folder.Metadata.AppVersion)
	}
	if m.KubeVersion == "" {
		t.Error("Chart.yaml has no kubeVersion")
	}
	var want []string
	err = filepath.WalkDir(chartDir(), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(chartDir(), path)
		want = append(want, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range packaged.Raw {
		got = append(got, f.Name)
	}
	for _, name := range want {
		if !slices.Contains(got, name) {
			t.Errorf("the archive lacks %s", name)
		}
	}
	for _, name := range []string{"templates/tests/self-test.yaml", "values.schema.json", "templates/NOTES.txt"} {
		if !slices.Contains(got, name) {
			t.Errorf("the archive lacks %s", name)
		}
	}
	fromArchive, err := renderChart(t, packaged, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fromFolder := mustRender(t, nil); !slices.Equal(fromFolder.kinds(), fromArchive.kinds()) {
		t.Errorf("the archive renders %v, the folder %v", fromArchive.kinds(), fromFolder.kinds())
	}
}

// TestChartPush pushes the packaged chart as `make chart-push` does (`helm push` to an OCI
// registry; here an in-memory one over plain HTTP) and reads it back: a Helm chart artifact tagged
// with the chart's version.
func TestChartPush(t *testing.T) {
	out := t.TempDir()
	helm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", append([]string{"tool", "helm"}, args...)...)
		cmd.Dir = testutil.RepoRoot()
		cmd.Env = append(os.Environ(), "HELM_REGISTRY_CONFIG="+filepath.Join(out, "registry.json"), "HELM_CACHE_HOME="+filepath.Join(out, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(out, "config"))
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	helm("package", chartDir(), "--destination", out)
	version := loadChart(t).Metadata.Version
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	helm("push", filepath.Join(out, "node-healthcheck-"+version+".tgz"), "oci://"+host+"/charts", "--plain-http")

	ref, err := name.ParseReference(host+"/charts/node-healthcheck:"+version, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	m, err := remote.Get(ref)
	if err != nil {
		t.Fatalf("the pushed chart is not in the registry: %v", err)
	}
	manifest, err := v1.ParseManifest(bytes.NewReader(m.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(manifest.Config.MediaType); got != "application/vnd.cncf.helm.config.v1+json" {
		t.Errorf("config media type %s, want Helm's chart config", got)
	}
	if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" {
		t.Errorf("layers %+v, want one Helm chart archive", manifest.Layers)
	}
	if err := os.Mkdir(filepath.Join(out, "pulled"), 0o755); err != nil {
		t.Fatal(err)
	}
	pulled := helm("pull", "oci://"+host+"/charts/node-healthcheck", "--version", version, "--plain-http", "--destination", filepath.Join(out, "pulled"))
	if _, err := loader.Load(filepath.Join(out, "pulled", "node-healthcheck-"+version+".tgz")); err != nil {
		t.Errorf("the pulled chart does not load: %v (%s)", err, pulled)
	}
}

// TestNotesSayHowToCheck: the install notes tell the user how to check that the operator works.
func TestNotesSayHowToCheck(t *testing.T) {
	notes, err := os.ReadFile(filepath.Join(chartDir(), "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(notes), "helm test {{ .Release.Name }}") {
		t.Error("NOTES.txt does not tell the user to run helm test")
	}
	// Helm deletes a passed test's pod (hook-succeeded) before `helm test --logs` reads its logs, and
	// then fails with "unable to get pod logs" (helm/helm#9098): the command the notes give must pass
	// when the test passes (test/realnode runs it).
	hook, err := os.ReadFile(filepath.Join(chartDir(), "templates", "tests", "self-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(notes), "\n") {
		if strings.Contains(line, "helm test ") && strings.Contains(line, "--logs") && strings.Contains(string(hook), "hook-succeeded") {
			t.Errorf("NOTES.txt says %q, which fails after a passed test: its pod is deleted (hook-succeeded) before helm reads its logs", strings.TrimSpace(line))
		}
	}
}

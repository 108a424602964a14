package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// TestNotesSayHowToCheck: the install notes tell the user how to check that the operator works.
func TestNotesSayHowToCheck(t *testing.T) {
	notes, err := os.ReadFile(filepath.Join(chartDir(), "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(notes), "helm test {{ .Release.Name }}") {
		t.Error("NOTES.txt does not tell the user to run helm test")
	}
}

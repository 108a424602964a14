package release_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	"github.com/medik8s/node-healthcheck/internal/plumbing/imagebuild"
	"github.com/medik8s/node-healthcheck/internal/plumbing/release"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// created is the release's time in these tests (SOURCE_DATE_EPOCH).
var created = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// chartVersion is the chart's appVersion, which the fake image is tagged with.
func chartVersion(t *testing.T) string {
	t.Helper()
	ch, err := loader.LoadDir(testutil.Path("charts", "node-healthcheck"))
	if err != nil {
		t.Fatal(err)
	}
	return ch.Metadata.AppVersion
}

// inputs writes, under dir, everything a release is built from: an image archive as `make image`
// writes it (two platforms of a small stand-in binary, each with a CycloneDX SBOM), the plugin
// per platform (small stand-ins too), the license; and returns the Options, with the real chart.
func inputs(t *testing.T, dir, version string) release.Options {
	t.Helper()
	var bins []imagebuild.Binary
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, "manager-"+arch)
		if err := os.WriteFile(p, []byte("#!/bin/false\nmanager for "+arch+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		bins = append(bins, imagebuild.Binary{Platform: v1.Platform{OS: "linux", Architecture: arch}, Path: p})
	}
	idx, err := imagebuild.Build(imagebuild.Options{Binaries: bins, Version: version, Revision: "0123abc", Created: created})
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var sboms []imagebuild.Artifact
	for _, d := range m.Manifests {
		a, err := imagebuild.SBOMArtifact(d, []byte(`{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"component":{"name":"manager-`+d.Platform.Architecture+`"}}}`), created)
		if err != nil {
			t.Fatal(err)
		}
		sboms = append(sboms, a)
	}
	layout, archive := filepath.Join(dir, "image"), filepath.Join(dir, "image.oci.tar")
	if err := imagebuild.WriteLayout(layout, idx, version, sboms...); err != nil {
		t.Fatal(err)
	}
	if err := imagebuild.WriteTarball(layout, archive, created); err != nil {
		t.Fatal(err)
	}
	o := release.Options{Version: version, Created: created, ImageArchive: archive, ChartDir: testutil.Path("charts", "node-healthcheck"),
		Install: release.InstallOptions{Release: "nhc", Namespace: "node-healthcheck", KubeVersion: "v1.37.0"},
		License: testutil.Path("LICENSE"), KrewURIBase: "https://example.com/releases/v" + version}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		for _, goarch := range []string{"amd64", "arm64"} {
			p := filepath.Join(dir, "kubectl-nhc-"+goos+"-"+goarch)
			if err := os.WriteFile(p, []byte("kubectl-nhc for "+goos+"/"+goarch+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			o.Plugins = append(o.Plugins, release.Plugin{OS: goos, Arch: goarch, Path: p})
		}
	}
	return o
}

// built builds a release of inputs written under a new folder, and returns that folder, the
// Options and the release's folder.
func built(t *testing.T) (string, release.Options, string) {
	t.Helper()
	dir := t.TempDir()
	o := inputs(t, dir, chartVersion(t))
	out := filepath.Join(dir, "release")
	if _, err := release.Build(context.Background(), out, o); err != nil {
		t.Fatal(err)
	}
	return dir, o, out
}

// readDir returns every file of dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

// TestBuildIsReproducible builds the release twice from inputs written separately (other folders,
// other file times, the second a second later) and checks that every file is the same, byte for
// byte; and that a release of another time differs only where times are recorded.
func TestBuildIsReproducible(t *testing.T) {
	version := chartVersion(t)
	ctx := context.Background()
	var builds []map[string][]byte
	for i := range 2 {
		dir := t.TempDir()
		o := inputs(t, dir, version)
		if i == 1 {
			later := time.Now().Add(time.Hour)
			for _, p := range append([]string{o.ImageArchive}, o.Plugins[0].Path) {
				if err := os.Chtimes(p, later, later); err != nil {
					t.Fatal(err)
				}
			}
		}
		out := filepath.Join(dir, "release", version)
		names, err := release.Build(ctx, out, o)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{release.ChecksumsFile, release.ImageArchiveName(version), release.InstallFile, release.KrewManifestFile,
			"node-healthcheck-" + version + ".linux-amd64.cdx.json", "node-healthcheck-" + version + ".linux-arm64.cdx.json",
			"node-healthcheck-" + version + ".tgz"}
		for _, p := range o.Plugins {
			want = append(want, release.PluginArchiveName(version, p.OS, p.Arch))
		}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Fatalf("the release holds %v, want %v", names, want)
		}
		builds = append(builds, readDir(t, out))
	}
	for name, data := range builds[0] {
		if !bytes.Equal(data, builds[1][name]) {
			t.Errorf("%s differs between two builds of the same inputs", name)
		}
	}

	// Another time: the archives record it, so they differ; install.yaml and the SBOMs do not.
	dir := t.TempDir()
	o := inputs(t, dir, version)
	o.Created = created.Add(time.Hour)
	out := filepath.Join(dir, "release")
	if _, err := release.Build(ctx, out, o); err != nil {
		t.Fatal(err)
	}
	other := readDir(t, out)
	for _, name := range []string{"node-healthcheck-" + version + ".tgz", release.PluginArchiveName(version, "linux", "amd64"), release.PluginArchiveName(version, "windows", "arm64")} {
		if bytes.Equal(other[name], builds[0][name]) {
			t.Errorf("%s is the same at another SOURCE_DATE_EPOCH: the time is not in it", name)
		}
	}
	if !bytes.Equal(other[release.InstallFile], builds[0][release.InstallFile]) {
		t.Errorf("install.yaml depends on the time")
	}
}

// TestArchivesCarryOnlyFixedMetadata reads the chart and the plugin's archives back: every entry
// has the release's time and root as owner, the gzip headers no time, and the packaged chart is
// the chart Helm loads from its folder.
func TestArchivesCarryOnlyFixedMetadata(t *testing.T) {
	_, o, out := built(t)
	for _, name := range []string{"node-healthcheck-" + o.Version + ".tgz", release.PluginArchiveName(o.Version, "darwin", "arm64")} {
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(unpack(t, name, data)) == 0 {
			t.Errorf("%s is empty", name)
		}
	}
	pkg, err := os.ReadFile(filepath.Join(out, "node-healthcheck-"+o.Version+".tgz"))
	if err != nil {
		t.Fatal(err)
	}
	packaged, err := loader.LoadArchive(bytes.NewReader(pkg))
	if err != nil {
		t.Fatal(err)
	}
	source, err := loader.LoadDir(o.ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(packaged.Templates) != len(source.Templates) || len(packaged.Files) != len(source.Files) || packaged.Metadata.Version != source.Metadata.Version {
		t.Errorf("the packaged chart has %d templates and %d files (version %s), its folder %d and %d (%s)",
			len(packaged.Templates), len(packaged.Files), packaged.Metadata.Version, len(source.Templates), len(source.Files), source.Metadata.Version)
	}
	for i, tpl := range source.Templates {
		if packaged.Templates[i].Name != tpl.Name || !bytes.Equal(packaged.Templates[i].Data, tpl.Data) {
			t.Errorf("template %s differs in the package", tpl.Name)
		}
	}
}

// TestPluginArchivesAndKrewManifest checks the krew manifest against the archives: one platform per
// archive with its selector, URI and SHA-256, the binary and LICENSE in each archive; and that
// sha256sum -c accepts checksums.txt.
func TestPluginArchivesAndKrewManifest(t *testing.T) {
	dir, o, out := built(t)
	version := o.Version
	data, err := os.ReadFile(filepath.Join(out, release.KrewManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var plugin release.KrewPlugin
	if err := yaml.UnmarshalStrict(data, &plugin); err != nil {
		t.Fatal(err)
	}
	if plugin.APIVersion != release.KrewAPIVersion || plugin.Kind != "Plugin" || plugin.Metadata.Name != "nhc" || plugin.Spec.Version != "v"+version {
		t.Errorf("the krew manifest is %s %s %q version %q", plugin.APIVersion, plugin.Kind, plugin.Metadata.Name, plugin.Spec.Version)
	}
	if len(plugin.Spec.Platforms) != len(o.Plugins) {
		t.Fatalf("the krew manifest has %d platforms, want %d", len(plugin.Spec.Platforms), len(o.Plugins))
	}
	license, err := os.ReadFile(o.License)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plugin.Spec.Platforms {
		goos, goarch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		name := release.PluginArchiveName(version, goos, goarch)
		if p.URI != o.KrewURIBase+"/"+name {
			t.Errorf("%s/%s: uri %s", goos, goarch, p.URI)
		}
		archive, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(archive)
		if p.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: sha256 %s, the archive's is %x", name, p.SHA256, sum)
		}
		binary, err := os.ReadFile(filepath.Join(dir, "kubectl-nhc-"+goos+"-"+goarch))
		if err != nil {
			t.Fatal(err)
		}
		files := unpack(t, name, archive)
		wantBin := "kubectl-nhc"
		if goos == "windows" {
			wantBin += ".exe"
		}
		if p.Bin != wantBin || !bytes.Equal(files[wantBin], binary) || !bytes.Equal(files["LICENSE"], license) || len(files) != 2 {
			t.Errorf("%s: bin %q; the archive holds %d files, the binary: %v, LICENSE: %v", name, p.Bin, len(files),
				bytes.Equal(files[wantBin], binary), bytes.Equal(files["LICENSE"], license))
		}
		if !slices.Contains(p.Files, release.KrewFile{From: "LICENSE", To: "."}) || !slices.Contains(p.Files, release.KrewFile{From: wantBin, To: "."}) {
			t.Errorf("%s: files %v", name, p.Files)
		}
	}
	cmd := exec.Command("sha256sum", "--check", "--strict", release.ChecksumsFile)
	cmd.Dir = out
	if got, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check: %v\n%s", err, got)
	} else if n := strings.Count(string(got), ": OK"); n != len(readDir(t, out))-1 {
		t.Errorf("sha256sum checked %d files:\n%s", n, got)
	}
}

// unpack returns the files of an archive (a zip for Windows' plugin, else gzip-compressed tar),
// checking that each carries the release's time, root as owner and a program's mode for the
// plugin, and that a gzip header has no time.
func unpack(t *testing.T, name string, data []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	if strings.HasSuffix(name, ".zip") {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			files[f.Name], err = io.ReadAll(rc)
			_ = rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !f.Modified.Equal(created) {
				t.Errorf("%s: %s has time %v", name, f.Name, f.Modified)
			}
		}
		return files
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() {
		t.Errorf("%s: the gzip header has the time %v", name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(created) || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: %s has time %v, owner %d:%d (%q:%q)", name, hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		if hdr.Name == "kubectl-nhc" && hdr.Mode != 0o755 {
			t.Errorf("%s: the binary's mode is %o", name, hdr.Mode)
		}
		if files[hdr.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
)

// options returns Options for two small stand-in binaries whose contents name their platform.
func options(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	o := Options{
		Title: "node-healthcheck", Description: "test", Source: "https://github.com/medik8s/node-healthcheck",
		Licenses: "Apache-2.0", Version: "1.2.3", Revision: strings.Repeat("ab", 20),
		Created: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
	}
	for _, p := range []v1.Platform{amd64, arm64} {
		path := filepath.Join(dir, p.Architecture)
		if err := os.WriteFile(path, []byte("manager for "+p.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		o.Binaries = append(o.Binaries, Binary{Platform: p, Path: path})
	}
	return o
}

func build(t *testing.T, o Options) v1.ImageIndex {
	t.Helper()
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestIndexListsEachPlatformInOrder(t *testing.T) {
	idx := build(t, options(t))
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", m.MediaType, types.OCIImageIndex)
	}
	if len(m.Manifests) != 2 || m.Manifests[0].Platform.String() != "linux/amd64" || m.Manifests[1].Platform.String() != "linux/arm64" {
		t.Fatalf("index manifests %+v, want linux/amd64 then linux/arm64", m.Manifests)
	}
	if m.Annotations[LabelVersion] != "1.2.3" || m.Annotations[LabelCreated] != "2025-03-04T05:06:07Z" {
		t.Errorf("index annotations %v", m.Annotations)
	}
	for _, d := range m.Manifests {
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: manifest media type %s", d.Platform, d.MediaType)
		}
	}
}

func TestEachImageIsTheBinaryOnNothingAsANonRootUser(t *testing.T) {
	o := options(t)
	idx := build(t, o)
	for _, b := range o.Binaries {
		img, err := PlatformImage(idx, b.Platform)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != b.Platform.OS || cfg.Architecture != b.Platform.Architecture {
			t.Errorf("%s: config says %s/%s", b.Platform, cfg.OS, cfg.Architecture)
		}
		if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/manager" || len(cfg.Config.Cmd) != 0 {
			t.Errorf("%s: user %q entrypoint %q cmd %q", b.Platform, cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Cmd)
		}
		if !cfg.Created.Time.Equal(o.Created) || len(cfg.History) != 1 || !cfg.History[0].Created.Time.Equal(o.Created) {
			t.Errorf("%s: created %s, history %+v, want %s everywhere", b.Platform, cfg.Created, cfg.History, o.Created)
		}
		for k, v := range o.Labels() {
			if cfg.Config.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", b.Platform, k, cfg.Config.Labels[k], v)
			}
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
			t.Errorf("%s: config %s, layers %+v: want an OCI config and one OCI layer", b.Platform, m.Config.MediaType, m.Layers)
		}

		// The flattened file system holds /manager, root's, executable, and nothing else.
		files := map[string]*tar.Header{}
		contents := map[string][]byte{}
		tr := tar.NewReader(extractedAndLayer(t, img))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = hdr
			contents[hdr.Name], _ = io.ReadAll(tr)
		}
		hdr := files["manager"]
		if len(files) != 1 || hdr == nil {
			t.Fatalf("%s: files %v, want only manager", b.Platform, files)
		}
		if hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(o.Created) {
			t.Errorf("%s: manager mode %o uid %d gid %d mtime %s", b.Platform, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime)
		}
		if want := "manager for " + b.Platform.String(); string(contents["manager"]) != want {
			t.Errorf("%s: manager holds %q, want %q", b.Platform, contents["manager"], want)
		}
	}
	if _, err := PlatformImage(idx, v1.Platform{OS: "linux", Architecture: "s390x"}); err == nil {
		t.Error("an s390x image was found in an amd64/arm64 index")
	}
}

// extractedAndLayer checks that ExtractFile writes /manager executable and returns the image's one
// layer, uncompressed.
func extractedAndLayer(t *testing.T, img v1.Image) io.Reader {
	t.Helper()
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := ExtractFile(img, "/manager", filepath.Join(dir, "manager")); err != nil {
		t.Fatal(err)
	}
	// ExtractFile keeps the mode.
	if info, err := os.Stat(filepath.Join(dir, "manager")); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("extracted manager: %v, %v", info, err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(&buf, rc); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// The same binaries and options give the same image, byte for byte, in the layout and the tarball;
// another creation time gives another one.
func TestBuildsAreReproducible(t *testing.T) {
	o := options(t)
	dir := t.TempDir()
	var tarballs [2][]byte
	for i := range tarballs {
		layoutDir, tarFile := filepath.Join(dir, "image"), filepath.Join(dir, "image.tar")
		if err := WriteLayout(layoutDir, build(t, o), o.Version); err != nil {
			t.Fatal(err)
		}
		if err := WriteTarball(layoutDir, tarFile, o.Created); err != nil {
			t.Fatal(err)
		}
		var err error
		if tarballs[i], err = os.ReadFile(tarFile); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(tarballs[0], tarballs[1]) {
		t.Error("two builds of the same inputs differ")
	}
	later := o
	later.Created = o.Created.Add(time.Second)
	if digest(t, build(t, o)) == digest(t, build(t, later)) {
		t.Error("another creation time gave the same digest")
	}
}

// The layout and the tarball both hold the index under its tag; the tarball unpacks into the layout.
func TestLayoutAndTarballRoundTrip(t *testing.T) {
	o := options(t)
	idx := build(t, o)
	dir := t.TempDir()
	layoutDir, tarFile := filepath.Join(dir, "image"), filepath.Join(dir, "image.tar")
	if err := WriteLayout(layoutDir, idx, "1.2.3"); err != nil {
		t.Fatal(err)
	}
	// A second write replaces the first (a rebuild).
	if err := WriteLayout(layoutDir, idx, "1.2.3"); err != nil {
		t.Fatal(err)
	}
	if err := WriteTarball(layoutDir, tarFile, o.Created); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(tarFile); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("the tarball: %v, %v: want it readable by all", info, err)
	}
	unpacked := filepath.Join(dir, "unpacked")
	untar(t, tarFile, unpacked)
	for _, d := range []string{layoutDir, unpacked} {
		got, ref, err := ReadLayout(d)
		if err != nil {
			t.Fatal(err)
		}
		if digest(t, got) != digest(t, idx) || ref != "1.2.3" {
			t.Errorf("%s: index %s named %q, want %s named 1.2.3", d, digest(t, got), ref, digest(t, idx))
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("the build left %d entries beside the layout and the tarball: %v", len(entries)-2, entries)
	}
}

func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Push uploads the index and every platform's image to a registry (an in-memory one here), under
// the tag, with the digest it reports.
func TestPush(t *testing.T) {
	o := options(t)
	idx := build(t, o)
	layoutDir := filepath.Join(t.TempDir(), "image")
	if err := WriteLayout(layoutDir, idx, o.Version); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(u.Host + "/medik8s/node-healthcheck:1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := Push(context.Background(), layoutDir, ref)
	if err != nil {
		t.Fatal(err)
	}
	if pushed != digest(t, idx) {
		t.Errorf("Push reported %s, the index is %s", pushed, digest(t, idx))
	}
	got, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, got) != pushed {
		t.Errorf("the registry serves %s under the tag, want %s", digest(t, got), pushed)
	}
	for _, b := range o.Binaries {
		img, err := PlatformImage(got, b.Platform)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := PlatformImage(idx, b.Platform)
		if digest(t, img) != digest(t, want) {
			t.Errorf("%s: pulled %s, built %s", b.Platform, digest(t, img), digest(t, want))
		}
		if _, err := img.Layers(); err != nil {
			t.Error(err)
		}
	}
}

func TestBuildRefusesIncompleteOptions(t *testing.T) {
	for name, change := range map[string]func(*Options){
		"no binaries":      func(o *Options) { o.Binaries = nil },
		"a platform twice": func(o *Options) { o.Binaries[1].Platform = o.Binaries[0].Platform },
		"no architecture":  func(o *Options) { o.Binaries[0].Platform.Architecture = "" },
		"no version":       func(o *Options) { o.Version = "" },
		"a missing binary": func(o *Options) { o.Binaries[0].Path = filepath.Join(t.TempDir(), "nothing") },
	} {
		t.Run(name, func(t *testing.T) {
			o := options(t)
			change(&o)
			if _, err := Build(o); err == nil {
				t.Error("Build accepted it")
			}
		})
	}
}

// An SBOM is stored beside the image as an OCI 1.1 artifact referring to its platform's manifest:
// in the layout (and its tarball) unnamed in index.json, and pushed so that the registry lists it
// among that manifest's referrers.
func TestSBOMArtifactRefersToItsImage(t *testing.T) {
	o := options(t)
	idx := build(t, o)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	subject := m.Manifests[0]
	sbom := []byte(`{"bomFormat":"CycloneDX","specVersion":"1.6","version":1}`)
	a, err := SBOMArtifact(subject, sbom, o.Created)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SBOMArtifact(subject, []byte(`{"spdxVersion":"SPDX-2.3"}`), o.Created); err == nil {
		t.Error("an SPDX document was taken for a CycloneDX SBOM")
	}
	dir := t.TempDir()
	layoutDir, tarFile := filepath.Join(dir, "image"), filepath.Join(dir, "image.tar")
	if err := WriteLayout(layoutDir, idx, o.Version, a); err != nil {
		t.Fatal(err)
	}
	if err := WriteTarball(layoutDir, tarFile, o.Created); err != nil {
		t.Fatal(err)
	}
	unpacked := filepath.Join(dir, "unpacked")
	untar(t, tarFile, unpacked)
	for _, d := range []string{layoutDir, unpacked} {
		got, ref, err := ReadLayout(d)
		if err != nil {
			t.Fatal(err)
		}
		if digest(t, got) != digest(t, idx) || ref != o.Version {
			t.Errorf("%s: index %s named %q, want %s named %s", d, digest(t, got), ref, digest(t, idx), o.Version)
		}
		artifacts, err := ReadArtifacts(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(artifacts) != 1 || !bytes.Equal(artifacts[0].Manifest, a.Manifest) || artifacts[0].Descriptor.ArtifactType != MediaTypeCycloneDX {
			t.Fatalf("%s: artifacts %+v, want the SBOM's", d, artifacts)
		}
		var am v1.Manifest
		if err := json.Unmarshal(artifacts[0].Manifest, &am); err != nil {
			t.Fatal(err)
		}
		if am.ArtifactType != MediaTypeCycloneDX || am.Subject == nil || am.Subject.Digest != subject.Digest ||
			am.Config.MediaType != MediaTypeEmpty || len(am.Layers) != 1 || !bytes.Equal(artifacts[0].Blobs[am.Layers[0].Digest], sbom) {
			t.Errorf("%s: the artifact's manifest %s", d, artifacts[0].Manifest)
		}
	}

	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true)))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(u.Host + "/medik8s/node-healthcheck:" + o.Version)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Push(context.Background(), layoutDir, ref); err != nil {
		t.Fatal(err)
	}
	referrers, err := remote.Referrers(ref.Context().Digest(subject.Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	rm, err := referrers.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// (go-containerregistry's in-memory registry reports the config's media type as the referrer's
	// artifactType, not the manifest's artifactType as the distribution spec says: the manifest,
	// fetched below, carries it.)
	if len(rm.Manifests) != 1 || rm.Manifests[0].Digest != a.Descriptor.Digest {
		t.Fatalf("the registry lists referrers %+v of %s, want the SBOM %s", rm.Manifests, subject.Digest, a.Descriptor.Digest)
	}
	got, err := remote.Get(ref.Context().Digest(a.Descriptor.Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Manifest, a.Manifest) {
		t.Errorf("the registry serves %s, pushed %s", got.Manifest, a.Manifest)
	}
}

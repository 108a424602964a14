package release

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"

	"github.com/medik8s/node-healthcheck/internal/plumbing/imagebuild"
)

// File names in a release folder, beside the chart's <name>-<version>.tgz.
const (
	// InstallFile is the chart rendered for `kubectl apply -f`.
	InstallFile = "install.yaml"
	// KrewManifestFile is the kubectl plugin's krew manifest (named as krew-index names it: the plugin's name).
	KrewManifestFile = "nhc.yaml"
	// ChecksumsFile lists the SHA-256 of every other file, for `sha256sum -c`.
	ChecksumsFile = "checksums.txt"
	// PluginName is the kubectl plugin's binary (kubectl-nhc.exe on Windows).
	PluginName = "kubectl-nhc"
)

// ImageArchiveName is the image's OCI archive in a release folder.
func ImageArchiveName(version string) string { return "node-healthcheck-" + version + ".oci.tar" }

// SBOMName is the CycloneDX SBOM of the image's manager for one platform in a release folder.
func SBOMName(version string, p v1.Platform) string {
	return "node-healthcheck-" + version + "." + p.OS + "-" + p.Architecture + ".cdx.json"
}

// PluginArchiveName is the plugin's archive for one platform: a zip on Windows (as krew expects
// there), a gzip-compressed tar elsewhere.
func PluginArchiveName(version, goos, goarch string) string {
	ext := ".tar.gz"
	if goos == "windows" {
		ext = ".zip"
	}
	return PluginName + "_" + version + "_" + goos + "_" + goarch + ext
}

// Plugin is the kubectl plugin built for one platform.
type Plugin struct {
	// OS and Arch are GOOS and GOARCH.
	OS, Arch string
	// Path is the binary.
	Path string
}

// Options say what a release is built from.
type Options struct {
	// Version is the release's version: the chart's appVersion, the image's tag.
	Version string
	// Created is every file time in the archives (SOURCE_DATE_EPOCH, the commit's time).
	Created time.Time
	// ImageArchive is `make image`'s OCI archive (with the SBOMs as artifacts).
	ImageArchive string
	// ChartDir is the chart's folder.
	ChartDir string
	// Install says how install.yaml renders the chart.
	Install InstallOptions
	// Plugins are the plugin's binaries, one per platform.
	Plugins []Plugin
	// License is the license file every plugin archive carries (krew requires one).
	License string
	// KrewURIBase is where the plugin's archives are downloaded from: the krew manifest's URIs are
	// KrewURIBase/<archive>.
	KrewURIBase string
}

// Build writes the release into the folder out (replaced; written beside it first, so a failed
// build leaves no half release) and returns the names of the files written. The same Options and
// inputs give the same bytes.
func Build(ctx context.Context, out string, o Options) ([]string, error) {
	if o.Version == "" || strings.ContainsAny(o.Version, "/ ") {
		return nil, fmt.Errorf("invalid version %q", o.Version)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+"-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	if err := writeImage(tmp, o); err != nil {
		return nil, err
	}
	if err := writeChart(ctx, tmp, o); err != nil {
		return nil, err
	}
	if err := writePlugins(ctx, tmp, o); err != nil {
		return nil, err
	}
	sums, err := Checksums(tmp)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, ChecksumsFile), sums, 0o644); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// writeImage copies the image's OCI archive and writes each platform's SBOM beside it, as the
// archive holds them (so the SBOMs are those of the image released). The archive must hold one
// image index tagged with the version.
func writeImage(dir string, o Options) error {
	layout, err := os.MkdirTemp("", "release-image-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(layout)
	if err := untar(o.ImageArchive, layout); err != nil {
		return fmt.Errorf("reading the image archive %s: %w", o.ImageArchive, err)
	}
	idx, tag, err := imagebuild.ReadLayout(layout)
	if err != nil {
		return err
	}
	if tag != o.Version {
		return fmt.Errorf("the image archive %s is of version %q, not %q: run make image", o.ImageArchive, tag, o.Version)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	artifacts, err := imagebuild.ReadArtifacts(layout)
	if err != nil {
		return err
	}
	for _, a := range artifacts {
		if a.Descriptor.ArtifactType != imagebuild.MediaTypeCycloneDX {
			continue
		}
		var am v1.Manifest
		if err := json.Unmarshal(a.Manifest, &am); err != nil {
			return err
		}
		if am.Subject == nil || len(am.Layers) != 1 {
			return fmt.Errorf("the SBOM artifact %s has no subject or not one layer", a.Descriptor.Digest)
		}
		var platform *v1.Platform
		for _, d := range m.Manifests {
			if d.Digest == am.Subject.Digest {
				platform = d.Platform
			}
		}
		if platform == nil {
			return fmt.Errorf("the SBOM artifact %s refers to %s, no platform's image", a.Descriptor.Digest, am.Subject.Digest)
		}
		if err := os.WriteFile(filepath.Join(dir, SBOMName(o.Version, *platform)), a.Blobs[am.Layers[0].Digest], 0o644); err != nil {
			return err
		}
	}
	return copyFile(o.ImageArchive, filepath.Join(dir, ImageArchiveName(o.Version)))
}

// writeChart writes the packaged chart and install.yaml, rendered from that package.
func writeChart(ctx context.Context, dir string, o Options) error {
	name, pkg, err := PackageChart(o.ChartDir, o.Created)
	if err != nil {
		return err
	}
	meta, err := chartMetadata(pkg)
	if err != nil {
		return err
	}
	if meta.AppVersion != o.Version {
		return fmt.Errorf("the chart's appVersion is %q, the release's version %q", meta.AppVersion, o.Version)
	}
	if err := os.WriteFile(filepath.Join(dir, name), pkg, 0o644); err != nil {
		return err
	}
	install, err := RenderInstall(ctx, pkg, o.Install)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, InstallFile), install, 0o644)
}

// writePlugins writes the plugin's archives, two at a time (compressing is most of a release's
// time), and the krew manifest.
func writePlugins(ctx context.Context, dir string, o Options) error {
	license, err := os.ReadFile(o.License)
	if err != nil {
		return fmt.Errorf("reading the license: %w", err)
	}
	archives := make([]PluginArchive, len(o.Plugins))
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i, p := range o.Plugins {
		g.Go(func() error {
			a, err := writePlugin(dir, o.Version, p, license, o.Created)
			archives[i] = a
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	manifest, err := KrewManifest(o.Version, o.KrewURIBase, archives)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, KrewManifestFile), manifest, 0o644)
}

// writePlugin archives one platform's plugin with the license.
func writePlugin(dir, version string, p Plugin, license []byte, created time.Time) (PluginArchive, error) {
	bin, err := os.ReadFile(p.Path)
	if err != nil {
		return PluginArchive{}, err
	}
	a := PluginArchive{OS: p.OS, Arch: p.Arch, Name: PluginArchiveName(version, p.OS, p.Arch), Bin: PluginName}
	pack := TarGz
	if p.OS == "windows" {
		a.Bin, pack = PluginName+".exe", Zip
	}
	data, err := pack([]File{{Name: a.Bin, Mode: 0o755, Data: bin}, {Name: "LICENSE", Mode: 0o644, Data: license}}, created)
	if err != nil {
		return PluginArchive{}, fmt.Errorf("archiving %s: %w", p.Path, err)
	}
	sum := sha256.Sum256(data)
	a.SHA256 = hex.EncodeToString(sum[:])
	return a, os.WriteFile(filepath.Join(dir, a.Name), data, 0o644)
}

// untar extracts a tar archive of regular files and folders into dir.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("%q leaves the archive", hdr.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil { //nolint:gosec // our own image archive
				_ = out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a file or a folder", hdr.Name)
		}
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

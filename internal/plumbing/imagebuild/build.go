package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// User is the image's user and group, numeric so that the kubelet can check runAsNonRoot without
	// an /etc/passwd (65532 is distroless' "nonroot").
	User = "65532:65532"
	// Entrypoint is where the manager binary lies in the image, and the image's entrypoint.
	Entrypoint = "/manager"
)

// OCI annotation keys the image carries as labels (in each config) and as annotations (on the index
// and each manifest), from the OCI image spec's annotations.md.
const (
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	LabelSource      = "org.opencontainers.image.source"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelCreated     = "org.opencontainers.image.created"
	// LabelRefName names the image in an OCI layout's index.json (its tag).
	LabelRefName = "org.opencontainers.image.ref.name"
)

// Binary is the manager built for one platform.
type Binary struct {
	// Platform is the binary's OS and architecture (and variant, if any).
	Platform v1.Platform
	// Path is the binary's file.
	Path string
}

// Options describe the image.
type Options struct {
	// Binaries are the manager binaries, one per platform, in the order the index lists them.
	Binaries []Binary
	// Title, Description, Source (the repository's URL), Licenses (an SPDX expression), Version and
	// Revision (the git commit) become the OCI labels of the same names.
	Title, Description, Source, Licenses, Version, Revision string
	// Created is the creation time: the config's and history's timestamps, the layer's file times
	// and the created label. A fixed time (the commit's) makes the build reproducible.
	Created time.Time
}

// Labels returns the image's OCI labels.
func (o Options) Labels() map[string]string {
	labels := map[string]string{
		LabelTitle:       o.Title,
		LabelDescription: o.Description,
		LabelSource:      o.Source,
		LabelLicenses:    o.Licenses,
		LabelVersion:     o.Version,
		LabelRevision:    o.Revision,
		LabelCreated:     o.Created.UTC().Format(time.RFC3339),
	}
	for k, v := range labels {
		if v == "" {
			delete(labels, k)
		}
	}
	return labels
}

func (o Options) validate() error {
	if len(o.Binaries) == 0 {
		return errors.New("no binaries: the image needs at least one platform")
	}
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		p := b.Platform.String()
		if b.Platform.OS == "" || b.Platform.Architecture == "" {
			return fmt.Errorf("binary %s: platform %q lacks an OS or architecture", b.Path, p)
		}
		if seen[p] {
			return fmt.Errorf("platform %s given twice", p)
		}
		seen[p] = true
	}
	if o.Version == "" {
		return errors.New("no version")
	}
	return nil
}

// Build assembles the image index: one image per binary, each an empty base plus one layer holding
// the binary at Entrypoint.
func Build(o Options) (v1.ImageIndex, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	labels := o.Labels()
	adds := make([]mutate.IndexAddendum, 0, len(o.Binaries))
	for _, b := range o.Binaries {
		img, err := image(o, b, labels)
		if err != nil {
			return nil, fmt.Errorf("building the %s image: %w", b.Platform.String(), err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &b.Platform}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

func image(o Options, b Binary, labels map[string]string) (v1.Image, error) {
	binary, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	layerTar, err := singleFileTar(strings.TrimPrefix(Entrypoint, "/"), binary, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	created := v1.Time{Time: o.Created.UTC()}
	cfg := &v1.ConfigFile{
		Architecture: b.Platform.Architecture,
		OS:           b.Platform.OS,
		OSVersion:    b.Platform.OSVersion,
		Variant:      b.Platform.Variant,
		Created:      created,
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{Entrypoint},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), cfg)
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "imagebuild: manager binary at " + Entrypoint, Comment: "no base image"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// singleFileTar returns a tar archive holding one executable file owned by root (so the image's
// user cannot change it), with the fixed modification time.
func singleFileTar(name string, content []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(content)),
		ModTime: mtime.UTC().Truncate(time.Second), Format: tar.FormatUSTAR,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Command build packs the pause binary into the sandbox image of the real-node cluster: an OCI archive
// holding one image index (this machine's platform) whose index.json names it by its full reference,
// so that `ctr images import` stores it under that name and containerd's CRI finds it as its
// sandbox_image without a registry. The layout and archive are written by
// internal/plumbing/imagebuild, as `make image` writes the operator's.
//
//	go run ./test/realnode/pause/build --binary bin/node/.src/pause --out bin/node/pause.oci.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/medik8s/node-healthcheck/internal/plumbing/imagebuild"
)

// Reference is the sandbox image's name, the one containerd's sandbox_image names (test/realnode).
const Reference = "localhost/node-healthcheck/pause:1"

// user is the pause process's user: 65535, as in Kubernetes' pause image.
const user = "65535:65535"

func main() {
	bin := flag.String("binary", "", "The static pause binary.")
	out := flag.String("out", "", "The OCI archive to write.")
	flag.Parse()
	if err := build(*bin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "pause image:", err)
		os.Exit(1)
	}
}

func build(bin, out string) error {
	content, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	// A fixed time: the same binary gives the same image.
	created := time.Unix(0, 0).UTC()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "pause", Mode: 0o755, Size: int64(len(content)), ModTime: created}); err != nil {
		return err
	}
	if _, err := tw.Write(content); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	img, err := mutate.ConfigFile(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON),
		&v1.ConfigFile{
			OS: platform.OS, Architecture: platform.Architecture, Created: v1.Time{Time: created},
			Config: v1.Config{User: user, Entrypoint: []string{"/pause"}, WorkingDir: "/"},
			RootFS: v1.RootFS{Type: "layers"},
		})
	if err != nil {
		return err
	}
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer}); err != nil {
		return err
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	layout := filepath.Join(filepath.Dir(out), ".pause-layout")
	defer os.RemoveAll(layout)
	if err := imagebuild.WriteLayout(layout, idx, Reference); err != nil {
		return err
	}
	return imagebuild.WriteTarball(layout, out, created)
}

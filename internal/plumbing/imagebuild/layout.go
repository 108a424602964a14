package imagebuild

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// WriteLayout writes the image index as an OCI image layout in dir, replacing what was there: its
// index.json lists the one image index, named refName (the tag), and then the artifacts that refer
// to it or its images (unnamed: found through their subject, as a registry's referrers). The layout
// is written beside dir first and then moved, so a failed build never leaves half an image behind.
func WriteLayout(dir string, idx v1.ImageIndex, refName string, artifacts ...Artifact) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{LabelRefName: refName})); err != nil {
		return fmt.Errorf("writing the image to the OCI layout: %w", err)
	}
	for _, a := range artifacts {
		for h, data := range a.Blobs {
			if err := p.WriteBlob(h, io.NopCloser(bytes.NewReader(data))); err != nil {
				return fmt.Errorf("writing an artifact's blob to the OCI layout: %w", err)
			}
		}
		if err := p.WriteBlob(a.Descriptor.Digest, io.NopCloser(bytes.NewReader(a.Manifest))); err != nil {
			return fmt.Errorf("writing an artifact's manifest to the OCI layout: %w", err)
		}
		if err := p.AppendDescriptor(a.Descriptor); err != nil {
			return fmt.Errorf("listing an artifact in the OCI layout: %w", err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// WriteTarball writes the OCI layout in dir as a tar archive (an "OCI archive", as `docker buildx
// --output type=oci` writes and skopeo's oci-archive: reads): entries in lexical order, owned by
// root, with mtime as every file's time, so equal layouts give equal archives.
func WriteTarball(dir, file string, mtime time.Time) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	tw := tar.NewWriter(tmp)
	mtime = mtime.UTC().Truncate(time.Second)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		default:
			return fmt.Errorf("%s: not a file or a folder", p)
		}
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// ReadLayout returns the image index that the OCI layout in dir holds (WriteLayout's), and its
// name (the tag).
func ReadLayout(dir string) (v1.ImageIndex, string, error) {
	idx, name, _, err := readLayout(dir)
	return idx, name, err
}

// ReadArtifacts returns the artifacts that the OCI layout in dir holds beside its image index
// (WriteLayout's), as index.json lists them.
func ReadArtifacts(dir string) ([]Artifact, error) {
	_, _, artifacts, err := readLayout(dir)
	return artifacts, err
}

// readLayout reads index.json: exactly one image index, and artifacts (manifests with an
// artifactType) beside it, nothing else.
func readLayout(dir string) (v1.ImageIndex, string, []Artifact, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, "", nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, "", nil, err
	}
	var (
		indexes   []v1.Descriptor
		artifacts []Artifact
	)
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsIndex():
			indexes = append(indexes, d)
		case d.ArtifactType != "":
			a := Artifact{Descriptor: d, Blobs: map[v1.Hash][]byte{}}
			if a.Manifest, err = readBlob(p, d.Digest); err != nil {
				return nil, "", nil, err
			}
			var am v1.Manifest
			if err := json.Unmarshal(a.Manifest, &am); err != nil {
				return nil, "", nil, fmt.Errorf("the artifact %s: %w", d.Digest, err)
			}
			for _, b := range append([]v1.Descriptor{am.Config}, am.Layers...) {
				if a.Blobs[b.Digest], err = readBlob(p, b.Digest); err != nil {
					return nil, "", nil, err
				}
			}
			artifacts = append(artifacts, a)
		default:
			return nil, "", nil, fmt.Errorf("the OCI layout %s lists %s (%s), neither an image index nor an artifact", dir, d.Digest, d.MediaType)
		}
	}
	if len(indexes) != 1 {
		return nil, "", nil, fmt.Errorf("the OCI layout %s should list exactly one image index, it lists %d", dir, len(indexes))
	}
	idx, err := top.ImageIndex(indexes[0].Digest)
	if err != nil {
		return nil, "", nil, err
	}
	return idx, indexes[0].Annotations[LabelRefName], artifacts, nil
}

func readBlob(p layout.Path, h v1.Hash) ([]byte, error) {
	rc, err := p.Blob(h)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", h, err)
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// PlatformImage returns the index's image for exactly the OS and architecture of want.
func PlatformImage(idx v1.ImageIndex, want v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture && d.Platform.Variant == want.Variant {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the image has no %s variant", want.String())
}

// ExtractFile writes the file at name (an absolute path in the image) of the image's flattened file
// system to dest, with its mode.
func ExtractFile(img v1.Image, name, dest string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	want := strings.TrimPrefix(path.Clean("/"+name), "/")
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("the image has no file %s", name)
		}
		if err != nil {
			return fmt.Errorf("reading the image's files: %w", err)
		}
		if strings.TrimPrefix(path.Clean("/"+hdr.Name), "/") != want {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("%s in the image is not a regular file", name)
		}
		f, err := os.OpenFile(dest, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(hdr.Mode).Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil { //nolint:gosec // our own image
			_ = f.Close()
			return err
		}
		return f.Close()
	}
}

// Command imagebuild builds the operator's multi-architecture OCI image from prebuilt static manager
// binaries, without a container daemon and offline, and pushes it (see
// internal/plumbing/imagebuild; `make image` and `make image-push` run it).
//
//	imagebuild build --out bin/image --tarball bin/image.tar --version 0.1.0 --revision <commit> \
//	    --created <unix seconds> --binary linux/amd64=<path> --binary linux/arm64=<path> \
//	    [--sbom linux/amd64=<CycloneDX JSON> ...] [label flags]
//	imagebuild push --layout bin/image registry.example.com/repo:tag
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/medik8s/node-healthcheck/internal/plumbing/imagebuild"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: imagebuild build|push [flags]")
	}
	switch args[0] {
	case "build":
		return build(args[1:])
	case "push":
		return push(args[1:])
	default:
		return fmt.Errorf("unknown command %q: want build or push", args[0])
	}
}

// binaryFlags collects --binary <os>/<arch>[/<variant>]=<path>.
type binaryFlags []imagebuild.Binary

func (b *binaryFlags) String() string { return fmt.Sprint(*b) }

func (b *binaryFlags) Set(s string) error {
	platform, path, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return fmt.Errorf("%q: want <os>/<arch>=<path>", s)
	}
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		return err
	}
	*b = append(*b, imagebuild.Binary{Platform: *p, Path: path})
	return nil
}

// sbomFlags collects --sbom <os>/<arch>[/<variant>]=<path>.
type sbomFlags []imagebuild.Binary

func (b *sbomFlags) String() string { return fmt.Sprint(*b) }

func (b *sbomFlags) Set(s string) error { return (*binaryFlags)(b).Set(s) }

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var o imagebuild.Options
	var binaries binaryFlags
	fs.Var(&binaries, "binary", "<os>/<arch>=<path> of a static manager binary; repeat for each platform, in the index's order.")
	var sboms sbomFlags
	fs.Var(&sboms, "sbom", "<os>/<arch>=<path> of a CycloneDX SBOM (JSON) of that platform's manager: stored in the layout as an artifact that refers to the platform's image; repeat for each platform.")
	out := fs.String("out", "bin/image", "Folder to write the OCI image layout to (replaced).")
	tarFile := fs.String("tarball", "", "Also write the layout as this tar archive (an OCI archive).")
	created := fs.Int64("created", 0, "Creation time, seconds since 1970 (SOURCE_DATE_EPOCH): every timestamp in the image, so builds are reproducible.")
	fs.StringVar(&o.Version, "version", "", "Version: the version label and the layout's tag.")
	fs.StringVar(&o.Revision, "revision", "", "Git commit the image is built from: the revision label.")
	fs.StringVar(&o.Title, "title", "node-healthcheck", "Title label.")
	fs.StringVar(&o.Description, "description", "", "Description label.")
	fs.StringVar(&o.Source, "source", "", "Source label: the repository's URL.")
	fs.StringVar(&o.Licenses, "licenses", "", "Licenses label (SPDX expression).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	o.Binaries, o.Created = binaries, time.Unix(*created, 0).UTC()
	idx, err := imagebuild.Build(o)
	if err != nil {
		return err
	}
	artifacts, err := sbomArtifacts(idx, sboms, o.Created)
	if err != nil {
		return err
	}
	if err := imagebuild.WriteLayout(*out, idx, o.Version, artifacts...); err != nil {
		return err
	}
	if *tarFile != "" {
		if err := imagebuild.WriteTarball(*out, *tarFile, o.Created); err != nil {
			return err
		}
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s (%d platforms, %d SBOMs)\n", *out, digest, len(o.Binaries), len(artifacts))
	return nil
}

// sbomArtifacts makes each SBOM an artifact whose subject is its platform's image manifest.
func sbomArtifacts(idx v1.ImageIndex, sboms sbomFlags, created time.Time) ([]imagebuild.Artifact, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []imagebuild.Artifact
	for _, s := range sboms {
		i := slices.IndexFunc(m.Manifests, func(d v1.Descriptor) bool { return d.Platform != nil && d.Platform.Equals(s.Platform) })
		if i < 0 {
			return nil, fmt.Errorf("--sbom %s: the image has no such platform", s.Platform)
		}
		data, err := os.ReadFile(s.Path)
		if err != nil {
			return nil, err
		}
		a, err := imagebuild.SBOMArtifact(m.Manifests[i], data, created)
		if err != nil {
			return nil, fmt.Errorf("--sbom %s=%s: %w", s.Platform, s.Path, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func push(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("layout", "bin/image", "Folder of the OCI image layout to push.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: imagebuild push [--layout DIR] REGISTRY/REPOSITORY:TAG")
	}
	ref, err := name.ParseReference(fs.Arg(0))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	digest, err := imagebuild.Push(ctx, *dir, ref)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", ref.Name(), digest)
	return nil
}

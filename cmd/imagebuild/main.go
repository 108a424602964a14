// Command imagebuild builds the operator's multi-architecture OCI image from prebuilt static manager
// binaries, without a container daemon and offline, and pushes it (see internal/imagebuild; `make
// image` and `make image-push` run it).
//
//	imagebuild build --out bin/image --tarball bin/image.tar --version 0.1.0 --revision <commit> \
//	    --created <unix seconds> --binary linux/amd64=<path> --binary linux/arm64=<path> [label flags]
//	imagebuild push --layout bin/image registry.example.com/repo:tag
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/medik8s/node-healthcheck/internal/imagebuild"
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

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var o imagebuild.Options
	var binaries binaryFlags
	fs.Var(&binaries, "binary", "<os>/<arch>=<path> of a static manager binary; repeat for each platform, in the index's order.")
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
	if err := imagebuild.WriteLayout(*out, idx, o.Version); err != nil {
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
	fmt.Printf("%s: %s (%d platforms)\n", *out, digest, len(o.Binaries))
	return nil
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

// Command release builds a release of the operator into a folder and publishes it (see
// internal/plumbing/release and docs/release.md; `make release` and `make release-push` run it).
//
//	release build --out bin/release/0.1.0 --version 0.1.0 --created <unix seconds> \
//	    --image-archive bin/node-healthcheck-0.1.0.oci.tar --chart charts/node-healthcheck \
//	    --plugin linux/amd64=<path> ... --license LICENSE
//	release push --dir bin/release/0.1.0 --version 0.1.0 --image ghcr.io/medik8s/node-healthcheck:0.1.0 \
//	    --chart-repo oci://ghcr.io/medik8s/charts --key cosign.key [--plain-http]
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

	"github.com/medik8s/node-healthcheck/internal/plumbing/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: release build|push [flags]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "build":
		return build(ctx, args[1:])
	case "push":
		return push(ctx, args[1:])
	default:
		return fmt.Errorf("unknown command %q: want build or push", args[0])
	}
}

// pluginFlags collects --plugin <os>/<arch>=<path>.
type pluginFlags []release.Plugin

func (p *pluginFlags) String() string { return fmt.Sprint(*p) }

func (p *pluginFlags) Set(s string) error {
	platform, path, ok := strings.Cut(s, "=")
	goos, goarch, ok2 := strings.Cut(platform, "/")
	if !ok || !ok2 || path == "" || goos == "" || goarch == "" {
		return fmt.Errorf("%q: want <os>/<arch>=<path>", s)
	}
	*p = append(*p, release.Plugin{OS: goos, Arch: goarch, Path: path})
	return nil
}

func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var o release.Options
	var plugins pluginFlags
	fs.Var(&plugins, "plugin", "<os>/<arch>=<path> of the kubectl plugin built for that platform; repeat for each.")
	out := fs.String("out", "", "Folder to write the release to (replaced).")
	created := fs.Int64("created", 0, "Seconds since 1970 (SOURCE_DATE_EPOCH): every time in the archives, so builds are reproducible.")
	fs.StringVar(&o.Version, "version", "", "The release's version: the chart's appVersion and the image's tag.")
	fs.StringVar(&o.ImageArchive, "image-archive", "", "The image's OCI archive (make image).")
	fs.StringVar(&o.ChartDir, "chart", "charts/node-healthcheck", "The chart's folder.")
	fs.StringVar(&o.License, "license", "LICENSE", "The license file each plugin archive carries.")
	fs.StringVar(&o.KrewURIBase, "krew-uri-base", "", "Where the plugin's archives are downloaded from (the krew manifest's URIs); default the GitHub release of v<version>.")
	fs.StringVar(&o.Install.Release, "install-release", "nhc", "install.yaml: the release name the chart is rendered as.")
	fs.StringVar(&o.Install.Namespace, "install-namespace", "node-healthcheck", "install.yaml: the operator's namespace (created by install.yaml).")
	fs.StringVar(&o.Install.KubeVersion, "kube-version", "v1.37.0", "install.yaml: the Kubernetes version the render assumes.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *out == "" || o.ImageArchive == "" {
		return errors.New("usage: release build --out DIR --version V --image-archive FILE [flags]")
	}
	if o.KrewURIBase == "" {
		o.KrewURIBase = "https://github.com/medik8s/node-healthcheck/releases/download/v" + o.Version
	}
	o.Plugins, o.Created = plugins, time.Unix(*created, 0).UTC()
	begin := time.Now()
	names, err := release.Build(ctx, *out, o)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d files in %s\n", *out, len(names), time.Since(begin).Round(time.Millisecond))
	for _, n := range names {
		fmt.Println("  " + n)
	}
	return nil
}

func push(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	var o release.PushOptions
	dir := fs.String("dir", "", "The release's folder (release build --out).")
	version := fs.String("version", "", "The release's version.")
	keyFile := fs.String("key", "", "The signing key: an ECDSA P-256 private key in PEM (PKCS #8 or EC), or cosign's encrypted key (cosign generate-key-pair; its password in $COSIGN_PASSWORD).")
	created := fs.Int64("created", 0, "Seconds since 1970 (SOURCE_DATE_EPOCH): the chart manifest's creation time.")
	fs.StringVar(&o.Image, "image", "", "The image's reference with its tag.")
	fs.StringVar(&o.ChartRepo, "chart-repo", "", "oci://<registry>/<path> the chart goes to (as <path>/<chart name>:<version>).")
	fs.BoolVar(&o.PlainHTTP, "plain-http", false, "Talk to the registries over plain HTTP.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *dir == "" || *version == "" || *keyFile == "" || o.Image == "" || o.ChartRepo == "" {
		return errors.New("usage: release push --dir DIR --version V --image REF:TAG --chart-repo oci://REGISTRY/PATH --key FILE [--plain-http]")
	}
	pemData, err := os.ReadFile(*keyFile)
	if err != nil {
		return err
	}
	o.Key, err = release.LoadSigningKey(pemData, func() ([]byte, error) {
		pass, ok := os.LookupEnv("COSIGN_PASSWORD")
		if !ok {
			return nil, errors.New("the key is encrypted: set COSIGN_PASSWORD")
		}
		return []byte(pass), nil
	})
	if err != nil {
		return err
	}
	o.Created = time.Unix(*created, 0).UTC()
	pushed, err := release.Push(ctx, *dir, *version, o)
	if err != nil {
		return err
	}
	fmt.Printf("pushed and signed the image %s (signature %s)\n", pushed.Image, pushed.ImageSignature)
	fmt.Printf("pushed and signed the chart %s (signature %s)\n", pushed.Chart, pushed.ChartSignature)
	return nil
}

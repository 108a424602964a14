package release

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/medik8s/node-healthcheck/internal/plumbing/imagebuild"
)

// PushOptions say where a release goes.
type PushOptions struct {
	// Image is the image's reference with its tag, e.g. ghcr.io/medik8s/node-healthcheck:0.1.0.
	Image string
	// ChartRepo is where the chart goes, e.g. oci://ghcr.io/medik8s/charts: the chart lands at
	// <ChartRepo>/<name>:<version>, as `helm push` puts it.
	ChartRepo string
	// Key signs the image and the chart.
	Key *ecdsa.PrivateKey
	// PlainHTTP talks to the registries over HTTP (a local test registry); loopback addresses use
	// HTTP anyway.
	PlainHTTP bool
	// Created is the chart manifest's creation annotation (the release's time, so the chart's
	// manifest digest is reproducible too).
	Created time.Time
}

// Pushed is what Push published.
type Pushed struct {
	// Image and Chart are the pushed manifests (the image's index, the chart's manifest) by digest.
	Image, Chart name.Digest
	// ImageSignature and ChartSignature are the signature manifests' tags.
	ImageSignature, ChartSignature name.Tag
}

// Push publishes the release in dir (Build's folder of version): the image from its OCI archive
// to o.Image with its SBOMs as OCI referrers of their platforms' images (imagebuild.Push), the
// packaged chart to o.ChartRepo with Helm's registry client, and signs the image's index and the
// chart's manifest with o.Key. Credentials are those of `docker login` for the image and its
// signatures, and Helm's (`helm registry login`, which also reads Docker's) for the chart.
func Push(ctx context.Context, dir, version string, o PushOptions) (Pushed, error) {
	var nameOpts []name.Option
	if o.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	remoteOpts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	imageRef, err := name.NewTag(o.Image, nameOpts...)
	if err != nil {
		return Pushed{}, fmt.Errorf("the image reference %q: %w", o.Image, err)
	}
	layout, err := os.MkdirTemp("", "release-push-*")
	if err != nil {
		return Pushed{}, err
	}
	defer os.RemoveAll(layout)
	if err := untar(filepath.Join(dir, ImageArchiveName(version)), layout); err != nil {
		return Pushed{}, fmt.Errorf("reading the release's image: %w", err)
	}
	imageDigest, err := imagebuild.Push(ctx, layout, imageRef)
	if err != nil {
		return Pushed{}, err
	}
	var out Pushed
	out.Image = imageRef.Context().Digest(imageDigest.String())
	out.ImageSignature = SignatureTag(imageRef.Context(), imageDigest)
	if _, err := Sign(imageRef.Context(), imageDigest, o.Key, remoteOpts...); err != nil {
		return Pushed{}, err
	}

	chartRepo, chartDigest, err := pushChart(dir, version, o)
	if err != nil {
		return Pushed{}, err
	}
	repo, err := name.NewRepository(chartRepo, nameOpts...)
	if err != nil {
		return Pushed{}, err
	}
	out.Chart = repo.Digest(chartDigest.String())
	out.ChartSignature = SignatureTag(repo, chartDigest)
	if _, err := Sign(repo, chartDigest, o.Key, remoteOpts...); err != nil {
		return Pushed{}, err
	}
	return out, nil
}

// pushChart pushes the release's packaged chart with Helm's registry client and returns the
// chart's repository (without oci://) and its manifest's digest.
func pushChart(dir, version string, o PushOptions) (string, v1.Hash, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(matches) != 1 {
		return "", v1.Hash{}, fmt.Errorf("the release %s should hold one packaged chart, it holds %v", dir, matches)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		return "", v1.Hash{}, err
	}
	meta, err := chartMetadata(data)
	if err != nil {
		return "", v1.Hash{}, err
	}
	if meta.AppVersion != version {
		return "", v1.Hash{}, fmt.Errorf("the release's chart has appVersion %q, not %q", meta.AppVersion, version)
	}
	if !strings.HasPrefix(o.ChartRepo, "oci://") {
		return "", v1.Hash{}, fmt.Errorf("the chart repository %q does not start with oci://", o.ChartRepo)
	}
	repo := strings.TrimSuffix(strings.TrimPrefix(o.ChartRepo, "oci://"), "/") + "/" + meta.Name
	clientOpts := []registry.ClientOption{registry.ClientOptWriter(os.Stderr)}
	if o.PlainHTTP {
		clientOpts = append(clientOpts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(clientOpts...)
	if err != nil {
		return "", v1.Hash{}, err
	}
	res, err := client.Push(data, repo+":"+meta.Version, registry.PushOptStrictMode(true),
		registry.PushOptCreationTime(o.Created.UTC().Format(time.RFC3339)))
	if err != nil {
		return "", v1.Hash{}, fmt.Errorf("pushing the chart to %s: %w", repo, err)
	}
	h, err := v1.NewHash(res.Manifest.Digest)
	if err != nil {
		return "", v1.Hash{}, err
	}
	return repo, h, nil
}

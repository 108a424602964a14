package imagebuild

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Push uploads the image index of the OCI layout in dir (with every platform's image) to ref, then
// its artifacts (the SBOMs) by digest, which the registry lists as referrers of their subjects, and
// returns the index's digest. Credentials come from the Docker config (`docker login`, or
// $DOCKER_CONFIG/config.json) and its credential helpers, unless opts say otherwise.
func Push(ctx context.Context, dir string, ref name.Reference, opts ...remote.Option) (v1.Hash, error) {
	idx, _, artifacts, err := readLayout(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing to %s: %w", ref, err)
	}
	for _, a := range artifacts {
		for _, data := range a.Blobs {
			// A blob's upload carries no media type; the manifest gives each its type.
			if err := remote.WriteLayer(ref.Context(), static.NewLayer(data, types.MediaType(MediaTypeEmpty)), opts...); err != nil {
				return v1.Hash{}, fmt.Errorf("pushing an artifact's blob to %s: %w", ref.Context(), err)
			}
		}
		if err := remote.Put(ref.Context().Digest(a.Descriptor.Digest.String()), a, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing the artifact %s to %s: %w", a.Descriptor.Digest, ref.Context(), err)
		}
	}
	return digest, nil
}

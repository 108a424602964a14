package imagebuild

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push uploads the image index of the OCI layout in dir (with every platform's image) to ref and
// returns the index's digest. Credentials come from the Docker config (`docker login`, or
// $DOCKER_CONFIG/config.json) and its credential helpers, unless opts say otherwise.
func Push(ctx context.Context, dir string, ref name.Reference, opts ...remote.Option) (v1.Hash, error) {
	idx, _, err := ReadLayout(dir)
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
	return digest, nil
}

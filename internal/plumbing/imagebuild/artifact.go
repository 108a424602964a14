package imagebuild

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// MediaTypeCycloneDX is a CycloneDX SBOM in JSON (IANA's registration), the artifact type and the
	// layer type of an SBOM artifact.
	MediaTypeCycloneDX = "application/vnd.cyclonedx+json"
	// MediaTypeEmpty is the OCI 1.1 empty descriptor's media type: an artifact's config when the
	// artifact has none.
	MediaTypeEmpty = "application/vnd.oci.empty.v1+json"
)

// emptyJSON is the content of the OCI 1.1 empty descriptor.
var emptyJSON = []byte("{}")

// Artifact is an OCI 1.1 artifact: an image manifest with an artifactType, the empty config, its
// content as layers, and a subject (the manifest it refers to), so that a registry lists it among
// the subject's referrers and an OCI layout holds it beside the image.
type Artifact struct {
	// Manifest is the artifact's manifest as stored.
	Manifest []byte
	// Descriptor describes Manifest (media type, digest, size, artifactType), as index.json lists it.
	Descriptor v1.Descriptor
	// Blobs are the config's and the layers' contents by digest.
	Blobs map[v1.Hash][]byte
}

// artifactManifest is an OCI image manifest with the OCI 1.1 fields go-containerregistry's
// v1.Manifest writes in another order; written by hand so that its bytes (and digest) are fixed.
type artifactManifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     types.MediaType   `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        v1.Descriptor     `json:"config"`
	Layers        []v1.Descriptor   `json:"layers"`
	Subject       *v1.Descriptor    `json:"subject"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// SBOMArtifact returns a CycloneDX SBOM (JSON) as an artifact that refers to subject (the manifest
// of the image the SBOM describes), created at created (the image's time, so builds stay
// reproducible).
func SBOMArtifact(subject v1.Descriptor, sbom []byte, created time.Time) (Artifact, error) {
	var probe struct {
		BOMFormat string `json:"bomFormat"`
	}
	if err := json.Unmarshal(sbom, &probe); err != nil || probe.BOMFormat != "CycloneDX" {
		return Artifact{}, fmt.Errorf("not a CycloneDX SBOM in JSON (bomFormat %q): %v", probe.BOMFormat, err)
	}
	config, err := blobDescriptor(MediaTypeEmpty, emptyJSON)
	if err != nil {
		return Artifact{}, err
	}
	layer, err := blobDescriptor(MediaTypeCycloneDX, sbom)
	if err != nil {
		return Artifact{}, err
	}
	// The subject as a descriptor only: no platform, no annotations.
	subj := v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	m := artifactManifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: MediaTypeCycloneDX,
		Config: config, Layers: []v1.Descriptor{layer}, Subject: &subj,
		Annotations: map[string]string{LabelCreated: created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return Artifact{}, err
	}
	desc, err := blobDescriptor(string(types.OCIManifestSchema1), raw)
	if err != nil {
		return Artifact{}, err
	}
	desc.ArtifactType = MediaTypeCycloneDX
	return Artifact{Manifest: raw, Descriptor: desc, Blobs: map[v1.Hash][]byte{config.Digest: emptyJSON, layer.Digest: sbom}}, nil
}

func blobDescriptor(mediaType string, data []byte) (v1.Descriptor, error) {
	h, n, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: types.MediaType(mediaType), Digest: h, Size: n}, nil
}

// RawManifest returns the artifact's manifest (remote.Put's Taggable).
func (a Artifact) RawManifest() ([]byte, error) { return a.Manifest, nil }

// MediaType returns the manifest's media type (remote.Put's Taggable).
func (a Artifact) MediaType() (types.MediaType, error) { return a.Descriptor.MediaType, nil }

package release

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

// cosign's key-based signature format (sigstore/cosign pkg/oci/static, sigstore/sigstore
// pkg/signature/payload), which `cosign verify --key` reads.
const (
	// MediaTypeSimpleSigning is the media type of a signature's layer: the signed payload.
	MediaTypeSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json"
	// AnnotationSignature is the layer annotation with the payload's signature, in base64.
	AnnotationSignature = "dev.cosignproject.cosign/signature"
	// SignatureType is the payload's critical.type.
	SignatureType = "cosign container image signature"
	// SigstoreKeyPEMType is the PEM type of cosign's encrypted private keys (`cosign
	// generate-key-pair`): PKCS #8 sealed with scrypt and NaCl secretbox.
	SigstoreKeyPEMType = "ENCRYPTED SIGSTORE PRIVATE KEY"
	// cosignKeyPEMType is the same format as cosign before 2.0 named it.
	cosignKeyPEMType = "ENCRYPTED COSIGN PRIVATE KEY"
)

// LoadSigningKey reads an ECDSA P-256 private key from PEM: PKCS #8 ("PRIVATE KEY"), SEC 1 ("EC
// PRIVATE KEY"), or cosign's encrypted key, which password (COSIGN_PASSWORD) opens.
func LoadSigningKey(data []byte, password func() ([]byte, error)) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("the signing key is not PEM")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case SigstoreKeyPEMType, cosignKeyPEMType:
		if password == nil {
			return nil, fmt.Errorf("the signing key is a %s and needs its password", block.Type)
		}
		pass, perr := password()
		if perr != nil {
			return nil, perr
		}
		der, derr := encrypted.Decrypt(block.Bytes, pass)
		if derr != nil {
			return nil, fmt.Errorf("opening the %s (wrong password?): %w", block.Type, derr)
		}
		key, err = x509.ParsePKCS8PrivateKey(der)
	default:
		return nil, fmt.Errorf("the signing key's PEM type is %q: want PRIVATE KEY, EC PRIVATE KEY or %s", block.Type, SigstoreKeyPEMType)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the signing key: %w", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("the signing key is a %T, not an ECDSA P-256 key", key)
	}
	return ec, nil
}

// simpleSigning is the payload cosign signs (sigstore's payload.SimpleContainerImage).
type simpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]any `json:"optional"`
}

// Payload returns the simple-signing payload that names the manifest digest in repo, as cosign
// writes it: the repository (no tag) as the identity, no optional claims.
func Payload(repo name.Repository, digest v1.Hash) ([]byte, error) {
	var p simpleSigning
	p.Critical.Identity.DockerReference = repo.Name()
	p.Critical.Image.DockerManifestDigest = digest.String()
	p.Critical.Type = SignatureType
	return json.Marshal(p)
}

// SignatureTag is where cosign looks for the signatures of the manifest digest in repo:
// sha256-<hex>.sig in the same repository.
func SignatureTag(repo name.Repository, digest v1.Hash) name.Tag {
	return repo.Tag(strings.Replace(digest.String(), ":", "-", 1) + ".sig")
}

// SignatureLayer signs the payload for the manifest digest in repo with key (ECDSA over its
// SHA-256, ASN.1) and returns the layer cosign stores: the payload, its signature in an annotation.
func SignatureLayer(repo name.Repository, digest v1.Hash, key *ecdsa.PrivateKey) (mutate.Addendum, error) {
	payload, err := Payload(repo, digest)
	if err != nil {
		return mutate.Addendum{}, err
	}
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		return mutate.Addendum{}, fmt.Errorf("signing %s@%s: %w", repo, digest, err)
	}
	return mutate.Addendum{
		Layer:       static.NewLayer(payload, MediaTypeSimpleSigning),
		Annotations: map[string]string{AnnotationSignature: base64.StdEncoding.EncodeToString(sig)},
	}, nil
}

// Sign signs the manifest digest in repo with key and pushes the signature to SignatureTag, adding
// it to the signatures already there (as cosign does), and returns the signature manifest's digest.
func Sign(repo name.Repository, digest v1.Hash, key *ecdsa.PrivateKey, opts ...remote.Option) (v1.Hash, error) {
	layer, err := SignatureLayer(repo, digest, key)
	if err != nil {
		return v1.Hash{}, err
	}
	tag := SignatureTag(repo, digest)
	base, err := remote.Image(tag, opts...)
	var terr *transport.Error
	switch {
	case err == nil:
	case errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	default:
		return v1.Hash{}, fmt.Errorf("reading the signatures at %s: %w", tag, err)
	}
	img, err := mutate.Append(base, layer)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the signature to %s: %w", tag, err)
	}
	return img.Digest()
}

package release_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	helmregistry "helm.sh/helm/v3/pkg/registry"

	"github.com/medik8s/node-healthcheck/internal/plumbing/imagebuild"
	"github.com/medik8s/node-healthcheck/internal/plumbing/release"
)

// cosignSignatures returns the payloads and base64 signatures cosign would find for the manifest
// digest in repo: the layers of the manifest tagged sha256-<hex>.sig, read here from the registry
// without the signer's code.
func cosignSignatures(t *testing.T, repo name.Repository, digest v1.Hash) (payloads [][]byte, sigs []string) {
	t.Helper()
	img, err := remote.Image(repo.Tag("sha256-" + digest.Hex + ".sig"))
	if err != nil {
		t.Fatalf("the signature of %s@%s: %v", repo, digest, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		if l.MediaType != "application/vnd.dev.cosign.simplesigning.v1+json" {
			t.Errorf("a signature layer of type %s", l.MediaType)
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		payloads, sigs = append(payloads, data), append(sigs, l.Annotations["dev.cosignproject.cosign/signature"])
	}
	return payloads, sigs
}

// verifyCosign checks, as `cosign verify --key` does with sigstore's own code, that every
// signature of digest in repo is pub's over its payload, and that the payload names digest and repo.
func verifyCosign(t *testing.T, repo name.Repository, digest v1.Hash, pub crypto.PublicKey) (verified int, err error) {
	t.Helper()
	verifier, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	payloads, sigs := cosignSignatures(t, repo, digest)
	for i, p := range payloads {
		sig, err := base64.StdEncoding.DecodeString(sigs[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(p)); err != nil {
			return verified, err
		}
		var claims payload.Cosign
		if err := json.Unmarshal(p, &claims); err != nil {
			t.Fatalf("the payload %s: %v", p, err)
		}
		if claims.Image.DigestStr() != digest.String() || claims.Image.Repository.Name() != repo.Name() || claims.Annotations != nil {
			t.Errorf("the payload names %s (claims %v), want %s@%s", claims.Image, claims.Annotations, repo.Name(), digest)
		}
		verified++
	}
	return verified, nil
}

// TestPushSignsImageAndChart pushes a release to a registry in the test and checks what a user
// gets: the image's index at its tag with each platform's SBOM as a referrer, the chart Helm pulls
// (the release's package, byte for byte), and cosign signatures of both that the right key
// verifies and another key does not; a second push adds a signature beside the first.
func TestPushSignsImageAndChart(t *testing.T) {
	dir, o, out := built(t)
	version := o.Version
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// The signer reads the key as the user gives it: cosign's encrypted key file.
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := encrypted.Encrypt(der, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := release.LoadSigningKey(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED SIGSTORE PRIVATE KEY", Bytes: sealed}),
		func() ([]byte, error) { return []byte("s3cret"), nil })
	if err != nil {
		t.Fatal(err)
	}
	opts := release.PushOptions{Image: host + "/medik8s/node-healthcheck:" + version, ChartRepo: "oci://" + host + "/charts", Key: signer, PlainHTTP: true, Created: created}
	pushed, err := release.Push(context.Background(), out, version, opts)
	if err != nil {
		t.Fatal(err)
	}

	// The image: its tag names the archive's index, which the signature names.
	imageRepo, err := name.NewRepository(host + "/medik8s/node-healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	idx, _, err := imagebuild.ReadLayout(filepath.Join(dir, "image"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Head(imageRepo.Tag(version))
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want || pushed.Image.DigestStr() != want.String() {
		t.Fatalf("the tag names %s, Push reports %s, the release's index is %s", got.Digest, pushed.Image, want)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		refs, err := remote.Referrers(imageRepo.Digest(d.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		rm, err := refs.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(rm.Manifests) != 1 {
			t.Fatalf("the referrers of %s's image: %+v", d.Platform, rm.Manifests)
		}
		// The test registry lists a referrer by its config's type; the manifest says what it is.
		raw, err := remote.Get(imageRepo.Digest(rm.Manifests[0].Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		var sbom v1.Manifest
		if err := json.Unmarshal(raw.Manifest, &sbom); err != nil {
			t.Fatal(err)
		}
		if sbom.ArtifactType != "application/vnd.cyclonedx+json" || sbom.Subject == nil || sbom.Subject.Digest != d.Digest || len(sbom.Layers) != 1 {
			t.Errorf("the referrer of %s's image is %s", d.Platform, raw.Manifest)
		}
	}

	// The chart: Helm pulls the release's package, and its manifest is the one signed.
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(host + "/charts/node-healthcheck:" + version)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join(out, "node-healthcheck-"+version+".tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pulled.Chart.Data, pkg) {
		t.Errorf("helm pulled another chart than the release's package")
	}
	chartRepo, err := name.NewRepository(host + "/charts/node-healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	chartDigest, err := v1.NewHash(pulled.Manifest.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if pushed.Chart.DigestStr() != chartDigest.String() {
		t.Errorf("Push reports the chart %s, helm pulls %s", pushed.Chart, chartDigest)
	}

	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		repo   name.Repository
		digest v1.Hash
	}{{imageRepo, want}, {chartRepo, chartDigest}} {
		if n, err := verifyCosign(t, s.repo, s.digest, key.Public()); err != nil || n != 1 {
			t.Errorf("%s@%s: %d signatures verified with the key, then %v", s.repo, s.digest, n, err)
		}
		if _, err := verifyCosign(t, s.repo, s.digest, other.Public()); err == nil {
			t.Errorf("%s@%s: another key verifies the signature", s.repo, s.digest)
		}
	}

	// A second push (another key, as after a key rotation) keeps the first signature.
	opts.Key = other
	if _, err := release.Push(context.Background(), out, version, opts); err != nil {
		t.Fatal(err)
	}
	payloads, _ := cosignSignatures(t, imageRepo, want)
	if len(payloads) != 2 {
		t.Errorf("after a second push the image has %d signatures, want 2", len(payloads))
	}
}

// TestLoadSigningKey reads the keys a user may give: PKCS #8, SEC 1, cosign's encrypted key (with
// its password, not with another), and refuses keys cosign's ECDSA-P256 signatures cannot come from.
func TestLoadSigningKey(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := encrypted.Encrypt(pkcs8, []byte("right"))
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384DER, err := x509.MarshalPKCS8PrivateKey(p384)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	pass := func(s string) func() ([]byte, error) { return func() ([]byte, error) { return []byte(s), nil } }
	for _, tc := range []struct {
		name     string
		pemType  string
		der      []byte
		password func() ([]byte, error)
		ok       bool
	}{
		{"PKCS #8", "PRIVATE KEY", pkcs8, nil, true},
		{"SEC 1", "EC PRIVATE KEY", sec1, nil, true},
		{"cosign's encrypted key", "ENCRYPTED SIGSTORE PRIVATE KEY", sealed, pass("right"), true},
		{"cosign 1's name for it", "ENCRYPTED COSIGN PRIVATE KEY", sealed, pass("right"), true},
		{"the wrong password", "ENCRYPTED SIGSTORE PRIVATE KEY", sealed, pass("wrong"), false},
		{"no password", "ENCRYPTED SIGSTORE PRIVATE KEY", sealed, nil, false},
		{"P-384", "PRIVATE KEY", p384DER, nil, false},
		{"RSA", "PRIVATE KEY", rsaDER, nil, false},
		{"a public key", "PUBLIC KEY", pkcs8, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := release.LoadSigningKey(pem.EncodeToMemory(&pem.Block{Type: tc.pemType, Bytes: tc.der}), tc.password)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok = %v", err, tc.ok)
			}
			if tc.ok && !got.Equal(key) {
				t.Errorf("read another key")
			}
		})
	}
}

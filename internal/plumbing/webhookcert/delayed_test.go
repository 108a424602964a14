package webhookcert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// keyPair returns a serving certificate and its private key, PEM encoded.
func keyPair(t *testing.T) (crt, key []byte) {
	t.Helper()
	return keyPairExpiring(t, time.Now().Add(time.Hour))
}

// keyPairExpiring is keyPair for a certificate that expires at notAfter.
func keyPairExpiring(t *testing.T, notAfter time.Time) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(notAfter.Unix()), Subject: pkix.Name{CommonName: "webhook"}, DNSNames: []string{"webhook.ns.svc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// startRecorder is a webhook server that records its start and then serves until the context ends.
type startRecorder struct {
	webhook.Server
	started chan struct{}
}

func (s *startRecorder) Start(ctx context.Context) error {
	close(s.started)
	<-ctx.Done()
	return nil
}

func write(t *testing.T, dir, name string, content []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
		t.Fatal(err)
	}
}

// mismatchedDelayed returns a delayed webhook server whose certificate is mounted beside another
// certificate's key, and the key that belongs to the certificate.
func mismatchedDelayed(t *testing.T) (d *delayed, server *startRecorder, dir string, key []byte) {
	t.Helper()
	dir = t.TempDir()
	crt, key := keyPair(t)
	_, otherKey := keyPair(t)
	write(t, dir, corev1.TLSCertKey, crt)
	write(t, dir, corev1.TLSPrivateKeyKey, otherKey)
	server = &startRecorder{started: make(chan struct{})}
	ready := make(chan struct{})
	close(ready)
	d = Delayed(server, ready, dir).(*delayed)
	d.poll = 5 * time.Millisecond
	return d, server, dir, key
}

// TestDelayedStartsOnAMatchingKeyPair: a certificate mounted beside the previous key (a renewal
// between the rotator's check and the server's start) holds the server until the key follows; the
// server does not start on it and exit.
func TestDelayedStartsOnAMatchingKeyPair(t *testing.T) {
	d, server, dir, newKey := mismatchedDelayed(t)
	var loads atomic.Int32
	load := d.load
	d.load = func() error { loads.Add(1); return load() }

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()

	// The witness: the server read the mismatched pair several times, and did not start.
	for deadline := time.Now().Add(10 * time.Second); loads.Load() < 5; time.Sleep(time.Millisecond) {
		select {
		case <-server.started:
			t.Fatalf("the webhook server started on a certificate beside another certificate's key (after %d reads)", loads.Load())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("read the key pair %d times in 10s", loads.Load())
		}
	}
	select {
	case <-server.started:
		t.Fatal("the webhook server started on a certificate beside another certificate's key")
	default:
	}
	write(t, dir, corev1.TLSPrivateKeyKey, newKey)
	select {
	case <-server.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook server did not start once the key matched")
	}
}

// TestDelayedStartsAnywayAfterTheWait: a pair that never matches is the server's error to report
// (the pod restarts), not a reason to wait for ever.
func TestDelayedStartsAnywayAfterTheWait(t *testing.T) {
	d, server, _, _ := mismatchedDelayed(t)
	d.wait = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Start(ctx) }()
	select {
	case <-server.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook server never started")
	}
}

// TestDelayedWaitsForReady: nothing is read or started before the rotator says the certificate is
// mounted, and a stop before that ends Start cleanly.
func TestDelayedWaitsForReady(t *testing.T) {
	server := &startRecorder{started: make(chan struct{})}
	d := Delayed(server, make(chan struct{}), t.TempDir()).(*delayed)
	var loads atomic.Int32
	d.load = func() error { loads.Add(1); return nil }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start after a stop: %v", err)
	}
	if loads.Load() != 0 {
		t.Fatal("read the certificate before it was mounted")
	}
	select {
	case <-server.started:
		t.Fatal("started before the certificate was mounted")
	default:
	}
}

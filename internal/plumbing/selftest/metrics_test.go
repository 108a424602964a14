package selftest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// selfSignedCA returns the PEM of a CA of its own, for example.com too.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"}, DNSNames: []string{"example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// The metrics check verifies the endpoint's certificate against the CA it is given, for the server
// name it is given, and skips verification only when asked to.
func TestMetricsVerifiesTheCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("controller_runtime_reconcile_total 1\n"))
	}))
	defer srv.Close()
	// httptest's certificate is its own CA, issued for example.com (and 127.0.0.1).
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	otherCA := selfSignedCA(t)
	base := Options{MetricsURL: srv.URL + "/metrics", MetricsToken: "token"}
	for _, tt := range []struct {
		name    string
		options func(o *Options)
		want    string // a substring of the error; empty: passes
	}{
		{"the CA, for a name the certificate holds", func(o *Options) { o.MetricsCA, o.MetricsServerName = ca, "example.com" }, ""},
		{"the CA, for the URL's address", func(o *Options) { o.MetricsCA = ca }, ""},
		{"the CA, for a name the certificate lacks", func(o *Options) { o.MetricsCA, o.MetricsServerName = ca, "nhc-node-healthcheck-webhook.nhc.svc" }, "certificate is valid for"},
		{"another CA", func(o *Options) { o.MetricsCA, o.MetricsServerName = otherCA, "example.com" }, "certificate signed by unknown authority"},
		{"no CA: the system's roots", func(*Options) {}, "certificate signed by unknown authority"},
		{"no PEM", func(o *Options) { o.MetricsCA = []byte("not a certificate") }, "no PEM certificate"},
		{"verification skipped when asked", func(o *Options) { o.MetricsInsecure = true }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			tt.options(&o)
			err := metrics(context.Background(), o)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("failed: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

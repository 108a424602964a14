package webhookcert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

func ca(t *testing.T, name string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func names(bundle []byte) []string {
	var out []string
	for _, c := range Certificates(bundle) {
		out = append(out, c.Subject.CommonName)
	}
	return out
}

func TestBundle(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	old := ca(t, "old", now.Add(time.Hour))
	older := ca(t, "older", now.Add(-time.Minute)) // expired
	cur := ca(t, "current", now.Add(24*time.Hour))
	next := ca(t, "next", now.Add(48*time.Hour))
	junk := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte("key")})

	for _, tc := range []struct {
		name           string
		next, previous []byte
		want           []string
	}{
		{"first CA", cur, nil, []string{"current"}},
		{"serving certificate renewed: the bundle is unchanged", cat(cur, old), cat(cur, old), []string{"current", "old"}},
		{"CA renewed: the previous one stays trusted", next, cat(cur, old), []string{"next", "current", "old"}},
		{"expired CAs are dropped", next, cat(cur, older), []string{"next", "current"}},
		{"the signing CA stays first", cur, cat(old, cur), []string{"current", "old"}},
		{"blocks that are not certificates are dropped", cat(cur, junk), cat(junk, old), []string{"current", "old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(Bundle(tc.next, tc.previous, now))
			if len(got) != len(tc.want) {
				t.Fatalf("bundle %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("bundle %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		o  Options
		ok bool
	}{
		{Options{}, true},
		{Options{CertValidity: time.Minute, CAValidity: 2 * time.Minute}, true},
		{Options{CertValidity: 30 * time.Second}, false},
		{Options{CertValidity: 2 * time.Hour, CAValidity: time.Hour}, false},
		{Options{CAValidity: time.Hour}, false}, // shorter than the default certificate lifetime
	} {
		if err := tc.o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: error %v, want ok=%v", tc.o, err, tc.ok)
		}
	}
}

package webhookcert

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
)

// mount writes a certificate expiring at notAfter and its key into dir, as the kubelet mounts a
// Secret: new files replacing the old ones.
func mount(t *testing.T, dir string, notAfter time.Time) {
	t.Helper()
	crt, key := keyPairExpiring(t, notAfter)
	for name, b := range map[string][]byte{
		corev1.TLSCertKey:       crt,
		corev1.TLSPrivateKeyKey: key,
	} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// collectedExpiry returns the expiry the collector reports; ok false when it reports none.
func collectedExpiry(t *testing.T) (float64, bool) {
	t.Helper()
	ch := make(chan prometheus.Metric, 2)
	expiry.Collect(ch)
	close(ch)
	var out []float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.GetGauge().GetValue())
	}
	switch len(out) {
	case 0:
		return 0, false
	case 1:
		return out[0], true
	}
	t.Fatalf("%d expiry series, want at most one", len(out))
	return 0, false
}

// The metrics endpoint serves the mounted certificate, none before it is mounted, and a renewal
// once the kubelet mounts it; the expiry metric follows the certificate served.
func TestServeMountedCertificate(t *testing.T) {
	dir := t.TempDir()
	cfg := &tls.Config{}
	ServeMountedCertificate(dir)(cfg)
	if cfg.GetCertificate == nil {
		t.Fatal("no GetCertificate")
	}
	if c, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); err == nil {
		t.Fatalf("a certificate (%v) before one is mounted", c)
	}
	if v, ok := collectedExpiry(t); ok {
		t.Errorf("expiry %v reported before a certificate is mounted", v)
	}

	first := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	mount(t, dir, first)
	c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Leaf.NotAfter.Equal(first) {
		t.Errorf("serves a certificate expiring at %s, want %s", c.Leaf.NotAfter, first)
	}
	if v, ok := collectedExpiry(t); !ok || v != float64(first.Unix()) {
		t.Errorf("expiry %v (reported %v), want %d", v, ok, first.Unix())
	}

	renewed := first.Add(365 * 24 * time.Hour)
	mount(t, dir, renewed)
	// The renewal's files may carry the same modification time (a coarse clock); a different size
	// or time is what tells them apart, so make sure one differs as the kubelet's atomic swap does.
	later := time.Now().Add(time.Minute)
	for _, name := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if err := os.Chtimes(filepath.Join(dir, name), later, later); err != nil {
			t.Fatal(err)
		}
	}
	c, err = cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Leaf.NotAfter.Equal(renewed) {
		t.Errorf("after the renewal serves a certificate expiring at %s, want %s", c.Leaf.NotAfter, renewed)
	}
	if v, ok := collectedExpiry(t); !ok || v != float64(renewed.Unix()) {
		t.Errorf("expiry %v after the renewal, want %d", v, renewed.Unix())
	}
}

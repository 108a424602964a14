package webhookcert

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricCertificateExpiry is when the serving certificate mounted in the certificate folder (the
// webhook's, which the metrics endpoint serves too) expires, in unix seconds; absent while none is
// mounted. The self-managed certificate is renewed when a quarter of its lifetime is left and
// cert-manager's renewBefore it expires, so an expiry that comes near means renewal is not working.
const MetricCertificateExpiry = "nodehealthcheck_certificate_expiration_timestamp_seconds"

// servingFiles is the mounted serving certificate, read again whenever its files change.
type servingFiles struct {
	dir string

	mu    sync.Mutex
	stamp [2]fileStamp
	cert  *tls.Certificate
	err   error
}

// fileStamp tells whether a file changed: the kubelet replaces a mounted Secret's files as a whole.
type fileStamp struct {
	mod  time.Time
	size int64
}

// load returns the certificate and key in the folder as a pair, read again only when a file
// changed.
func (f *servingFiles) load() (*tls.Certificate, error) {
	crt, key := filepath.Join(f.dir, corev1.TLSCertKey), filepath.Join(f.dir, corev1.TLSPrivateKeyKey)
	var stamp [2]fileStamp
	for i, p := range []string{crt, key} {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("the serving certificate is not mounted yet: %w", err)
		}
		stamp[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stamp == stamp && (f.cert != nil || f.err != nil) {
		return f.cert, f.err
	}
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err == nil && pair.Leaf == nil {
		pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0])
	}
	if err != nil {
		// A read that straddles the kubelet's switch to renewed files: read again next time.
		f.stamp, f.cert, f.err = [2]fileStamp{}, nil, nil
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	f.stamp, f.cert, f.err = stamp, &pair, nil
	return f.cert, nil
}

// ServeMountedCertificate returns a TLS option for the metrics server: serve the certificate and
// key mounted in certDir (tls.crt, tls.key: the webhook's, from the operator's own CA or
// cert-manager's), read again when the kubelet mounts a renewal, so that a scraper verifies the
// endpoint against that CA (ServiceMonitor tlsConfig.ca) instead of skipping verification of
// controller-runtime's self-signed certificate. Until a certificate is mounted (the self-managed one
// is written by the operator after its first start) the handshake fails. It also makes
// MetricCertificateExpiry report that certificate.
func ServeMountedCertificate(certDir string) func(*tls.Config) {
	f := &servingFiles{dir: certDir}
	expiry.set(f)
	return func(c *tls.Config) {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return f.load() }
	}
}

// expiryCollector reports MetricCertificateExpiry of the files ServeMountedCertificate serves.
type expiryCollector struct {
	desc *prometheus.Desc

	mu    sync.Mutex
	files *servingFiles
}

var expiry = &expiryCollector{desc: prometheus.NewDesc(MetricCertificateExpiry,
	"When the mounted serving certificate of the webhook and metrics endpoints expires, in unix seconds", nil, nil)}

func init() { crmetrics.Registry.MustRegister(expiry) }

func (e *expiryCollector) set(f *servingFiles) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.files = f
}

// Describe implements prometheus.Collector.
func (e *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- e.desc }

// Collect implements prometheus.Collector: nothing while no certificate is served or mounted.
func (e *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	f := e.files
	e.mu.Unlock()
	if f == nil {
		return
	}
	cert, err := f.load()
	if err != nil || cert == nil || cert.Leaf == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, float64(cert.Leaf.NotAfter.Unix()))
}

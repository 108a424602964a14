package remediation_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/medik8s/node-healthcheck/internal/testutil"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// conversionWebhook is a remediator's conversion webhook for kinds whose versions share one schema:
// it converts an object by rewriting its apiVersion. It serves TLS on 127.0.0.1 with a certificate of
// its own, and can be stopped (the API server's conversions then fail, as with a remediator whose
// webhook pod is down) and started again on the same address.
type conversionWebhook struct {
	addr  string
	cert  tls.Certificate
	caPEM []byte

	mu  sync.Mutex
	srv *http.Server
	// down is set while stopped: a connection the API server still holds gets errors too.
	down atomic.Bool
}

// newConversionWebhook returns a webhook on a free port of 127.0.0.1, started; it stops after the
// spec.
func newConversionWebhook() *conversionWebhook {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "conversion-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	w := &conversionWebhook{cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	w.start()
	DeferCleanup(w.stop)
	return w
}

// conversion is the CRDs' conversion through the webhook.
func (w *conversionWebhook) conversion() *apiextensionsv1.CustomResourceConversion {
	return &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"},
		ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://" + w.addr + "/convert"), CABundle: w.caPEM}}}
}

// start serves on the webhook's address (a free one the first time).
func (w *conversionWebhook) start() {
	GinkgoHelper()
	w.mu.Lock()
	defer w.mu.Unlock()
	addr := w.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var l net.Listener
	// The port of the stopped server may take a moment to be free again.
	Eventually(func() (err error) { l, err = net.Listen("tcp", addr); return err }).Should(Succeed())
	w.addr = l.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/convert", func(rw http.ResponseWriter, req *http.Request) {
		if w.down.Load() {
			http.Error(rw, "the webhook is down", http.StatusServiceUnavailable)
			return
		}
		testutil.ConvertUnchanged(rw, req)
	})
	// HTTP/1.1 only: Close ends every connection (an HTTP/2 one could outlive it).
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{w.cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}}
	w.down.Store(false)
	go func(srv *http.Server) {
		defer GinkgoRecover()
		if err := srv.ServeTLS(l, "", ""); !errors.Is(err, http.ErrServerClosed) {
			Expect(err).NotTo(HaveOccurred())
		}
	}(w.srv)
}

// stop stops serving, and closes every connection the API server holds.
func (w *conversionWebhook) stop(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down.Store(true)
	if w.srv != nil {
		Expect(w.srv.Close()).To(Succeed())
		w.srv = nil
	}
}

package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ConversionWebhook is a remediator's CRD conversion webhook for kinds whose versions share one
// schema: it converts an object by rewriting its apiVersion (ConvertUnchanged). It serves TLS on
// 127.0.0.1 with a certificate of its own, and can be stopped (the API server's conversions then
// fail, as with a remediator whose webhook pod is down) and started again. The broken-kind spec and
// the chaos world take it down across a leader change.
//
// It holds its port from NewConversionWebhook to Close, stopped or not: a port given back while
// stopped is in the range the kernel hands out to outgoing connections, and one of the test's own
// clients took it before Start could listen again (CI, 2026-11-30: "bind: address already in use").
// Stopped, it closes every connection it holds and each one it accepts before a byte is read, so the
// API server sees the webhook as unreachable, as it would a pod that is down.
type ConversionWebhook struct {
	addr  string
	cert  tls.Certificate
	caPEM []byte
	l     net.Listener
	srv   *http.Server

	// down is set while stopped: a request on a connection that raced Stop gets an error too.
	down atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]struct{} // the connections the server holds
}

// NewConversionWebhook returns a webhook on a free port of 127.0.0.1, started.
func NewConversionWebhook() (*ConversionWebhook, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "conversion-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the conversion webhook cannot listen: %w", err)
	}
	w := &ConversionWebhook{addr: l.Addr().String(), cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), conns: map[net.Conn]struct{}{}}
	w.l = &gatedListener{Listener: l, down: &w.down}
	mux := http.NewServeMux()
	mux.HandleFunc("/convert", func(rw http.ResponseWriter, req *http.Request) {
		if w.down.Load() {
			http.Error(rw, "the webhook is down", http.StatusServiceUnavailable)
			return
		}
		ConvertUnchanged(rw, req)
	})
	// HTTP/1.1 only: closing a connection ends it (an HTTP/2 one multiplexes).
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{w.cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		ConnState: w.track}
	go func() { _ = w.srv.ServeTLS(w.l, "", "") }()
	return w, nil
}

// track keeps the set of connections the server holds, for Stop to close.
func (w *ConversionWebhook) track(c net.Conn, state http.ConnState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch state {
	case http.StateNew:
		w.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(w.conns, c)
	}
}

// Conversion is a CRD's conversion through the webhook.
func (w *ConversionWebhook) Conversion() *apiextensionsv1.CustomResourceConversion {
	url := "https://" + w.addr + "/convert"
	return &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"},
		ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: w.caPEM}}}
}

// Start serves again after Stop (NewConversionWebhook returns it started).
func (w *ConversionWebhook) Start() error {
	w.down.Store(false)
	return nil
}

// Stop stops serving: it closes every connection the API server holds, and every new one at once.
func (w *ConversionWebhook) Stop() error {
	w.down.Store(true)
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		_ = c.Close()
	}
	return nil
}

// Close stops the webhook for good and gives its port back.
func (w *ConversionWebhook) Close() error {
	w.down.Store(true)
	if err := w.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// gatedListener closes each connection it accepts while down is set, before the server reads it.
type gatedListener struct {
	net.Listener
	down *atomic.Bool
}

func (l *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.down.Load() {
			return c, err
		}
		_ = c.Close()
	}
}

// ConvertUnchanged answers a ConversionReview: every object in the desired version, unchanged
// otherwise (kinds whose versions hold the same fields).
func ConvertUnchanged(rw http.ResponseWriter, req *http.Request) {
	review := apiextensionsv1.ConversionReview{}
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		obj := map[string]any{}
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		obj["apiVersion"] = review.Request.DesiredAPIVersion
		converted, err := json.Marshal(obj)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: converted})
	}
	review.Request, review.Response = nil, resp
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}

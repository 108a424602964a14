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
// fail, as with a remediator whose webhook pod is down) and started again on the same address. The
// broken-kind spec and the chaos world take it down across a leader change.
type ConversionWebhook struct {
	addr  string
	cert  tls.Certificate
	caPEM []byte

	mu  sync.Mutex
	srv *http.Server
	// down is set while stopped: a connection the API server still holds gets errors too.
	down atomic.Bool
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
	w := &ConversionWebhook{cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	return w, w.Start()
}

// Conversion is a CRD's conversion through the webhook.
func (w *ConversionWebhook) Conversion() *apiextensionsv1.CustomResourceConversion {
	url := "https://" + w.addr + "/convert"
	return &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"},
		ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: w.caPEM}}}
}

// Start serves on the webhook's address (a free one the first time).
func (w *ConversionWebhook) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	addr := w.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var l net.Listener
	var err error
	for range 50 { // the port of the stopped server may take a moment to be free again
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("the conversion webhook cannot listen on %s: %w", addr, err)
	}
	w.addr = l.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/convert", func(rw http.ResponseWriter, req *http.Request) {
		if w.down.Load() {
			http.Error(rw, "the webhook is down", http.StatusServiceUnavailable)
			return
		}
		ConvertUnchanged(rw, req)
	})
	// HTTP/1.1 only: Close ends every connection (an HTTP/2 one could outlive it).
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{w.cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}}
	w.down.Store(false)
	go func(srv *http.Server) { _ = srv.ServeTLS(l, "", "") }(w.srv)
	return nil
}

// Stop stops serving, and closes every connection the API server holds.
func (w *ConversionWebhook) Stop() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.down.Store(true)
	if w.srv == nil {
		return nil
	}
	err := w.srv.Close()
	w.srv = nil
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
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

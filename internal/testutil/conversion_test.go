package testutil

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// convert sends the webhook one ConversionReview, as the API server does, and returns the object it
// converted, or an error.
func convert(t *testing.T, w *ConversionWebhook) (string, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(w.Conversion().Webhook.ClientConfig.CABundle)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer c.CloseIdleConnections()
	review := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: "1", DesiredAPIVersion: "example.com/v2",
		Objects: []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"example.com/v1","kind":"K","metadata":{"name":"a"}}`)}}}}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(*w.Conversion().Webhook.ClientConfig.URL, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the webhook answered %s", resp.Status)
	}
	out := apiextensionsv1.ConversionReview{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return string(out.Response.ConvertedObjects[0].Raw), nil
}

// The webhook keeps its port while stopped (no other listener can take it: CI lost it to a client
// of the chaos test once), refuses conversions while stopped, and converts again once started.
func TestConversionWebhookKeepsItsPortWhileStopped(t *testing.T) {
	w, err := NewConversionWebhook()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	if got, err := convert(t, w); err != nil || !bytes.Contains([]byte(got), []byte(`"example.com/v2"`)) {
		t.Fatalf("started: converted %s, %v; want the object in example.com/v2", got, err)
	}
	for range 2 {
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
		if l, err := net.Listen("tcp", w.addr); err == nil {
			_ = l.Close()
			t.Fatalf("stopped, the webhook gave its port %s back", w.addr)
		}
		if got, err := convert(t, w); err == nil {
			t.Fatalf("stopped, the webhook converted: %s", got)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := convert(t, w); err != nil {
			t.Fatalf("started again: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", w.addr)
	if err != nil {
		t.Fatalf("closed, the webhook still holds %s: %v", w.addr, err)
	}
	_ = l.Close()
}

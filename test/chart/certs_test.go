package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// Without cert-manager the operator makes its own CA and serving certificate into the chart's
// Secret, writes the CA into the chart's webhook configurations, and serves the webhooks once the
// certificate is mounted (here the test copies into the certificate folder the Secret's keys that
// the Deployment's volume mounts, tls.crt and tls.key only, as the kubelet would), with a certificate
// that clients verify for the webhook Service's name; Prometheus, configured by the chart's
// ServiceMonitor, verifies the metrics endpoint with it too.
func TestSelfManagedWebhookCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	bin := managerBinary(t)
	c := startCluster(t)
	ctx := context.Background()
	install := action.NewInstall(c.helm(t))
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Timeout = releaseName, namespace, true, time.Minute
	rel, err := install.Run(loadChart(t), map[string]any{"certManager": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	certDir := t.TempDir()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, err := localcluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	probe, log := c.startManager(t, bin, rel.Manifest, map[string]string{"--webhook-cert-dir": certDir, "--webhook-port": strconv.Itoa(port),
		"--metrics-bind-address": metricsAddr})

	secret := &corev1.Secret{}
	waitFor(t, "the operator to fill its certificate Secret", func() bool {
		return c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "nhc-node-healthcheck-webhook-cert"}, secret) == nil &&
			len(secret.Data["tls.crt"]) > 0 && len(secret.Data["ca.crt"]) > 0
	})
	ca := secret.Data["ca.crt"]
	waitFor(t, "the CA in both webhook configurations", func() bool {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		return c.k8s.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-mutating"}, m) == nil &&
			c.k8s.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-validating"}, v) == nil &&
			bytes.Equal(m.Webhooks[0].ClientConfig.CABundle, ca) && bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, ca)
	})
	block, _ := pem.Decode(secret.Data["tls.crt"])
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cert.DNSNames, "nhc-node-healthcheck-webhook.node-healthcheck.svc") {
		t.Errorf("certificate names %v lack the webhook Service", cert.DNSNames)
	}
	if time.Until(cert.NotAfter) < 300*24*time.Hour {
		t.Errorf("certificate valid until %s only", cert.NotAfter)
	}

	if ready(probe) {
		t.Error("ready before the certificate was mounted")
	}
	keys, err := localcluster.SecretVolumeKeys(rel.Manifest, "nhc-node-healthcheck-webhook-cert")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"tls.crt", "tls.key"}) {
		t.Fatalf("the Deployment mounts the Secret's keys %v, want tls.crt and tls.key only", keys)
	}
	for _, f := range keys {
		if err := os.WriteFile(filepath.Join(certDir, f), secret.Data[f], 0o400); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the manager to be ready once its certificate is mounted", func() bool { return ready(probe) })

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{RootCAs: pool, ServerName: "nhc-node-healthcheck-webhook.node-healthcheck.svc", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("the webhook server's certificate does not verify with the injected CA for the Service name: %v\n%s", err, log.String())
	}
	_ = conn.Close()

	// What Prometheus does with the ServiceMonitor the chart installed: the CA from the Secret its
	// tlsConfig names, the serverName it gives, a handshake with the metrics endpoint; and a wrong
	// serverName fails.
	scrape := scrapeTLSConfig(t, c, "ServiceMonitor")
	conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", metricsAddr, scrape)
	if err != nil {
		t.Fatalf("Prometheus' TLS handshake with the metrics endpoint, as the ServiceMonitor says (serverName %s): %v", scrape.ServerName, err)
	}
	_ = conn.Close()
	wrong := scrape.Clone()
	wrong.ServerName = "nhc-node-healthcheck-metrics.node-healthcheck.svc"
	if conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", metricsAddr, wrong); err == nil {
		_ = conn.Close()
		t.Errorf("the metrics endpoint's certificate verifies for %s too: the check is void", wrong.ServerName)
	}
}

// scrapeTLSConfig is the TLS configuration Prometheus builds from the release's ServiceMonitor (or
// PodMonitor) as stored by the API server: the CA from the Secret key its tlsConfig.ca names, read
// from the API server, and its serverName.
func scrapeTLSConfig(t *testing.T, c *cluster, kind string) *tls.Config {
	t.Helper()
	ctx := context.Background()
	monitor := &unstructured.Unstructured{}
	monitor.SetAPIVersion("monitoring.coreos.com/v1")
	monitor.SetKind(kind)
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "nhc-node-healthcheck"}, monitor); err != nil {
		t.Fatalf("the release's %s: %v", kind, err)
	}
	field := map[string]string{"ServiceMonitor": "endpoints", "PodMonitor": "podMetricsEndpoints"}[kind]
	endpoints, _, err := unstructured.NestedSlice(monitor.Object, "spec", field)
	if err != nil || len(endpoints) != 1 {
		t.Fatalf("%s endpoints %v: %v", kind, endpoints, err)
	}
	tlsConfig, _, _ := unstructured.NestedMap(endpoints[0].(map[string]any), "tlsConfig")
	secretName, _, _ := unstructured.NestedString(tlsConfig, "ca", "secret", "name")
	key, _, _ := unstructured.NestedString(tlsConfig, "ca", "secret", "key")
	serverName, _, _ := unstructured.NestedString(tlsConfig, "serverName")
	if secretName == "" || key == "" || serverName == "" {
		t.Fatalf("%s tlsConfig %v: no CA Secret or serverName", kind, tlsConfig)
	}
	secret := &corev1.Secret{}
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secretName}, secret); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data[key]) {
		t.Fatalf("Secret %s key %s holds no CA", secretName, key)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
}

func ready(probe string) bool {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + probe + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

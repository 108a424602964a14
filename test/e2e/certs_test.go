package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/plumbing/webhookcert"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// webhookServerName is the name the API server verifies the webhook certificate for.
const webhookServerName = localcluster.WebhookService + "." + localcluster.ChartNamespace + ".svc"

// admissionProbe sends a server-side dry-run create through both webhooks every interval, and
// counts the attempts and the failures (a refused or undefaulted object).
type admissionProbe struct {
	mu                 sync.Mutex
	attempts, failures int
	errors             []string
}

func (p *admissionProbe) run(ctx context.Context, interval time.Duration) {
	for ctx.Err() == nil {
		nhc := testutil.NewNHC("e2e-admission-probe")
		nhc.Spec.MinHealthy = nil // the defaulting webhook sets it
		err := k8s.Create(ctx, nhc, client.DryRunAll)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.attempts++
		if err != nil || nhc.Spec.MinHealthy == nil {
			p.failures++
			p.errors = append(p.errors, fmt.Sprintf("%s: %v (minHealthy %v)", time.Now().Format(time.TimeOnly), err, nhc.Spec.MinHealthy))
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

func (p *admissionProbe) result() (int, int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts, p.failures, append([]string(nil), p.errors...)
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return fmt.Sprintf("%x", sum[:6])
}

// servedCertificate returns the certificate the webhook server on port serves for the Service name.
func servedCertificate(port int) (*x509.Certificate, error) {
	ip, err := localcluster.HostIP()
	if err != nil {
		return nil, err
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)),
		&tls.Config{ServerName: webhookServerName, InsecureSkipVerify: true}) //nolint:gosec // verified below, as the API server does
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

var _ = Describe("The self-managed webhook certificate", func() {
	It("is made, served, written into the webhook configurations and renewed, CA included, without interrupting admission", func(ctx SpecContext) {
		// A fresh install with short lifetimes: the certificate lives 1m and is renewed when 15s are
		// left (after 45s, with the same CA), the CA lives 80s and is renewed after 65s, with a new
		// certificate.
		Expect(cluster.ResetWebhookCertificate(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(cluster.ResetWebhookCertificate(ctx)).To(Succeed()) }) // after the managers stopped
		lifetimes := []string{"--leader-election-id=e2e-certs", "--webhook-cert-validity=1m", "--webhook-ca-validity=80s"}
		replicas := []*localcluster.Manager{startManager(localcluster.ManagerOptions{Args: lifetimes}), startManager(localcluster.ManagerOptions{Args: lifetimes})}

		probeCtx, stopProbe := context.WithCancel(ctx)
		probe := &admissionProbe{}
		done := make(chan struct{})
		go func() { defer close(done); probe.run(probeCtx, 200*time.Millisecond) }()
		DeferCleanup(func() { stopProbe(); <-done })

		servedCerts, signingCAs := map[string]bool{}, map[string]bool{}
		maxBundle := 0
		start := time.Now()
		Eventually(func(g Gomega) {
			// The Secret and the webhook configuration, read one after the other: a renewal may
			// write both between the two reads (the configuration follows the Secret within
			// milliseconds), so a pair that disagrees is read again until it agrees, for at most 5s.
			secret := &corev1.Secret{}
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			Eventually(func() bool {
				Expect(k8s.Get(ctx, client.ObjectKey{Namespace: localcluster.ChartNamespace, Name: localcluster.WebhookSecret}, secret)).To(Succeed())
				Expect(k8s.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-validating"}, v)).To(Succeed())
				return bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, secret.Data["ca.crt"])
			}).WithTimeout(5*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(), "the CA bundle is injected as the Secret holds it")
			cas := webhookcert.Certificates(secret.Data["ca.crt"])
			g.Expect(cas).NotTo(BeEmpty())
			signingCAs[fingerprint(cas[0])] = true
			maxBundle = max(maxBundle, len(cas))

			// What the API server trusts right now, and what each replica serves right now: the
			// served certificate must verify for the Service name at every sample.
			pool := x509.NewCertPool()
			Expect(pool.AppendCertsFromPEM(v.Webhooks[0].ClientConfig.CABundle)).To(BeTrue())
			for _, r := range replicas {
				served, err := servedCertificate(r.WebhookPort)
				Expect(err).NotTo(HaveOccurred())
				_, err = served.Verify(x509.VerifyOptions{DNSName: webhookServerName, Roots: pool})
				Expect(err).NotTo(HaveOccurred(), "replica on port %d serves %s, which the webhook configuration's CA bundle does not verify", r.WebhookPort, fingerprint(served))
				servedCerts[fingerprint(served)] = true
			}
			g.Expect(signingCAs).To(HaveLen(2), "the CA was renewed")
			g.Expect(servedCerts).To(HaveLen(3), "the first certificate, a renewal with the same CA and one with the new CA were served")
		}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(maxBundle).To(BeNumerically(">=", 2), "the previous CA stayed trusted after the renewal")
		stopProbe()
		<-done

		attempts, failures, errs := probe.result()
		AddReportEntry("certificate rotation", fmt.Sprintf("%d certificates and %d CAs within %s; %d admission requests, %d failed",
			len(servedCerts), len(signingCAs), time.Since(start).Round(time.Second), attempts, failures))
		Expect(attempts).To(BeNumerically(">", 100))
		Expect(failures).To(BeZero(), "admission was interrupted:\n%s", strings.Join(errs, "\n"))
	})
})

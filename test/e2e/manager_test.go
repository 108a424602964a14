package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

const leaseNamespace = localcluster.ChartNamespace

// startManager runs the manager binary with the chart's arguments, as the chart's ServiceAccount,
// with its leader Lease in the chart's namespace, and waits until it is ready and serves admission
// through the webhook Service. Its output goes to the GinkgoWriter, and to o.Output when set.
func startManager(o localcluster.ManagerOptions) *localcluster.Manager {
	o.Binary = managerBinary
	if o.Output == nil {
		o.Output = GinkgoWriter
	} else {
		o.Output = io.MultiWriter(GinkgoWriter, o.Output)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := cluster.StartReady(ctx, o)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if !m.Exited() {
			_ = m.Stop(30 * time.Second)
		}
	})
	return m
}

// selfSignedPair returns a serving certificate for the webhook Service and its private key, PEM
// encoded.
func selfSignedPair() (crt, key []byte) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: webhookServerName}, DNSNames: []string{webhookServerName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(k)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// waitListening waits until something accepts connections at url; the metrics server starts
// alongside the probes, not before them.
func waitListening(client *http.Client, url string) {
	Eventually(func() error {
		resp, err := client.Get(url)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func get(client *http.Client, url, token string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var insecureClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed metrics certificate
}}

// serviceAccountToken creates a service account, optionally allowed to read /metrics, and returns a
// token for it.
func serviceAccountToken(ctx context.Context, name string, mayReadMetrics bool) string {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	Expect(k8s.Create(ctx, sa)).To(Succeed())
	if mayReadMetrics {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}
		Expect(k8s.Create(ctx, role)).To(Succeed())
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}},
		})).To(Succeed())
	}
	cs, err := kubernetes.NewForConfig(cluster.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// scraper returns a function that reads the manager's metrics as a client allowed to (a new
// ServiceAccount of that name, bound to a metrics-reader role).
func scraper(ctx context.Context, m *localcluster.Manager, name string) func() string {
	token := serviceAccountToken(ctx, name, true)
	url := "https://" + m.MetricsAddr + "/metrics"
	waitListening(insecureClient, url)
	return func() string {
		code, body := get(insecureClient, url, token)
		Expect(code).To(Equal(http.StatusOK))
		return body
	}
}

var _ = Describe("The manager binary", func() {
	It("runs out of cluster from a kubeconfig, reports healthy and ready, and serves the webhooks", func(ctx SpecContext) {
		m := startManager(localcluster.ManagerOptions{Args: []string{"--leader-election-id=e2e-webhooks"}})
		code, _ := get(http.DefaultClient, "http://"+m.ProbeAddr+"/healthz", "")
		Expect(code).To(Equal(http.StatusOK))

		// A rule only the webhook can check (the template kind's scope) proves the webhook answers.
		nhc := testutil.NewNHC("e2e-webhook")
		nhc.Spec.RemediationTemplate.Namespace = ""
		err := k8s.Create(ctx, nhc)
		Expect(err).To(MatchError(And(ContainSubstring(`admission webhook "vnodehealthcheck.kb.io" denied the request`),
			ContainSubstring("spec.remediationTemplate.namespace"))))

		// Defaulting runs too.
		nhc = testutil.NewNHC("e2e-defaulted")
		nhc.Spec.MinHealthy = nil
		Expect(k8s.Create(ctx, nhc)).To(Succeed())
		Expect(nhc.Spec.MinHealthy).NotTo(BeNil())
		Expect(k8s.Delete(ctx, nhc)).To(Succeed())
	})

	It("serves metrics over HTTPS only to authenticated and authorized clients", func(ctx SpecContext) {
		m := startManager(localcluster.ManagerOptions{Args: []string{"--leader-election-id=e2e-metrics"}})
		url := "https://" + m.MetricsAddr + "/metrics"
		waitListening(insecureClient, url)

		code, _ := get(insecureClient, url, "")
		Expect(code).To(Equal(http.StatusUnauthorized))

		code, _ = get(insecureClient, url, serviceAccountToken(ctx, "metrics-denied", false))
		Expect(code).To(Equal(http.StatusForbidden))

		code, body := get(insecureClient, url, serviceAccountToken(ctx, "metrics-reader", true))
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("controller_runtime_webhook_requests_total"))
	})

	It("serves plain HTTP metrics with --metrics-secure=false", func() {
		m := startManager(localcluster.ManagerOptions{Args: []string{"--leader-election-id=e2e-plain", "--metrics-secure=false"}})
		waitListening(http.DefaultClient, "http://"+m.MetricsAddr+"/metrics")
		code, body := get(http.DefaultClient, "http://"+m.MetricsAddr+"/metrics", "")
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("go_goroutines"))
	})

	It("with two replicas, lets one lead, hands over when the leader stops, and exits cleanly on SIGTERM", func(ctx SpecContext) {
		const id = "e2e-leader"
		holder := leaseHolder(ctx, id)

		first := startManager(localcluster.ManagerOptions{Args: []string{"--leader-election-id=" + id}})
		Eventually(holder).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		leader := holder()

		standbyLog := gbytes.NewBuffer()
		second := startManager(localcluster.ManagerOptions{Args: []string{"--leader-election-id=" + id}, Output: standbyLog})
		// The standby contends for the same Lease, and the leader renews it after that.
		Eventually(standbyLog).WithTimeout(30*time.Second).Should(gbytes.Say(`Attempting to acquire leader lease.*`+regexp.QuoteMeta(leaseNamespace+"/"+id)),
			"the standby tries to take the lease")
		contending := time.Now()
		Eventually(leaseRenewed(ctx, id)).WithTimeout(10*time.Second).Should(BeTemporally(">", contending), "the leader renews the lease")
		Consistently(holder).WithTimeout(3*time.Second).Should(Equal(leader), "the standby must not take the lease while the leader renews it")

		start := time.Now()
		Expect(first.Stop(30*time.Second)).To(Succeed(), "SIGTERM must end the manager with exit code 0")
		// The leader releases its lease on shutdown, so the standby takes over without waiting for
		// the lease to expire (15s).
		Eventually(holder).WithTimeout(14 * time.Second).Should(And(Not(BeEmpty()), Not(Equal(leader))))
		GinkgoWriter.Printf("Leadership handed over %s after SIGTERM\n", time.Since(start))

		Expect(second.Stop(30 * time.Second)).To(Succeed())
	})

	It("with cert-manager's certificate, serves the webhooks only once the mounted certificate and key belong together, without exiting before", func() {
		// cert-manager mode: no --webhook-cert-secret; the kubelet mounted the certificate before
		// the container started, and a renewal mounted at that moment shows the new certificate
		// beside the previous key.
		dir := GinkgoT().TempDir()
		crt, key := selfSignedPair()
		_, previousKey := selfSignedPair()
		Expect(os.WriteFile(filepath.Join(dir, corev1.TLSCertKey), crt, 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, corev1.TLSPrivateKeyKey), previousKey, 0o600)).To(Succeed())
		out := gbytes.NewBuffer()
		m, err := cluster.StartManager(localcluster.ManagerOptions{Binary: managerBinary, Output: io.MultiWriter(GinkgoWriter, out),
			Args: []string{"--leader-election-id=e2e-certmanager", "--webhook-cert-secret=", "--webhook-cert-dir=" + dir}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = m.Stop(30 * time.Second) })
		probe := func(path string) func() int {
			return func() int {
				resp, err := http.Get("http://" + m.ProbeAddr + path)
				if err != nil {
					return 0
				}
				_ = resp.Body.Close()
				return resp.StatusCode
			}
		}

		// The witness: the manager read the pair and decided to wait; it is alive and not ready.
		Eventually(out).WithTimeout(30*time.Second).Should(gbytes.Say("Waiting for the mounted webhook certificate and key to load as a pair"),
			"the manager waits for the key that belongs to the certificate")
		Eventually(probe("/healthz")).WithTimeout(10 * time.Second).Should(Equal(http.StatusOK))
		Expect(probe("/readyz")()).NotTo(Equal(http.StatusOK), "not ready while its webhook server cannot serve")
		Expect(m.Exited()).To(BeFalse())

		// The key follows, as one rename.
		tmp := filepath.Join(dir, ".tls.key.tmp")
		Expect(os.WriteFile(tmp, key, 0o600)).To(Succeed())
		Expect(os.Rename(tmp, filepath.Join(dir, corev1.TLSPrivateKeyKey))).To(Succeed())
		Eventually(probe("/readyz")).WithTimeout(10*time.Second).Should(Equal(http.StatusOK), "ready once the pair loads")
		Expect(out).To(gbytes.Say("Webhook certificate mounted, starting the webhook server"))
		Expect(m.Exited()).To(BeFalse())
	})

	It("runs without the webhook server when --enable-webhooks=false", func(ctx SpecContext) {
		m := startManager(localcluster.ManagerOptions{Args: []string{"--leader-election-id=e2e-nowebhook", "--enable-webhooks=false"}})
		code, _ := get(http.DefaultClient, "http://"+m.ProbeAddr+"/readyz", "")
		Expect(code).To(Equal(http.StatusOK))
	})
})

// Package webhookcert lets the operator manage its own webhook certificate, for clusters without
// cert-manager: open-policy-agent/cert-controller's rotator generates a CA and a serving
// certificate into a Secret (created empty by the Helm chart), renews them before they expire, and
// writes the CA into the webhook configurations' caBundle. The Secret is mounted as the webhook
// server's certificate folder; the webhook server starts once the kubelet has mounted the
// certificate, and the pod becomes ready then.
//
// The operator reads that Secret and those webhook configurations by name only: the rotator's
// informers ask for them with a metadata.name field selector (see nameScoped), which RBAC rules
// with resourceNames authorize, so the operator needs no right to list or watch other Secrets or
// webhook configurations.
package webhookcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Options name what the rotator manages.
type Options struct {
	// Secret holds the CA and the serving certificate (ca.crt, ca.key, tls.crt, tls.key).
	Secret types.NamespacedName
	// Service is the webhook Service; the certificate is valid for <name>.<namespace>.svc.
	Service types.NamespacedName
	// Mutating and Validating name the webhook configurations that get the CA.
	Mutating, Validating string
	// CertDir is where the Secret is mounted.
	CertDir string
	// CertValidity and CAValidity are the lifetimes of the serving certificate and of the CA;
	// zero: DefaultCertValidity and DefaultCAValidity.
	CertValidity, CAValidity time.Duration
}

// Certificate lifetimes: the CA for ten years, the serving certificate for one. Both are renewed
// when a quarter of the certificate's lifetime is left (about 90 days).
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
	// MinCertValidity is the shortest certificate lifetime allowed: renewal must leave the kubelet
	// time to update the mounted Secret before the previous certificate expires.
	MinCertValidity = time.Minute
	// shortCertValidity is the lifetime below which a renewal may outrun the kubelet's update of the
	// mounted Secret (up to a couple of minutes): a warning is logged.
	shortCertValidity = time.Hour
	// maxCheckInterval is how often, at most, the rotator checks whether renewal is due.
	maxCheckInterval = 12 * time.Hour
)

// Validate checks the lifetimes.
func (o Options) Validate() error {
	cert, ca := o.lifetimes()
	if cert < MinCertValidity {
		return fmt.Errorf("--webhook-cert-validity %s: must be at least %s", cert, MinCertValidity)
	}
	if ca < cert {
		return fmt.Errorf("--webhook-ca-validity %s: must be at least --webhook-cert-validity (%s)", ca, cert)
	}
	return nil
}

func (o Options) lifetimes() (cert, ca time.Duration) {
	cert, ca = o.CertValidity, o.CAValidity
	if cert == 0 {
		cert = DefaultCertValidity
	}
	if ca == 0 {
		ca = DefaultCAValidity
	}
	return cert, ca
}

// AddRotator adds the certificate rotator to the manager. It runs on every replica (each one serves
// webhooks and waits for its own mounted certificate); concurrent updates of the Secret are
// resolved by conflicts. ready is closed once the certificate is mounted.
//
// A renewed CA is written first in the Secret's ca.crt, followed by the earlier CAs that have not
// expired, and the whole bundle goes into the webhook configurations: the API server keeps trusting
// the certificate the webhook server still serves until the kubelet has mounted the new one, so a
// CA renewal never interrupts admission (a serving certificate renewal keeps the CA anyway).
func AddRotator(mgr ctrl.Manager, o Options, ready chan struct{}) error {
	if err := o.Validate(); err != nil {
		return err
	}
	cert, ca := o.lifetimes()
	if cert < shortCertValidity {
		mgr.GetLogger().WithName("webhook-cert").Info("Short webhook certificate lifetime: the kubelet must mount each renewal within a quarter of it, or the webhook server serves an expired certificate",
			"validity", cert, "renewedBefore", cert/4)
	}
	dns := fmt.Sprintf("%s.%s.svc", o.Service.Name, o.Service.Namespace)
	writer := &bundlingClient{Client: mgr.GetClient(), reader: mgr.GetAPIReader(), secret: o.Secret, now: time.Now}
	// The rotator builds its own cache from GetConfig(); its informers list and watch only our
	// objects.
	config := nameScoped(mgr.GetConfig(), map[string]string{
		"/api/v1/namespaces/" + o.Secret.Namespace + "/secrets":                 o.Secret.Name,
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations":   o.Mutating,
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": o.Validating,
	})
	return rotator.AddRotator(managerWithClient{Manager: mgr, client: writer, config: config}, &rotator.CertRotator{
		SecretKey:      o.Secret,
		CertDir:        o.CertDir,
		CAName:         "node-healthcheck-webhook-ca",
		CAOrganization: "medik8s",
		DNSName:        dns,
		ExtraDNSNames:  []string{dns + ".cluster.local"},
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: o.Mutating, Type: rotator.Mutating},
			{Name: o.Validating, Type: rotator.Validating},
		},
		FieldOwner:             "node-healthcheck",
		CaCertDuration:         ca,
		ServerCertDuration:     cert,
		LookaheadInterval:      cert / 4,
		RotationCheckFrequency: min(maxCheckInterval, cert/16),
		ControllerName:         "webhook-cert-rotator",
	})
}

// managerWithClient hands the rotator a client and a configuration of our choice: the rotator
// writes through GetClient() and builds its cache from GetConfig().
type managerWithClient struct {
	ctrl.Manager
	client client.Client
	config *rest.Config
}

func (m managerWithClient) GetClient() client.Client { return m.client }

func (m managerWithClient) GetConfig() *rest.Config { return m.config }

// nameScoped returns a copy of cfg whose list and watch requests of the given collections (URL
// paths, without the API server's path prefix, mapped to an object name) ask only for the object of
// that name, with the field selector metadata.name=<name>. The API server authorizes such a request
// like a get of that name, so RBAC rules with resourceNames allow it. cert-controller's rotator
// creates its cache itself and takes no per-object options, hence a transport.
func nameScoped(cfg *rest.Config, names map[string]string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &nameScopedTransport{next: next, names: names}
	})
	return cfg
}

type nameScopedTransport struct {
	next  http.RoundTripper
	names map[string]string
}

func (t *nameScopedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return t.next.RoundTrip(req)
	}
	for collection, name := range t.names {
		if !strings.HasSuffix(req.URL.Path, collection) {
			continue
		}
		selector := "metadata.name=" + name
		query := req.URL.Query()
		if existing := query.Get("fieldSelector"); existing != "" {
			selector = existing + "," + selector
		}
		query.Set("fieldSelector", selector)
		req = req.Clone(req.Context())
		req.URL.RawQuery = query.Encode()
		break
	}
	return t.next.RoundTrip(req)
}

// bundlingClient keeps the CAs that have not expired in the certificate Secret's ca.crt when the
// rotator writes a new one.
type bundlingClient struct {
	client.Client
	reader client.Reader
	secret types.NamespacedName
	now    func() time.Time
}

func (c *bundlingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if s, ok := obj.(*corev1.Secret); ok && client.ObjectKeyFromObject(s) == c.secret && s.Data != nil {
		current := &corev1.Secret{}
		if err := c.reader.Get(ctx, c.secret, current); err != nil {
			return fmt.Errorf("reading the certificate Secret before renewing: %w", err)
		}
		s.Data[caCertKey] = Bundle(s.Data[caCertKey], current.Data[caCertKey], c.now())
	}
	return c.Client.Update(ctx, obj, opts...)
}

const caCertKey = "ca.crt"

// Bundle returns the CA bundle to write: the certificates of next (the first one signs the serving
// certificate), then those of previous, without duplicates and without the ones that expired
// before now.
func Bundle(next, previous []byte, now time.Time) []byte {
	var out []byte
	seen := map[string]bool{}
	for _, cert := range append(Certificates(next), Certificates(previous)...) {
		if seen[string(cert.Raw)] || now.After(cert.NotAfter) {
			continue
		}
		seen[string(cert.Raw)] = true
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})...)
	}
	return out
}

// Certificates returns the certificates of a PEM bundle, in order; other blocks, and certificates
// that do not parse, are skipped.
func Certificates(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, cert)
		}
	}
}

// keyPairWait bounds how long a delayed webhook server waits for a certificate and private key that
// belong together before it starts anyway (and reports the error).
const keyPairWait = 30 * time.Second

// Delayed returns a webhook server that starts serving once ready is closed and the certificate and
// key in certDir (tls.crt, tls.key) load as a pair: before ready the files do not exist yet, and a
// renewal mounted between the rotator's check and the server's first read, or a read that straddles
// the kubelet's switch to the new files, gives a certificate beside the previous key for a moment;
// a server starting on that would exit, and the pod restart. With cert-manager's certificate, ready
// is closed from the start and only the pair is waited for.
func Delayed(s webhook.Server, ready <-chan struct{}, certDir string) webhook.Server {
	return &delayed{Server: s, ready: ready, poll: 200 * time.Millisecond, wait: keyPairWait, load: func() error {
		_, err := tls.LoadX509KeyPair(filepath.Join(certDir, corev1.TLSCertKey), filepath.Join(certDir, corev1.TLSPrivateKeyKey))
		return err
	}}
}

type delayed struct {
	webhook.Server
	ready      <-chan struct{}
	poll, wait time.Duration
	load       func() error
}

func (d *delayed) Start(ctx context.Context) error {
	select {
	case <-d.ready:
	case <-ctx.Done():
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	deadline := time.Now().Add(d.wait)
	for err, first := d.load(), true; err != nil; err, first = d.load(), false {
		if time.Now().After(deadline) {
			log.Error(err, "The mounted webhook certificate and key still do not load as a pair; starting the webhook server anyway", "waited", d.wait)
			break
		}
		if first {
			log.Info("Waiting for the mounted webhook certificate and key to load as a pair", "error", err.Error(), "atMost", d.wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d.poll):
		}
	}
	log.Info("Webhook certificate mounted, starting the webhook server")
	return d.Server.Start(ctx)
}

// Package webhookcert lets the operator manage its own webhook certificate, for clusters without
// cert-manager: open-policy-agent/cert-controller's rotator generates a CA and a serving
// certificate into a Secret (created empty by the Helm chart), renews them before they expire, and
// writes the CA into the webhook configurations' caBundle. The Secret is mounted as the webhook
// server's certificate folder; the webhook server starts once the kubelet has mounted the
// certificate, and the pod becomes ready then.
package webhookcert

import (
	"context"
	"fmt"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
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
}

// Certificate lifetimes: the CA for ten years, the serving certificate for one, renewed 90 days
// before it expires (the rotator checks every 12 hours).
const (
	caValidity     = 10 * 365 * 24 * time.Hour
	certValidity   = 365 * 24 * time.Hour
	renewLookahead = 90 * 24 * time.Hour
)

// AddRotator adds the certificate rotator to the manager. It runs on every replica (each one serves
// webhooks and waits for its own mounted certificate); concurrent updates of the Secret are
// resolved by conflicts. ready is closed once the certificate is mounted.
func AddRotator(mgr ctrl.Manager, o Options, ready chan struct{}) error {
	dns := fmt.Sprintf("%s.%s.svc", o.Service.Name, o.Service.Namespace)
	return rotator.AddRotator(mgr, &rotator.CertRotator{
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
		FieldOwner:         "node-healthcheck",
		CaCertDuration:     caValidity,
		ServerCertDuration: certValidity,
		LookaheadInterval:  renewLookahead,
		ControllerName:     "webhook-cert-rotator",
	})
}

// Delayed returns a webhook server that starts serving once ready is closed: before that its
// certificate files do not exist yet and the server could not start.
func Delayed(s webhook.Server, ready <-chan struct{}) webhook.Server {
	return &delayed{Server: s, ready: ready}
}

type delayed struct {
	webhook.Server
	ready <-chan struct{}
}

func (d *delayed) Start(ctx context.Context) error {
	select {
	case <-d.ready:
	case <-ctx.Done():
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Webhook certificate mounted, starting the webhook server")
	return d.Server.Start(ctx)
}

// Package selftest checks, from inside a cluster, that an installed operator works: the
// NodeHealthCheck API is served, the admission webhooks default and admit a valid NodeHealthCheck and
// refuse an invalid one (server-side dry runs: nothing is stored), and the metrics endpoint answers.
// The chart's `helm test` hook runs it as `manager self-test`.
package selftest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// ValidatingWebhookName is the validating webhook's name, which refusals quote.
const ValidatingWebhookName = "vnodehealthcheck.kb.io"

// Options say what to check.
type Options struct {
	// Name is the name of the NodeHealthChecks tried in dry runs.
	Name string
	// Webhooks checks that the admission webhooks default, admit and refuse; off when the chart runs
	// without them.
	Webhooks bool
	// MetricsURL is the metrics endpoint; empty: not checked.
	MetricsURL string
	// MetricsToken authenticates to the metrics endpoint (the pod's ServiceAccount token); empty:
	// no authentication (plain HTTP metrics).
	MetricsToken string
	// MetricsCA is the PEM of the CAs the metrics endpoint's certificate is verified against (the
	// chart's webhook certificate's CA, which the manager serves on the metrics port too); empty:
	// the system's roots.
	MetricsCA []byte
	// MetricsServerName is the name the metrics endpoint's certificate is verified for (the webhook
	// Service's, which that certificate holds); empty: the URL's host.
	MetricsServerName string
	// MetricsInsecure skips verifying the metrics endpoint's certificate (the manager's self-signed
	// one, without webhooks); the token still authenticates the client. Only where asked for.
	MetricsInsecure bool
}

// Run performs the checks against the API server of cfg, printing a line for each, and returns an
// error naming every check that failed.
func Run(ctx context.Context, cfg *rest.Config, o Options, out io.Writer) error {
	scheme := runtime.NewScheme()
	if err := remediationv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	var failed []string
	check := func(what string, err error) {
		if err != nil {
			failed = append(failed, what)
			fmt.Fprintf(out, "FAIL %s: %v\n", what, err)
			return
		}
		fmt.Fprintf(out, "ok   %s\n", what)
	}

	check("the NodeHealthCheck API is served", served(dc))
	if o.Webhooks {
		check("a valid NodeHealthCheck is defaulted and admitted (dry run)", admitted(ctx, c, o.Name))
		check("an invalid NodeHealthCheck is refused by the validating webhook (dry run)", refused(ctx, c, o.Name))
	}
	if o.MetricsURL != "" {
		check("the metrics endpoint answers", metrics(ctx, o))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d check(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

func served(dc discovery.DiscoveryInterface) error {
	resources, err := dc.ServerResourcesForGroupVersion(remediationv1alpha1.GroupVersion.String())
	if err != nil {
		return err
	}
	for _, r := range resources.APIResources {
		if r.Name == "nodehealthchecks" {
			return nil
		}
	}
	return fmt.Errorf("%s does not serve nodehealthchecks", remediationv1alpha1.GroupVersion)
}

// sample is a NodeHealthCheck that admission accepts, without a budget so the defaulting shows.
func sample(name string) *remediationv1alpha1.NodeHealthCheck {
	return &remediationv1alpha1.NodeHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: remediationv1alpha1.NodeHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "node-role.kubernetes.io/worker", Operator: metav1.LabelSelectorOpExists}}},
			// A template need not exist to be admitted; the kind's remediator need not be installed.
			RemediationTemplate: &corev1.ObjectReference{APIVersion: "self-node-remediation.medik8s.io/v1alpha1",
				Kind: "SelfNodeRemediationTemplate", Namespace: "default", Name: "self-node-remediation-automatic-strategy-template"},
		},
	}
}

func admitted(ctx context.Context, c client.Client, name string) error {
	n := sample(name)
	if err := c.Create(ctx, n, client.DryRunAll); err != nil {
		return err
	}
	if n.Spec.MinHealthy == nil && n.Spec.MaxUnhealthy == nil {
		return errors.New("admitted without a budget: the defaulting webhook did not run")
	}
	return nil
}

func refused(ctx context.Context, c client.Client, name string) error {
	// An empty selector: the CRD admits it, the validating webhook does not.
	n := sample(name)
	n.Spec.Selector = metav1.LabelSelector{}
	err := c.Create(ctx, n, client.DryRunAll)
	switch {
	case err == nil:
		return errors.New("a NodeHealthCheck with an empty selector was admitted: the validating webhook did not run")
	case !strings.Contains(err.Error(), ValidatingWebhookName):
		return fmt.Errorf("refused, but not by the validating webhook %s: %w", ValidatingWebhookName, err)
	}
	return nil
}

// metricsTimeout bounds one metrics request.
const metricsTimeout = 10 * time.Second

func metrics(ctx context.Context, o Options) error {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.MetricsURL, nil)
	if err != nil {
		return err
	}
	if o.MetricsToken != "" {
		req.Header.Set("Authorization", "Bearer "+o.MetricsToken)
	}
	tlsConfig, err := metricsTLS(o)
	if err != nil {
		return err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", o.MetricsURL, resp.Status)
	}
	if !strings.Contains(string(body), "controller_runtime_") {
		return fmt.Errorf("%s answered without the manager's metrics", o.MetricsURL)
	}
	return nil
}

// metricsTLS is how the metrics endpoint's certificate is verified: against MetricsCA for
// MetricsServerName, or not at all with MetricsInsecure.
func metricsTLS(o Options) (*tls.Config, error) {
	if o.MetricsInsecure {
		return &tls.Config{InsecureSkipVerify: true}, nil //nolint:gosec // asked for: the manager's self-signed metrics certificate; the token authenticates
	}
	c := &tls.Config{ServerName: o.MetricsServerName, MinVersion: tls.VersionTLS12}
	if len(o.MetricsCA) > 0 {
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(o.MetricsCA) {
			return nil, errors.New("the metrics CA holds no PEM certificate")
		}
	}
	return c, nil
}

// TokenFile is where a pod finds its ServiceAccount token.
const TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// ReadToken reads a token file; a missing file is no token.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

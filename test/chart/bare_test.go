package chart

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/opsettings"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// With no values at all the chart installs on a bare cluster, one that serves neither cert-manager
// nor the Prometheus operator, and admission works: the manager, run with the chart's arguments as
// the chart's ServiceAccount (only the chart's RBAC), makes its own webhook certificate into the
// chart's Secret, injects its CA into the chart's webhook configurations and, once the certificate is
// mounted (localcluster mirrors the Secret as the kubelet would), answers the API server through the
// chart's webhook Service: an invalid NodeHealthCheck is refused by the webhook, a valid one is
// defaulted and admitted. (TestInstallUpgradeUninstall installs the same defaults where cert-manager's
// CRDs are served.)
func TestDefaultInstallOnABareCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	bin := managerBinary(t)
	lc, err := localcluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lc.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scheme := testutil.Scheme()
	k8s, err := client.New(lc.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	groups, err := discovery.NewDiscoveryClientForConfigOrDie(lc.Config).ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == "cert-manager.io" || g.Name == "monitoring.coreos.com" {
			t.Fatalf("the cluster is not bare: it serves %s", g.Name)
		}
	}

	saKubeconfig, err := lc.InstallChart(nil)
	if err != nil {
		t.Fatalf("installing the chart with no values on a bare cluster: %v", err)
	}
	log := &bytes.Buffer{}
	m, err := lc.StartManager(localcluster.ManagerOptions{Binary: bin, Output: log})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := m.Stop(30 * time.Second); err != nil {
				t.Errorf("manager exit: %v", err)
			}
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("manager (args %v):\n%s", m.Args, log.String())
		}
	})
	for _, a := range []string{"--webhook-cert-secret=node-healthcheck/nhc-node-healthcheck-webhook-cert", "--enable-webhooks=true"} {
		if !slices.Contains(m.Args, a) {
			t.Fatalf("the chart's defaults on a bare cluster do not run the manager with %s: %v", a, m.Args)
		}
	}

	secret := &corev1.Secret{}
	waitFor(t, "the operator to fill the chart's certificate Secret", func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: localcluster.WebhookSecret}, secret) == nil &&
			len(secret.Data["tls.crt"]) > 0 && len(secret.Data["ca.crt"]) > 0
	})
	waitFor(t, "the CA in both of the chart's webhook configurations", func() bool {
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
		validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		return k8s.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-mutating"}, mutating) == nil &&
			k8s.Get(ctx, client.ObjectKey{Name: "nhc-node-healthcheck-validating"}, validating) == nil &&
			bytes.Equal(mutating.Webhooks[0].ClientConfig.CABundle, secret.Data["ca.crt"]) &&
			bytes.Equal(validating.Webhooks[0].ClientConfig.CABundle, secret.Data["ca.crt"])
	})
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	// A rule only the webhook checks (the template kind's scope) shows that the webhook answers.
	invalid := testutil.NewNHC("bare-invalid")
	invalid.Spec.RemediationTemplate.Namespace = ""
	err = k8s.Create(ctx, invalid)
	if err == nil || !strings.Contains(err.Error(), `admission webhook "vnodehealthcheck.kb.io" denied the request`) ||
		!strings.Contains(err.Error(), "spec.remediationTemplate.namespace") {
		t.Errorf("an NHC only the webhook refuses: got %v, want the webhook's refusal", err)
	}
	valid := testutil.NewNHC("bare-valid")
	valid.Spec.MinHealthy = nil
	if err := k8s.Create(ctx, valid); err != nil {
		t.Fatalf("a valid NHC through the webhooks: %v", err)
	}
	if valid.Spec.MinHealthy == nil {
		t.Error("the defaulting webhook did not set minHealthy")
	}

	waitFor(t, "the leader to publish its settings in the chart's ConfigMap", func() bool {
		cm := &corev1.ConfigMap{}
		if k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "nhc-node-healthcheck-settings"}, cm) != nil {
			return false
		}
		s, err := opsettings.Parse(cm.Data)
		return err == nil && s.LeaseNamespace == "medik8s-leases" && s.ReturningNodeGrace == time.Minute && s.MaxClockSkew == 10*time.Second &&
			cm.Labels[opsettings.Label] == "true"
	})

	stop()
	// No remediator is installed, so nothing grants the operator its template kind (test.medik8s.io):
	// reading the valid NodeHealthCheck's template is refused, as it should be. Nothing else may be.
	var refused []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") && !strings.Contains(line, `in API group \"test.medik8s.io\"`) {
			refused = append(refused, line)
		}
	}
	if len(refused) > 0 {
		t.Errorf("the manager was refused something:\n%s", strings.Join(refused, "\n"))
	}
	readsOnlyByName(t, saKubeconfig)
}

// readsOnlyByName checks, as the chart's ServiceAccount, that the chart's RBAC lets the operator
// read its certificate Secret and its webhook configurations only by name: a list or watch with a
// metadata.name field selector for them is allowed (what the manager's informers send), any other
// list is forbidden. So the manager that just ran without a refusal read nothing else.
func readsOnlyByName(t *testing.T, saKubeconfig string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", saKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	}
	lists := []struct {
		what    string
		list    func(metav1.ListOptions) error
		allowed string
	}{
		{"Secrets in the release namespace", func(o metav1.ListOptions) error {
			_, err := cs.CoreV1().Secrets(namespace).List(ctx, o)
			return err
		}, localcluster.WebhookSecret},
		{"validating webhook configurations", func(o metav1.ListOptions) error {
			_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, o)
			return err
		}, "nhc-node-healthcheck-validating"},
		{"mutating webhook configurations", func(o metav1.ListOptions) error {
			_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, o)
			return err
		}, "nhc-node-healthcheck-mutating"},
	}
	for _, l := range lists {
		if err := l.list(byName(l.allowed)); err != nil {
			t.Errorf("listing %s by the name %s: %v", l.what, l.allowed, err)
		}
		for _, o := range []metav1.ListOptions{{}, byName("sh.helm.release.v1.nhc.v1")} {
			if err := l.list(o); !apierrors.IsForbidden(err) {
				t.Errorf("listing %s with field selector %q: got %v, want forbidden", l.what, o.FieldSelector, err)
			}
		}
	}
	w, err := cs.CoreV1().Secrets(namespace).Watch(ctx, byName(localcluster.WebhookSecret))
	if err != nil {
		t.Errorf("watching the certificate Secret by name: %v", err)
	} else {
		w.Stop()
	}
	if _, err := cs.CoreV1().Secrets(namespace).Watch(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("watching every Secret of the release namespace: got %v, want forbidden", err)
	}
}

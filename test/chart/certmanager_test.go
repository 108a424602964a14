package chart

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
)

// strictDecode decodes an object into a Go API type as the API server's strict field validation
// does: a field the type does not have, or one spelt in another case, is an error. (The API server
// itself only warns about, and drops, unknown fields of custom resources by default, and encoding/json
// matches field names regardless of case, so sigs.k8s.io/yaml.UnmarshalStrict would take isCa for
// isCA.)
func strictDecode(u *unstructured.Unstructured, into any) error {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(raw, into)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// decodeStrict decodes a rendered object with strictDecode, failing the test on any error: this is
// where a misspelt field of the chart's cert-manager objects is caught.
func decodeStrict(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if u == nil {
		t.Fatal("object missing")
	}
	if err := strictDecode(u, into); err != nil {
		t.Fatalf("%s %s does not decode strictly into cert-manager's types: %v", u.GetKind(), u.GetName(), err)
	}
}

// The strict decoding is not void: a misspelt field fails it, whether unknown or in the wrong case.
func TestDecodeStrictRefusesAMisspeltField(t *testing.T) {
	ca := mustRender(t, nil, certManagerAPI...).get("Certificate", "nhc-node-healthcheck-webhook-ca")
	if ca == nil {
		t.Fatal("CA Certificate missing")
	}
	if err := strictDecode(ca, &certmanagerv1.Certificate{}); err != nil {
		t.Fatalf("the rendered CA Certificate: %v", err)
	}
	for _, field := range []string{"isCa", "isCertificateAuthority"} {
		misspelt := ca.DeepCopy()
		if err := unstructured.SetNestedField(misspelt.Object, true, "spec", field); err != nil {
			t.Fatal(err)
		}
		if err := strictDecode(misspelt, &certmanagerv1.Certificate{}); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("a Certificate with spec.%s: got %v, want an error naming it", field, err)
		}
	}
}

// webhookWiring is what the rest of the release says the webhook certificate must be: the Service
// the webhook configurations call, the Secret the Deployment mounts as the webhook server's
// certificate, and the CA each webhook configuration injects.
type webhookWiring struct {
	serviceDNSNames []string
	mountedSecret   string
	injectFrom      []string
	// secretVolumes are the Secrets of every volume of the operator's pods.
	secretVolumes []string
}

func wiring(t *testing.T, r rendered) webhookWiring {
	t.Helper()
	var w webhookWiring
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		name := map[string]string{"MutatingWebhookConfiguration": "nhc-node-healthcheck-mutating", "ValidatingWebhookConfiguration": "nhc-node-healthcheck-validating"}[kind]
		cfg := r.get(kind, name)
		if cfg == nil {
			t.Fatalf("%s missing", kind)
		}
		w.injectFrom = append(w.injectFrom, cfg.GetAnnotations()["cert-manager.io/inject-ca-from"])
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		for _, h := range hooks {
			svc, _, _ := unstructured.NestedStringMap(h.(map[string]any), "clientConfig", "service")
			if svc["name"] == "" || r.get("Service", svc["name"]) == nil {
				t.Fatalf("%s calls Service %v, which the release does not create", kind, svc)
			}
			names := []string{svc["name"] + "." + svc["namespace"] + ".svc", svc["name"] + "." + svc["namespace"] + ".svc.cluster.local"}
			if w.serviceDNSNames != nil && !slices.Equal(w.serviceDNSNames, names) {
				t.Fatalf("the webhooks call two Services: %v and %v", w.serviceDNSNames, names)
			}
			w.serviceDNSNames = names
		}
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.get("Deployment", "nhc-node-healthcheck").Object, d); err != nil {
		t.Fatal(err)
	}
	certDir := ""
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--webhook-cert-dir="); ok {
			certDir = v
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
		if v.Secret != nil {
			w.secretVolumes = append(w.secretVolumes, v.Secret.SecretName)
		}
	}
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == certDir && volumes[m.Name].Secret != nil {
			w.mountedSecret = volumes[m.Name].Secret.SecretName
		}
	}
	if w.mountedSecret == "" {
		t.Fatalf("no Secret is mounted at the webhook certificate folder %q", certDir)
	}
	return w
}

// The chart's own CA with cert-manager: a self-signed Issuer signs a CA Certificate (isCA), whose
// Secret backs a CA Issuer, which signs the serving Certificate for the webhook Service; the CA
// injector injects the CA Certificate, so a renewal of the serving certificate never changes what the
// API server trusts, and the CA keeps its key when renewed. Every object decodes strictly into
// cert-manager's Go types.
func TestCertManagerCAChain(t *testing.T) {
	r := mustRender(t, nil, certManagerAPI...)
	w := wiring(t, r)

	selfSigned := &certmanagerv1.Issuer{}
	decodeStrict(t, r.get("Issuer", "nhc-node-healthcheck-selfsigned"), selfSigned)
	if selfSigned.Spec.SelfSigned == nil || selfSigned.Spec.CA != nil {
		t.Errorf("the root issuer must be self-signed: %+v", selfSigned.Spec)
	}

	ca := &certmanagerv1.Certificate{}
	decodeStrict(t, r.get("Certificate", "nhc-node-healthcheck-webhook-ca"), ca)
	if !ca.Spec.IsCA {
		t.Error("the CA Certificate must have isCA: true")
	}
	if want := (cmmeta.IssuerReference{Name: selfSigned.Name, Kind: "Issuer", Group: "cert-manager.io"}); ca.Spec.IssuerRef != want {
		t.Errorf("the CA is issued by %+v, want the self-signed Issuer %+v", ca.Spec.IssuerRef, want)
	}
	if ca.Spec.CommonName == "" || len(ca.Spec.CommonName) > 64 {
		t.Errorf("CA common name %q", ca.Spec.CommonName)
	}
	if ca.Spec.PrivateKey == nil || ca.Spec.PrivateKey.RotationPolicy != certmanagerv1.RotationPolicyNever {
		t.Errorf("the CA must keep its key when renewed, so that certificates it signed stay valid: %+v", ca.Spec.PrivateKey)
	}
	if ca.Spec.Duration == nil || ca.Spec.Duration.Duration != 87600*time.Hour {
		t.Errorf("CA duration %v, want certManager.caDuration's default 87600h", ca.Spec.Duration)
	}

	caIssuer := &certmanagerv1.Issuer{}
	decodeStrict(t, r.get("Issuer", "nhc-node-healthcheck-webhook-ca"), caIssuer)
	if caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName != ca.Spec.SecretName || caIssuer.Spec.SelfSigned != nil {
		t.Errorf("the CA Issuer must sign with the CA Certificate's Secret %q: %+v", ca.Spec.SecretName, caIssuer.Spec)
	}

	serving := &certmanagerv1.Certificate{}
	decodeStrict(t, r.get("Certificate", "nhc-node-healthcheck-webhook"), serving)
	if serving.Spec.IsCA {
		t.Error("the serving certificate must not be a CA")
	}
	if want := (cmmeta.IssuerReference{Name: caIssuer.Name, Kind: "Issuer", Group: "cert-manager.io"}); serving.Spec.IssuerRef != want {
		t.Errorf("the serving certificate is issued by %+v, want the CA Issuer %+v", serving.Spec.IssuerRef, want)
	}
	if !slices.Equal(serving.Spec.DNSNames, w.serviceDNSNames) {
		t.Errorf("serving certificate names %v, want the webhook Service's %v", serving.Spec.DNSNames, w.serviceDNSNames)
	}
	if !slices.Contains(serving.Spec.Usages, certmanagerv1.UsageServerAuth) {
		t.Errorf("serving certificate usages %v lack server auth", serving.Spec.Usages)
	}
	if serving.Spec.PrivateKey == nil || serving.Spec.PrivateKey.RotationPolicy != certmanagerv1.RotationPolicyAlways {
		t.Errorf("the serving certificate gets a new key at each renewal: %+v", serving.Spec.PrivateKey)
	}
	if serving.Spec.Duration == nil || serving.Spec.Duration.Duration != 2160*time.Hour ||
		serving.Spec.RenewBefore == nil || serving.Spec.RenewBefore.Duration != 360*time.Hour {
		t.Errorf("serving certificate duration %v, renewBefore %v; want 2160h, 360h", serving.Spec.Duration, serving.Spec.RenewBefore)
	}

	if serving.Spec.SecretName != w.mountedSecret {
		t.Errorf("the Deployment mounts Secret %q as the webhook certificate, the serving Certificate writes %q", w.mountedSecret, serving.Spec.SecretName)
	}
	if slices.Contains(w.secretVolumes, ca.Spec.SecretName) {
		t.Errorf("the CA's Secret %q (its private key) is mounted in the operator's pods", ca.Spec.SecretName)
	}
	for _, from := range w.injectFrom {
		if from != namespace+"/"+ca.Name {
			t.Errorf("cert-manager.io/inject-ca-from %q, want the CA Certificate %s/%s (its Secret's ca.crt is the CA itself)", from, namespace, ca.Name)
		}
	}
}

// A user's issuer signs the serving Certificate; the chart then creates no CA of its own and injects
// the CA from the serving Certificate's Secret (ca.crt, the issuer's CA).
func TestCertManagerWithAnIssuerRef(t *testing.T) {
	for _, ref := range []map[string]any{
		{"name": "corp-ca", "kind": "ClusterIssuer"},
		{"name": "team-ca", "kind": "Issuer", "group": "cert-manager.io"},
	} {
		r := mustRender(t, map[string]any{"certManager": map[string]any{"issuerRef": ref}}, certManagerAPI...)
		w := wiring(t, r)
		for _, k := range r.kinds() {
			if strings.HasPrefix(k, "Issuer/") || k == "Certificate/nhc-node-healthcheck-webhook-ca" {
				t.Errorf("%v: with an issuerRef the chart creates no issuer or CA of its own, yet %s", ref, k)
			}
		}
		serving := &certmanagerv1.Certificate{}
		decodeStrict(t, r.get("Certificate", "nhc-node-healthcheck-webhook"), serving)
		want := cmmeta.IssuerReference{Name: ref["name"].(string), Kind: ref["kind"].(string)}
		if g, ok := ref["group"].(string); ok {
			want.Group = g
		}
		if serving.Spec.IssuerRef != want {
			t.Errorf("issuerRef %+v, want %+v", serving.Spec.IssuerRef, want)
		}
		if !slices.Equal(serving.Spec.DNSNames, w.serviceDNSNames) || serving.Spec.SecretName != w.mountedSecret {
			t.Errorf("serving certificate %v in %q, want %v in the mounted %q", serving.Spec.DNSNames, serving.Spec.SecretName, w.serviceDNSNames, w.mountedSecret)
		}
		for _, from := range w.injectFrom {
			if from != namespace+"/"+serving.Name {
				t.Errorf("cert-manager.io/inject-ca-from %q, want the serving Certificate %s/%s", from, namespace, serving.Name)
			}
		}
	}
}

func TestCertManagerLifetimes(t *testing.T) {
	r := mustRender(t, map[string]any{"certManager": map[string]any{"duration": "720h", "renewBefore": "240h", "caDuration": "43800h"}}, certManagerAPI...)
	ca, serving := &certmanagerv1.Certificate{}, &certmanagerv1.Certificate{}
	decodeStrict(t, r.get("Certificate", "nhc-node-healthcheck-webhook-ca"), ca)
	decodeStrict(t, r.get("Certificate", "nhc-node-healthcheck-webhook"), serving)
	if ca.Spec.Duration.Duration != 43800*time.Hour || serving.Spec.Duration.Duration != 720*time.Hour || serving.Spec.RenewBefore.Duration != 240*time.Hour {
		t.Errorf("CA %v, serving %v renewed %v before expiry", ca.Spec.Duration, serving.Spec.Duration, serving.Spec.RenewBefore)
	}
}

package v1alpha1_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	webhookv1alpha1 "github.com/medik8s/node-healthcheck/internal/webhook/v1alpha1"
)

// undecodableObject returns the NodeHealthCheck as an unstructured object with the value at the
// path, which its Go type cannot hold.
func undecodableObject(nhc *remediationv1alpha1.NodeHealthCheck, value any, path ...string) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nhc)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(remediationv1alpha1.GroupVersion.String())
	u.SetKind("NodeHealthCheck")
	return u, unstructured.SetNestedField(u.Object, value, path...)
}

// undecodable is undecodableObject for specs.
func undecodable(nhc *remediationv1alpha1.NodeHealthCheck, value any, path ...string) *unstructured.Unstructured {
	u, err := undecodableObject(nhc, value, path...)
	Expect(err).NotTo(HaveOccurred())
	return u
}

// bypassLabel marks the objects both webhooks skip while storeUndecodable stores one.
const bypassLabel = "test.medik8s.io/bypass-webhooks"

// setWebhooksBypass makes both webhook configurations on the webhook's control plane skip objects
// labelled bypassLabel (on), or match every object again, as installed (off).
func setWebhooksBypass(ctx context.Context, on bool) {
	selector := &metav1.LabelSelector{}
	if on {
		selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: bypassLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}
	}
	for _, installed := range webhookEnv.WebhookInstallOptions.MutatingWebhooks {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(webhookClient.Get(ctx, client.ObjectKeyFromObject(installed), cfg)).To(Succeed())
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ObjectSelector = selector
		}
		Expect(webhookClient.Update(ctx, cfg)).To(Succeed())
	}
	for _, installed := range webhookEnv.WebhookInstallOptions.ValidatingWebhooks {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(webhookClient.Get(ctx, client.ObjectKeyFromObject(installed), cfg)).To(Succeed())
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ObjectSelector = selector
		}
		Expect(webhookClient.Update(ctx, cfg)).To(Succeed())
	}
}

// storeUndecodable stores u on the webhook's control plane, whose CRD keeps only its structure, as
// an object stored before the CRD had bounds or while the webhook was off: for a moment both
// webhooks skip objects labelled bypassLabel. It returns once both webhooks see every object again,
// labelled or not.
func storeUndecodable(ctx context.Context, u *unstructured.Unstructured) {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[bypassLabel] = "true"
	u.SetLabels(labels)

	setWebhooksBypass(ctx, true)
	Eventually(func() error { return webhookClient.Create(ctx, u.DeepCopy()) }).WithContext(ctx).Should(Succeed())
	setWebhooksBypass(ctx, false)
	Eventually(func(g Gomega) {
		probe := testutil.NewNHC(uniqueName("probe"))
		probe.Labels = map[string]string{bypassLabel: "true"}
		probe.Spec.MinHealthy = nil
		g.Expect(webhookClient.Create(ctx, probe, client.DryRunAll)).To(Succeed())
		g.Expect(probe.Spec.MinHealthy).To(Equal(&remediationv1alpha1.DefaultMinHealthy), "the defaulting webhook runs")
		probe = testutil.NewNHC(uniqueName("probe"))
		probe.Labels = map[string]string{bypassLabel: "true"}
		probe.Spec.MinHealthy = intOrStr("200%")
		g.Expect(causeFields(webhookClient.Create(ctx, probe, client.DryRunAll))).To(ConsistOf("spec.minHealthy"), "the validating webhook runs")
	}).WithContext(ctx).Should(Succeed())
}

// warningClient returns a client for the webhook's control plane that records the warnings it gets.
func warningClient() (client.Client, *warningRecorder) {
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(webhookEnv.Config)
	cfg.WarningHandlerWithContext = rec
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c, rec
}

// stored reads the NodeHealthCheck as unstructured, which works whether or not it decodes.
func stored(ctx context.Context, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(remediationv1alpha1.GroupVersion.WithKind("NodeHealthCheck"))
	Expect(webhookClient.Get(ctx, client.ObjectKey{Name: name}, u)).To(Succeed())
	return u
}

// withSpec returns u with the spec of nhc.
func withSpec(u *unstructured.Unstructured, nhc *remediationv1alpha1.NodeHealthCheck) *unstructured.Unstructured {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&nhc.Spec)
	Expect(err).NotTo(HaveOccurred())
	u = u.DeepCopy()
	u.Object["spec"] = spec
	return u
}

var _ = Describe("A stored NodeHealthCheck that does not decode (webhook)", func() {
	DescribeTable("admits an update that fixes it, with a warning, and the result decodes",
		func(ctx SpecContext, value any, path ...string) {
			nhc := testutil.NewNHC(uniqueName("undecodable"))
			storeUndecodable(ctx, undecodable(nhc, value, path...))
			Expect(webhookClient.Get(ctx, client.ObjectKeyFromObject(nhc), &remediationv1alpha1.NodeHealthCheck{})).NotTo(Succeed(),
				"the stored object must not decode")

			c, rec := warningClient()
			Expect(c.Update(ctx, withSpec(stored(ctx, nhc.Name), nhc))).To(Succeed())
			Expect(rec.warnings).To(ContainElement(And(
				ContainSubstring("NodeHealthCheck "+nhc.Name+": the stored version could not be decoded"),
				ContainSubstring(strings.Join(path, ".")+": "),
			)))

			fixed := &remediationv1alpha1.NodeHealthCheck{}
			Expect(webhookClient.Get(ctx, client.ObjectKeyFromObject(nhc), fixed)).To(Succeed())
			Expect(fixed.Spec).To(Equal(nhc.Spec))
			Expect(webhookClient.Delete(ctx, fixed)).To(Succeed())
		},
		Entry("an int-or-string beyond int32", int64(99999999999), "spec", "minHealthy"),
		Entry("a duration beyond time.Duration", "99999999999h", "spec", "healthyDelay"),
	)

	It("refuses an update to another invalid object, naming the field", func(ctx SpecContext) {
		nhc := testutil.NewNHC(uniqueName("undecodable"))
		storeUndecodable(ctx, undecodable(nhc, "99999999999h", "spec", "stormCooldownDuration"))
		DeferCleanup(func(ctx SpecContext) { Expect(webhookClient.Delete(ctx, stored(ctx, nhc.Name))).To(Succeed()) })

		invalid := nhc.DeepCopy()
		invalid.Spec.MinHealthy = intOrStr("200%")
		err := webhookClient.Update(ctx, withSpec(stored(ctx, nhc.Name), invalid))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(causeFields(err)).To(ConsistOf("spec.minHealthy"))

		By("an update that leaves it undecodable is refused too, saying why")
		u := stored(ctx, nhc.Name)
		u.SetAnnotations(map[string]string{"example.com/touched": "true"})
		err = webhookClient.Update(ctx, u)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`invalid duration "99999999999h"`))
		Expect(stored(ctx, nhc.Name).GetAnnotations()).To(BeEmpty())
	})

	It("allows deleting it, with a warning", func(ctx SpecContext) {
		nhc := testutil.NewNHC(uniqueName("undecodable"))
		storeUndecodable(ctx, undecodable(nhc, int64(2147483648), "spec", "minHealthy"))

		c, rec := warningClient()
		Expect(c.Delete(ctx, stored(ctx, nhc.Name))).To(Succeed())
		Expect(rec.warnings).To(ContainElement(And(
			ContainSubstring("NodeHealthCheck "+nhc.Name+": the stored version could not be decoded"),
			ContainSubstring("spec.minHealthy: "),
		)))
		Eventually(func() error {
			return webhookClient.Get(ctx, client.ObjectKeyFromObject(nhc), &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": remediationv1alpha1.GroupVersion.String(), "kind": "NodeHealthCheck"}})
		}).WithContext(ctx).Should(Satisfy(apierrors.IsNotFound))
	})
})

// admissionRequest returns a request of the operation for the NodeHealthCheck named "nhc" with the
// given objects (nil: none), each a typed NodeHealthCheck or unstructured.
func admissionRequest(t *testing.T, op admissionv1.Operation, newObj, oldObj any) admission.Request {
	t.Helper()
	raw := func(obj any) runtime.RawExtension {
		if obj == nil {
			return runtime.RawExtension{}
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			obj = u.Object
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      metav1.GroupVersionKind{Group: remediationv1alpha1.GroupVersion.Group, Version: remediationv1alpha1.GroupVersion.Version, Kind: "NodeHealthCheck"},
		Name:      "nhc",
		Operation: op,
		Object:    raw(newObj),
		OldObject: raw(oldObj),
	}}
}

// TestUndecodableStoredObject feeds the validating webhook raw admission requests whose stored
// object does not decode, and checks that requests with objects that decode are handled as before.
func TestUndecodableStoredObject(t *testing.T) {
	s := runtime.NewScheme()
	if err := remediationv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	withTypeMeta := func(nhc *remediationv1alpha1.NodeHealthCheck) *remediationv1alpha1.NodeHealthCheck {
		nhc.APIVersion, nhc.Kind = remediationv1alpha1.GroupVersion.String(), "NodeHealthCheck"
		return nhc
	}
	valid := withTypeMeta(testutil.NewNHC("nhc"))
	invalid := valid.DeepCopy()
	invalid.Spec.MinHealthy = intOrStr("200%")
	remediating := valid.DeepCopy()
	remediating.Status.UnhealthyNodes = []remediationv1alpha1.UnhealthyNode{{Name: "worker-1", Remediations: []remediationv1alpha1.Remediation{{
		Resource: corev1.ObjectReference{APIVersion: "test.medik8s.io/v1alpha1", Kind: "TestRemediation", Name: "worker-1"}, Started: metav1.Now()}}}}
	redirected := valid.DeepCopy()
	redirected.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}

	// A stored object with a duration Go cannot hold, and one that is also remediating.
	brokenDuration := undecodableIn(t, valid, "99999999999h", "spec", "healthyDelay")
	brokenRemediating := undecodableIn(t, remediating, int64(99999999999), "spec", "minHealthy")
	brokenStatus := brokenRemediating.DeepCopy()
	if err := unstructured.SetNestedField(brokenStatus.Object, "many", "status", "observedNodes"); err != nil {
		t.Fatal(err)
	}
	storedWarning := []string{"NodeHealthCheck nhc: the stored version could not be decoded (spec.healthyDelay: time: invalid duration",
		"the update was validated on its own"}

	for _, tc := range []struct {
		name            string
		op              admissionv1.Operation
		newObj, oldObj  any
		topology        string
		allowed         bool
		code            int32
		warning         []string // substrings of the one warning; nil: no warning
		causes          []string
		messageContains []string
	}{
		{name: "update fixing it: admitted on its own, with a warning", op: admissionv1.Update, newObj: valid, oldObj: brokenDuration,
			allowed: true, warning: storedWarning},
		{name: "update to an invalid object: refused with the field, and the warning", op: admissionv1.Update, newObj: invalid, oldObj: brokenDuration,
			code: http.StatusUnprocessableEntity, warning: storedWarning, causes: []string{"spec.minHealthy"}},
		{name: "update: the rules comparing with the stored version are skipped", op: admissionv1.Update, newObj: redirected, oldObj: brokenRemediating,
			allowed: true, warning: []string{"NodeHealthCheck nhc: the stored version could not be decoded (spec.minHealthy: "}},
		{name: "update: the create-time topology rule still applies", op: admissionv1.Update, newObj: valid, oldObj: brokenDuration,
			topology: webhookv1alpha1.ControlPlaneTopologyDualReplica, code: http.StatusForbidden, warning: storedWarning,
			messageContains: []string{"not supported on this cluster"}},
		{name: "update to an object that does not decode either: refused, naming the field", op: admissionv1.Update,
			newObj: undecodableIn(t, valid, "forever", "spec", "stormCooldownDuration"), oldObj: brokenDuration,
			code: http.StatusBadRequest, messageContains: []string{"NodeHealthCheck nhc cannot be decoded: spec.stormCooldownDuration: ", `"forever"`}},
		{name: "delete: allowed with a warning", op: admissionv1.Delete, oldObj: brokenDuration,
			allowed: true, warning: []string{"NodeHealthCheck nhc: the stored version could not be decoded (spec.healthyDelay: ", "deletion allowed: its status lists no running remediation"}},
		{name: "delete while the status lists running remediations: refused, as for a decodable object", op: admissionv1.Delete, oldObj: brokenRemediating,
			code: http.StatusForbidden, messageContains: []string{"remediation is running for node(s) worker-1"},
			warning: []string{"NodeHealthCheck nhc: the stored version could not be decoded (spec.minHealthy: "}},
		{name: "delete when the status does not decode either: allowed with a warning", op: admissionv1.Delete,
			oldObj:  brokenStatus,
			allowed: true, warning: []string{"the stored version could not be decoded", "deletion allowed without checking for running remediations"}},
		{name: "create of an object that does not decode: refused, naming the field", op: admissionv1.Create,
			newObj: undecodableIn(t, valid, int64(2147483648), "spec", "maxUnhealthy"),
			code:   http.StatusBadRequest, messageContains: []string{"NodeHealthCheck nhc cannot be decoded: spec.maxUnhealthy: ", "2147483648"}},

		// Unchanged when the stored object decodes.
		{name: "update of a remediating object redirecting it: refused", op: admissionv1.Update, newObj: redirected, oldObj: remediating,
			code: http.StatusUnprocessableEntity, causes: []string{"spec.selector"}},
		{name: "update to an invalid object: refused", op: admissionv1.Update, newObj: invalid, oldObj: valid,
			code: http.StatusUnprocessableEntity, causes: []string{"spec.minHealthy"}},
		{name: "update: admitted", op: admissionv1.Update, newObj: valid, oldObj: valid, allowed: true},
		{name: "delete of a remediating object: refused", op: admissionv1.Delete, oldObj: remediating,
			code: http.StatusForbidden, messageContains: []string{"remediation is running for node(s) worker-1"}},
		{name: "delete: allowed", op: admissionv1.Delete, oldObj: valid, allowed: true},
		{name: "create of an invalid object: refused", op: admissionv1.Create, newObj: invalid,
			code: http.StatusUnprocessableEntity, causes: []string{"spec.minHealthy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v := &webhookv1alpha1.Validator{Topology: &webhookv1alpha1.InfrastructureTopologyReader{
				Reader: stubReader{status: map[string]any{"controlPlaneTopology": tc.topology}}}}
			resp := webhookv1alpha1.ValidatingWebhook(s, v).Handle(context.Background(), admissionRequest(t, tc.op, tc.newObj, tc.oldObj))

			g.Expect(resp.UID).To(BeEquivalentTo("uid"))
			g.Expect(resp.Allowed).To(Equal(tc.allowed), "result: %+v", resp.Result)
			if !tc.allowed {
				g.Expect(resp.Result.Code).To(Equal(tc.code), "result: %+v", resp.Result)
			}
			var causes []string
			if resp.Result.Details != nil {
				for _, c := range resp.Result.Details.Causes {
					causes = append(causes, c.Field)
				}
			}
			g.Expect(causes).To(ConsistOf(tc.causes))
			for _, s := range tc.messageContains {
				g.Expect(resp.Result.Message).To(ContainSubstring(s))
			}
			if tc.warning == nil {
				g.Expect(resp.Warnings).To(BeEmpty())
				return
			}
			g.Expect(resp.Warnings).To(HaveLen(1))
			for _, w := range tc.warning {
				g.Expect(resp.Warnings[0]).To(ContainSubstring(w))
			}
		})
	}
}

// undecodableIn is undecodableObject for plain tests.
func undecodableIn(t *testing.T, nhc *remediationv1alpha1.NodeHealthCheck, value any, path ...string) *unstructured.Unstructured {
	t.Helper()
	u, err := undecodableObject(nhc, value, path...)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUndecodableWarningIsBrief checks that a long decode error is cut short in the warning.
func TestUndecodableWarningIsBrief(t *testing.T) {
	s := runtime.NewScheme()
	if err := remediationv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	old := undecodableIn(t, testutil.NewNHC("nhc"), strings.Repeat("9", 1000)+"h", "spec", "healthyDelay")
	resp := webhookv1alpha1.ValidatingWebhook(s, &webhookv1alpha1.Validator{}).Handle(context.Background(),
		admissionRequest(t, admissionv1.Delete, nil, old))
	if !resp.Allowed || len(resp.Warnings) != 1 {
		t.Fatalf("want allowed with one warning, got %+v", resp.AdmissionResponse)
	}
	if n := len([]rune(resp.Warnings[0])); n > 700 {
		t.Errorf("warning has %d characters, want a brief one: %q", n, resp.Warnings[0])
	}
	if !strings.Contains(resp.Warnings[0], "spec.healthyDelay: ") || !strings.Contains(resp.Warnings[0], "...") {
		t.Errorf("warning does not name the field and say it was cut: %q", resp.Warnings[0])
	}
}

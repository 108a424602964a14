package v1alpha1_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// postRaw creates a NodeHealthCheck from a raw JSON body, as a client that does not go through the Go
// types could send it (numbers such as 1e20 or 2147483648 that no typed client can produce), and
// returns the HTTP status code and, for a refusal, the API server's Status.
func postRaw(cfg *rest.Config, body string) (int, *metav1.Status) {
	hc, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	url := strings.TrimSuffix(cfg.Host, "/") + "/apis/" + remediationv1alpha1.GroupVersion.String() + "/nodehealthchecks"
	resp, err := hc.Post(url, "application/json", bytes.NewBufferString(body))
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	if resp.StatusCode == http.StatusCreated {
		return resp.StatusCode, nil
	}
	status := &metav1.Status{}
	Expect(json.Unmarshal(data, status)).To(Succeed(), "response: %s", data)
	return resp.StatusCode, status
}

// rawNHC returns a valid NodeHealthCheck as JSON, with spec fields replaced or added by the raw JSON
// fragments in fields (for example `"minHealthy": 1e20`).
func rawNHC(name string, fields ...string) string {
	spec := map[string]string{
		"selector":            `{}`,
		"remediationTemplate": `{"apiVersion":"test.medik8s.io/v1alpha1","kind":"TestRemediationTemplate","namespace":"default","name":"test-template"}`,
	}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, ":")
		spec[strings.Trim(k, `" `)] = v
	}
	if _, ok := spec["escalatingRemediations"]; ok {
		delete(spec, "remediationTemplate")
	}
	var parts []string
	for k, v := range spec {
		parts = append(parts, fmt.Sprintf("%q:%s", k, v))
	}
	return fmt.Sprintf(`{"apiVersion":%q,"kind":"NodeHealthCheck","metadata":{"name":%q},"spec":{%s}}`,
		remediationv1alpha1.GroupVersion.String(), name, strings.Join(parts, ","))
}

func rawStep(order string) string {
	return `[{"remediationTemplate":{"apiVersion":"test.medik8s.io/v1alpha1","kind":"TestRemediationTemplate","namespace":"default","name":"test-template"},"order":` +
		order + `,"timeout":"5m"}]`
}

// What the API server does with values that only raw JSON can carry, on the CRD alone (no webhook):
// each must be refused with the offending field's path, or stored in a form the Go types decode.
// The fuzz target FuzzRawJSON checks the same in process at many more inputs.
var _ = Describe("raw JSON on the CRD alone (no webhook)", func() {
	DescribeTable("refuses values the Go types cannot hold",
		func(ctx SpecContext, field, path string) {
			code, status := postRaw(celEnv.Config, rawNHC(uniqueName("raw"), field))
			Expect(code).To(Equal(http.StatusUnprocessableEntity), "status: %+v", status)
			Expect(status.Details).NotTo(BeNil())
			var fields []string
			for _, c := range status.Details.Causes {
				fields = append(fields, c.Field)
			}
			Expect(fields).To(ContainElement(path), "status: %+v", status)
		},
		// 2147483648 decodes as an int64, so the CEL bound sees it.
		Entry("minHealthy 2147483648", `"minHealthy": 2147483648`, "spec.minHealthy"),
		// 1e20 is beyond 2^53: not an integer to the OpenAPI check.
		Entry("minHealthy 1e20", `"minHealthy": 1e20`, "spec.minHealthy"),
		// 1e10 is a whole float64: an integer to OpenAPI, but CEL refuses a float as int-or-string.
		Entry("maxUnhealthy 1e10", `"maxUnhealthy": 1e10`, "spec.maxUnhealthy"),
		Entry("minHealthy as an eleven-digit string", `"minHealthy": "99999999999"`, "spec.minHealthy"),
		Entry("minHealthy as a string above 2147483647", `"minHealthy": "2147483648"`, "spec.minHealthy"),
		Entry("order 2147483648", `"escalatingRemediations": `+rawStep("2147483648"), "spec.escalatingRemediations[0].order"),
		Entry("order 1e20", `"escalatingRemediations": `+rawStep("1e20"), "spec.escalatingRemediations[0].order"),
		Entry("order 1e10", `"escalatingRemediations": `+rawStep("1e10"), "spec.escalatingRemediations[0].order"),
		// A whole float64 such as 3.0 or 1e3 passes OpenAPI's integer check, but CEL reads it as a float, not
		// an int, and the unique-orders rule fails to evaluate: refused, on the list.
		Entry("order 3.0", `"escalatingRemediations": `+rawStep("3.0"), "spec.escalatingRemediations"),
		Entry("order 1e3", `"escalatingRemediations": `+rawStep("1e3"), "spec.escalatingRemediations"),
		Entry("order 9223372036854775808", `"escalatingRemediations": `+rawStep("9223372036854775808"), "spec.escalatingRemediations[0].order"),
		Entry("healthyDelay that overflows time.Duration", `"healthyDelay": "99999999999h"`, "spec.healthyDelay"),
		Entry("stormCooldownDuration that overflows time.Duration as a sum", `"stormCooldownDuration": "2000000h2000000h"`, "spec.stormCooldownDuration"),
		Entry("unhealthy condition duration above a year", `"unhealthyConditions": [{"type":"Ready","status":"False","duration":"8761h"}]`, "spec.unhealthyConditions[0].duration"),
		Entry("escalation timeout that overflows", `"escalatingRemediations": [{"remediationTemplate":{"apiVersion":"test.medik8s.io/v1alpha1","kind":"TestRemediationTemplate","namespace":"default","name":"test-template"},"order":1,"timeout":"9999999999999999999ns"}]`,
			"spec.escalatingRemediations[0].timeout"),
	)

	DescribeTable("stores values the Go types hold, in a form they decode",
		func(ctx SpecContext, field string) {
			name := uniqueName("raw")
			code, status := postRaw(celEnv.Config, rawNHC(name, field))
			Expect(code).To(Equal(http.StatusCreated), "status: %+v", status)
			nhc := &remediationv1alpha1.NodeHealthCheck{}
			nhc.Name = name
			// The typed client decodes the stored object: this fails if it does not fit the Go types.
			Expect(celClient.Get(ctx, client.ObjectKey{Name: name}, nhc)).To(Succeed())
			Expect(celClient.Delete(ctx, nhc)).To(Succeed())
		},
		Entry("minHealthy 2147483647", `"minHealthy": 2147483647`),
		Entry("minHealthy \"2147483647\"", `"minHealthy": "2147483647"`),
		Entry("order -2147483648", `"escalatingRemediations": `+rawStep("-2147483648")),
		Entry("a healthyDelay of minus a year in seconds", `"healthyDelay": "-31536000s"`),
	)
})

package v1alpha1_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// refusal is what one layer must answer: a cause at field whose message contains says.
type refusal struct{ field, says string }

// A refusal names the offending value whichever layer refuses: the webhook (on the control plane
// whose CRD keeps only its structure) and the CRD alone (its CEL and OpenAPI rules, no webhook, as on
// a cluster whose webhook is down). Where both report the same field they say the same sentence; the
// order and timeout sentences are the public operator's (../shared/reference/upstream-behaviour.md,
// 2.1). The bodies are raw JSON, as kubectl sends them: a typed client never sends an empty list.
var _ = Describe("Refusals name the value, whichever layer refuses", func() {
	DescribeTable("on a real API server",
		func(ctx SpecContext, fields []string, webhook, cel []refusal) {
			body := func() string {
				return rawNHC(uniqueName("named"), append([]string{`"selector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}`}, fields...)...)
			}
			for _, l := range []struct {
				name string
				cfg  *rest.Config
				want []refusal
			}{{"the webhook", webhookEnv.Config, webhook}, {"CEL alone (no webhook)", celEnv.Config, cel}} {
				code, status := postRaw(l.cfg, body())
				Expect(code).To(Equal(http.StatusUnprocessableEntity), "%s: %+v", l.name, status)
				Expect(status.Details).NotTo(BeNil(), "%s: %+v", l.name, status)
				for _, w := range l.want {
					Expect(status.Details.Causes).To(ContainElement(And(
						HaveField("Field", w.field), HaveField("Message", ContainSubstring(w.says)))),
						"%s must name the value at %s: %s", l.name, w.field, status.Message)
				}
			}
		},
		Entry("a duplicated order", []string{`"escalatingRemediations": [` + rawStepOf("multi-a", "3", "5m") + `,` + rawStepOf("multi-b", "3", "10m") + `]`},
			[]refusal{{"spec.escalatingRemediations[1].order", "EscalatingRemediation Order must be unique: found duplicate order 3"}},
			[]refusal{{"spec.escalatingRemediations", "EscalatingRemediation Order must be unique: found duplicate order 3"}}),
		Entry("two duplicated orders", []string{`"escalatingRemediations": [` + rawStepOf("multi-a", "3", "5m") + `,` + rawStepOf("multi-b", "4", "5m") + `,` +
			rawStepWith(`{"apiVersion":"self-node-remediation.medik8s.io/v1alpha1","kind":"SelfNodeRemediationTemplate","namespace":"snr-system","name":"self-node-remediation-automatic-strategy-template"}`, "4", "5m") + `,` +
			rawStepWith(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"Metal3RemediationTemplate","namespace":"default","name":"metal3-template"}`, "3", "5m") + `]`},
			[]refusal{
				{"spec.escalatingRemediations[2].order", "EscalatingRemediation Order must be unique: found duplicate order 4"},
				{"spec.escalatingRemediations[3].order", "EscalatingRemediation Order must be unique: found duplicate order 3"},
			},
			[]refusal{{"spec.escalatingRemediations", "EscalatingRemediation Order must be unique: found duplicate orders [3, 4]"}}),
		Entry("a timeout under a minute", []string{`"escalatingRemediations": [` + rawStepOf("test-template", "1", "30s") + `]`},
			[]refusal{{"spec.escalatingRemediations[0].timeout", "EscalatingRemediation Timeout must be at least one minute: found timeout 30s"}},
			[]refusal{{"spec.escalatingRemediations[0].timeout", "EscalatingRemediation Timeout must be at least one minute: found timeout 30s"}}),
		Entry("an empty escalation list", []string{`"escalatingRemediations": []`},
			[]refusal{{"spec.escalatingRemediations", "Required value: a template is required: escalatingRemediations is empty"}},
			[]refusal{{"spec.escalatingRemediations", "Required value: a template is required: escalatingRemediations is empty"}}),
		Entry("a template kind without the Template suffix", []string{`"remediationTemplate": ` + rawRef("test.medik8s.io/v1alpha1", "Reboot", "test-template")},
			[]refusal{{"spec.remediationTemplate.kind", `kind must be a remediation kind followed by "Template", for example SelfNodeRemediationTemplate: found Reboot`}},
			[]refusal{{"spec.remediationTemplate.kind", `kind must be a remediation kind followed by "Template", for example SelfNodeRemediationTemplate: found Reboot`}}),
		Entry("an escalation step's template kind that is only the suffix", []string{`"escalatingRemediations": [` + rawStepWith(rawRef("test.medik8s.io/v1alpha1", "Template", "test-template"), "1", "5m") + `]`},
			[]refusal{{"spec.escalatingRemediations[0].remediationTemplate.kind", `kind must be a remediation kind followed by "Template", for example SelfNodeRemediationTemplate: found Template`}},
			[]refusal{{"spec.escalatingRemediations[0].remediationTemplate.kind", `kind must be a remediation kind followed by "Template", for example SelfNodeRemediationTemplate: found Template`}}),
		Entry("a template name too long", []string{`"remediationTemplate": ` + rawRef("test.medik8s.io/v1alpha1", "TestRemediationTemplate", strings.Repeat("n", 254))},
			[]refusal{{"spec.remediationTemplate.name", "name must be at most 253 characters: found 254"}},
			[]refusal{{"spec.remediationTemplate.name", "name must be at most 253 characters: found 254"}}),
		Entry("an escalation step's template namespace too long", []string{`"escalatingRemediations": [` +
			rawStepWith(`{"apiVersion":"test.medik8s.io/v1alpha1","kind":"TestRemediationTemplate","namespace":"`+strings.Repeat("s", 64)+`","name":"test-template"}`, "1", "5m") + `]`},
			[]refusal{{"spec.escalatingRemediations[0].remediationTemplate.namespace", "namespace must be at most 63 characters: found 64"}},
			[]refusal{{"spec.escalatingRemediations[0].remediationTemplate.namespace", "namespace must be at most 63 characters: found 64"}}),
		Entry("too many matchExpressions", []string{`"selector": {"matchExpressions": [` + repeatJSON(33, `{"key":"example.com/label-%d","operator":"Exists"}`) + `]}`},
			[]refusal{{"spec.selector.matchExpressions", "Too many: 33"}},
			[]refusal{{"spec.selector.matchExpressions", "must have at most 32 entries: found 33"}}),
		Entry("too many matchLabels", []string{`"selector": {"matchLabels": {` + repeatJSON(33, `"example.com/label-%d":"yes"`) + `}}`},
			[]refusal{{"spec.selector.matchLabels", "Too many: 33"}},
			[]refusal{{"spec.selector.matchLabels", "must have at most 32 entries: found 33"}}),
		Entry("a matchExpressions entry with too many values", []string{`"selector": {"matchExpressions": [{"key":"kubernetes.io/hostname","operator":"In","values":[` +
			repeatJSON(257, `"node-%d"`) + `]}]}`},
			[]refusal{{"spec.selector.matchExpressions[0].values", "Too many: 257"}},
			[]refusal{{"spec.selector.matchExpressions", `each entry must have at most 256 values: found more in the entries with key ["kubernetes.io/hostname"]`}}),

		// Rules on a single value: the API server names the value itself, before the message.
		Entry("a negative minHealthy", []string{`"minHealthy": -1`},
			[]refusal{{"spec.minHealthy", "Invalid value: -1: must not be negative"}},
			[]refusal{{"spec.minHealthy", "Invalid value: -1: must not be negative"}}),
		Entry("a maxInFlight of 0", []string{`"maxInFlight": 0`},
			[]refusal{{"spec.maxInFlight", "Invalid value: 0: must be at least 1"}},
			[]refusal{{"spec.maxInFlight", "Invalid value: 0: must be at least 1"}}),
		Entry(`a maxInFlight of "0%"`, []string{`"maxInFlight": "0%"`},
			[]refusal{{"spec.maxInFlight", `Invalid value: "0%": must be at least 1`}},
			[]refusal{{"spec.maxInFlight", `Invalid value: "0%"`}}),
		Entry("a failure domain without a topology key", []string{`"failureDomain": {"topologyKey": "", "maxUnhealthy": 1}`},
			[]refusal{{"spec.failureDomain.topologyKey", "Required value"}},
			[]refusal{{"spec.failureDomain.topologyKey", "Invalid value"}}),
		Entry("a failure domain bound of 0", []string{`"failureDomain": {"topologyKey": "topology.kubernetes.io/zone", "maxUnhealthy": 0}`},
			[]refusal{{"spec.failureDomain.maxUnhealthy", "Invalid value: 0: must be at least 1"}},
			[]refusal{{"spec.failureDomain.maxUnhealthy", "Invalid value: 0: must be at least 1"}}),
		Entry("a failure domain key that is no label key", []string{`"failureDomain": {"topologyKey": "not a key!", "maxUnhealthy": "25%"}`},
			[]refusal{{"spec.failureDomain.topologyKey", `Invalid value: "not a key!"`}},
			[]refusal{{"spec.failureDomain.topologyKey", `Invalid value: "not a key!"`}}),
		Entry(`a maxInFlight of "101%"`, []string{`"maxInFlight": "101%"`},
			[]refusal{{"spec.maxInFlight", `Invalid value: "101%"`}},
			[]refusal{{"spec.maxInFlight", `Invalid value: "101%"`}}),
		Entry("maxUnhealthy above 2147483647", []string{`"maxUnhealthy": "2147483648"`},
			[]refusal{{"spec.maxUnhealthy", `Invalid value: "2147483648": must be at most 2147483647`}},
			[]refusal{{"spec.maxUnhealthy", `Invalid value: "2147483648": must be at most 2147483647`}}),
		Entry("an order beyond 32 bits", []string{`"escalatingRemediations": [` + rawStepOf("test-template", "2147483648", "5m") + `]`},
			[]refusal{{"spec.escalatingRemediations[0].order", "Invalid value: 2147483648"}},
			[]refusal{{"spec.escalatingRemediations[0].order", "Invalid value: 2147483648"}}),
		Entry("a negative stormCooldownDuration", []string{`"stormCooldownDuration": "-1m"`},
			[]refusal{{"spec.stormCooldownDuration", `Invalid value: "-1m0s": must not be negative`}},
			[]refusal{{"spec.stormCooldownDuration", `Invalid value: "-1m"`}}),
		Entry("an unhealthy condition duration above a year", []string{`"unhealthyConditions": [{"type":"Ready","status":"False","duration":"8761h"}]`},
			[]refusal{{"spec.unhealthyConditions[0].duration", `Invalid value: "8761h0m0s": must be at most 8760h (365 days)`}},
			[]refusal{{"spec.unhealthyConditions[0].duration", `Invalid value: "8761h": must be at most 8760h (365 days)`}}),
	)
})

// rawRef is a remediation template reference in the default namespace, as raw JSON.
func rawRef(apiVersion, kind, name string) string {
	return fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"namespace":"default","name":%q}`, apiVersion, kind, name)
}

// rawStepOf is an escalation step of the TestRemediationTemplate template, as raw JSON.
func rawStepOf(template, order, timeout string) string {
	return rawStepWith(rawRef("test.medik8s.io/v1alpha1", "TestRemediationTemplate", template), order, timeout)
}

// rawStepWith is an escalation step with the template reference ref (raw JSON), as raw JSON.
func rawStepWith(ref, order, timeout string) string {
	return fmt.Sprintf(`{"remediationTemplate":%s,"order":%s,"timeout":%q}`, ref, order, timeout)
}

// repeatJSON joins n copies of format, each given its index.
func repeatJSON(n int, format string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(format, i)
	}
	return strings.Join(parts, ",")
}

// TestDuplicateOrderMessageReadsEveryStep: the CRD's duplicate-order message reads the steps by
// position (CEL on Kubernetes 1.30 has no index-aware list functions) and names each duplicated
// order at its first step, so it must read every position a first step can have, up to the
// second-to-last of the longest escalatingRemediations.
func TestDuplicateOrderMessageReadsEveryStep(t *testing.T) {
	v, err := loadCRDValidator()
	if err != nil {
		t.Fatal(err)
	}
	n := remediationv1alpha1.MaxEscalatingRemediations
	steps := make([]string, n)
	for i := range steps {
		order := i
		if i == n-1 {
			order = n - 2 // the last step repeats the order of the second-to-last
		}
		steps[i] = rawStepOf("multi-a", strconv.Itoa(order), "5m")
	}
	errs, err := v.validate(context.Background(), []byte(rawNHC("fuzz", `"escalatingRemediations": [`+strings.Join(steps, ",")+`]`)))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("EscalatingRemediation Order must be unique: found duplicate order %d", n-2)
	for _, e := range errs {
		if e.Field == "spec.escalatingRemediations" && e.Detail == want {
			return
		}
	}
	t.Fatalf("want %q at spec.escalatingRemediations, got %v", want, errs)
}

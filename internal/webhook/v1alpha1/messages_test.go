package v1alpha1_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// Each refusal names the offending value, as the public operator's message does (quoted beside each
// entry from ../shared/reference/upstream-behaviour.md, 2.1), and the field path besides; the order
// and timeout refusals say the public operator's sentence. refusals_test.go checks the CRD alone too.
var _ = Describe("Refusal messages (webhook)", func() {
	DescribeTable("name the offending value",
		func(ctx SpecContext, mutate func(*remediationv1alpha1.NodeHealthCheck), upstream string, want ...string) {
			n := testutil.NewNHC(uniqueName("msg"))
			mutate(n)
			err := webhookClient.Create(ctx, n, client.DryRunAll)
			Expect(err).To(HaveOccurred(), "upstream refuses it too: %s", upstream)
			for _, w := range want {
				Expect(err.Error()).To(ContainSubstring(w))
			}
		},
		Entry("a duplicated order", escalation(testutil.Step("multi-a", 2, time.Minute), testutil.Step("multi-b", 2, time.Minute)),
			"EscalatingRemediation Order must be unique: found duplicate order 2",
			"spec.escalatingRemediations[1].order: Duplicate value: 2", "EscalatingRemediation Order must be unique: found duplicate order 2"),
		Entry("a too-short timeout", escalation(testutil.Step("test-template", 1, 30*time.Second)),
			"EscalatingRemediation Timeout must be at least one minute: found timeout 30s",
			`spec.escalatingRemediations[0].timeout: Invalid value: "30s"`, "EscalatingRemediation Timeout must be at least one minute: found timeout 30s"),
		Entry("a missing template of a kind used twice", escalation(testutil.Step("multi-a", 1, time.Minute), testutil.Step("does-not-exist", 2, time.Minute)),
			"Using multiple templates of same kind is not supported for this template: duplicate template kind: TestRemediationTemplate",
			"spec.escalatingRemediations[1].remediationTemplate", "does-not-exist", "TestRemediationTemplate", "was not found"),
		Entry("a template kind used twice without multiple-templates support", escalation(testutil.Step("plain-a", 1, time.Minute), testutil.Step("plain-b", 2, time.Minute)),
			"Using multiple templates of same kind is not supported for this template: duplicate template kind: TestRemediationTemplate",
			"plain-b", "TestRemediationTemplate", remediationv1alpha1.MultipleTemplatesSupportAnnotation),
		Entry("a negative minHealthy", func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(-1); n.Spec.MinHealthy = &v },
			"minHealthy must not be negative: -1",
			"spec.minHealthy: Invalid value: -1"),
		Entry("a negative maxUnhealthy", func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromInt32(-2)
			n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, &v
		},
			"maxUnhealthy must not be negative: -2",
			"spec.maxUnhealthy: Invalid value: -2"),
		Entry("maxUnhealthy with MachineDeletionRemediationTemplate", func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, intOrStr("1")
			n.Spec.RemediationTemplate = ref("machine-deletion-remediation.medik8s.io/v1alpha1", remediationv1alpha1.MachineDeletionRemediationTemplateKind, "default", "mdr-template")
		},
			"maxUnhealthy can't be used with MachineDeletionRemediationTemplate",
			"spec.maxUnhealthy", "MachineDeletionRemediationTemplate"),
		Entry("a repair budget of no remediation", func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RepairBudget = &remediationv1alpha1.RepairBudget{MaxRemediations: 0, Window: metav1.Duration{Duration: time.Hour}}
		},
			"(an extension: no upstream message)",
			"spec.repairBudget.maxRemediations: Invalid value: 0", "between 1 and 100"),
		Entry("a repair budget without a window", func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RepairBudget = &remediationv1alpha1.RepairBudget{MaxRemediations: 3}
		},
			"(an extension: no upstream message)",
			`spec.repairBudget.window: Invalid value: "0s"`, "more than 0"),
		Entry("a template kind without the Template suffix", func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Kind = "Reboot" },
			"(upstream: the CRD's kind pattern)",
			`spec.remediationTemplate.kind: Invalid value: "Reboot"`),
		Entry("an empty selector", func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.Selector = metav1.LabelSelector{} },
			"Selector is mandatory",
			"spec.selector", "selector is mandatory"),
		Entry("a selector key that is not a label key", func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.Selector.MatchExpressions[0].Key = "not a key!" },
			"Invalid selector: <parser error>",
			"spec.selector.matchExpressions[0].key", `"not a key!"`),
		Entry("a selector In without values", func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.Selector.MatchExpressions[0].Operator = metav1.LabelSelectorOpIn
		},
			"Invalid selector: <parser error>",
			"spec.selector.matchExpressions[0].values"),
	)
})

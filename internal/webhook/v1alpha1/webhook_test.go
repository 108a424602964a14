package v1alpha1_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

const snrNamespace = "snr-system"

// createTemplates creates the remediation templates the specs reference.
func createTemplates(ctx context.Context, c client.Client) {
	Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: snrNamespace}})).To(Succeed())
	multi := map[string]string{remediationv1alpha1.MultipleTemplatesSupportAnnotation: "true"}
	for _, t := range []struct {
		apiVersion, kind, namespace, name string
		annotations                       map[string]string
	}{
		{"test.medik8s.io/v1alpha1", "TestRemediationTemplate", testutil.TemplateNamespace, "test-template", nil},
		{"test.medik8s.io/v1alpha1", "TestRemediationTemplate", testutil.TemplateNamespace, "plain-a", nil},
		{"test.medik8s.io/v1alpha1", "TestRemediationTemplate", testutil.TemplateNamespace, "plain-b", nil},
		{"test.medik8s.io/v1alpha1", "TestRemediationTemplate", testutil.TemplateNamespace, "multi-a", multi},
		{"test.medik8s.io/v1alpha1", "TestRemediationTemplate", testutil.TemplateNamespace, "multi-b", multi},
		{"test.medik8s.io/v1alpha1", "TestRemediationTemplate", testutil.TemplateNamespace, "multi-c", multi},
		{"test.medik8s.io/v1alpha1", "ClusterTestRemediationTemplate", "", "cluster-template", nil},
		{"self-node-remediation.medik8s.io/v1alpha1", "SelfNodeRemediationTemplate", snrNamespace, "self-node-remediation-automatic-strategy-template", nil},
		{"infrastructure.cluster.x-k8s.io/v1beta1", "Metal3RemediationTemplate", testutil.TemplateNamespace, "metal3-template", nil},
		{"machine-deletion-remediation.medik8s.io/v1alpha1", "MachineDeletionRemediationTemplate", testutil.TemplateNamespace, "mdr-template", nil},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(t.apiVersion)
		u.SetKind(t.kind)
		u.SetNamespace(t.namespace)
		u.SetName(t.name)
		u.SetAnnotations(t.annotations)
		Expect(unstructured.SetNestedMap(u.Object, map[string]any{"spec": map[string]any{}}, "spec", "template")).To(Succeed())
		Expect(c.Create(ctx, u)).To(Succeed())
	}
}

func ref(apiVersion, kind, namespace, name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name}
}

func intOrStr(s string) *intstr.IntOrString { v := intstr.Parse(s); return &v }
func dur(d time.Duration) *metav1.Duration  { return &metav1.Duration{Duration: d} }

// causeFields returns the field paths of a refusal.
func causeFields(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		// The API server adds a cause without a field when OpenAPI errors kept CEL rules from
		// running ("some validation rules were not checked"); it names no violation.
		if c.Field != "" && c.Field != "<nil>" {
			fields = append(fields, c.Field)
		}
	}
	return fields
}

// rule is one admission rule: how to break a valid NodeHealthCheck, and the field paths that the
// webhook and CEL (with the CRD's OpenAPI constraints) report. A nil list means that layer does not
// enforce the rule and admits the object.
type rule struct {
	mutate  func(*remediationv1alpha1.NodeHealthCheck)
	webhook []string
	cel     []string
}

func escalation(steps ...remediationv1alpha1.EscalatingRemediation) func(*remediationv1alpha1.NodeHealthCheck) {
	return func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.RemediationTemplate = nil
		n.Spec.EscalatingRemediations = steps
	}
}

func both(paths ...string) rule { return rule{webhook: paths, cel: paths} }

var rules = map[string]rule{
	// The public operator's "Selector is mandatory"; the CRD admits it (see selector_test.go).
	"an empty selector (every node, control-plane nodes too)": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.Selector = metav1.LabelSelector{} },
		webhook: []string{"spec.selector"},
	},
	"no template": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate = nil },
		webhook: []string{"spec.remediationTemplate"}, cel: []string{"spec.remediationTemplate"},
	},
	"both remediationTemplate and escalatingRemediations": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.EscalatingRemediations = []remediationv1alpha1.EscalatingRemediation{testutil.Step("test-template", 1, time.Minute)}
		},
		webhook: []string{"spec.escalatingRemediations"}, cel: []string{"spec.escalatingRemediations"},
	},
	"template without apiVersion": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.APIVersion = "" },
		webhook: []string{"spec.remediationTemplate.apiVersion"}, cel: []string{"spec.remediationTemplate.apiVersion"},
	},
	"template without kind": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Kind = "" },
		webhook: []string{"spec.remediationTemplate.kind"}, cel: []string{"spec.remediationTemplate.kind"},
	},
	"template without name": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Name = "" },
		webhook: []string{"spec.remediationTemplate.name"}, cel: []string{"spec.remediationTemplate.name"},
	},
	"template kind without Template suffix": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Kind = "TestRemediation" },
		webhook: []string{"spec.remediationTemplate.kind"}, cel: []string{"spec.remediationTemplate.kind"},
	},
	"template kind that is only the suffix": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Kind = "Template" },
		webhook: []string{"spec.remediationTemplate.kind"}, cel: []string{"spec.remediationTemplate.kind"},
	},
	"namespaced template kind without namespace": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.RemediationTemplate.Namespace = "" },
		webhook: []string{"spec.remediationTemplate.namespace"},
	},
	"cluster-scoped template kind with a namespace": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate = ref("test.medik8s.io/v1alpha1", "ClusterTestRemediationTemplate", "default", "cluster-template")
		},
		webhook: []string{"spec.remediationTemplate.namespace"},
	},
	"escalation step without namespace": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			s := testutil.Step("test-template", 1, time.Minute)
			s.RemediationTemplate.Namespace = ""
			escalation(s)(n)
		},
		webhook: []string{"spec.escalatingRemediations[0].remediationTemplate.namespace"},
	},
	"minHealthy and maxUnhealthy": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MaxUnhealthy = intOrStr("1") },
		webhook: []string{"spec.maxUnhealthy"}, cel: []string{"spec.maxUnhealthy"},
	},
	"minHealthy above 100%": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("101%") },
		webhook: []string{"spec.minHealthy"}, cel: []string{"spec.minHealthy"},
	},
	"negative minHealthy": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(-1); n.Spec.MinHealthy = &v },
		webhook: []string{"spec.minHealthy"}, cel: []string{"spec.minHealthy"},
	},
	"negative numeric-string minHealthy": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("-3") },
		webhook: []string{"spec.minHealthy"}, cel: []string{"spec.minHealthy"},
	},
	"fractional percentage minHealthy": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("50.5%") },
		webhook: []string{"spec.minHealthy"}, cel: []string{"spec.minHealthy"},
	},
	"maxUnhealthy that is not a number": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.MinHealthy = nil
			n.Spec.MaxUnhealthy = intOrStr("half")
		},
		webhook: []string{"spec.maxUnhealthy"}, cel: []string{"spec.maxUnhealthy"},
	},
	"negative maxUnhealthy": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromInt32(-2)
			n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, &v
		},
		webhook: []string{"spec.maxUnhealthy"}, cel: []string{"spec.maxUnhealthy"},
	},
	"maxUnhealthy with MachineDeletionRemediationTemplate": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, intOrStr("1")
			n.Spec.RemediationTemplate = ref("machine-deletion-remediation.medik8s.io/v1alpha1", remediationv1alpha1.MachineDeletionRemediationTemplateKind, "default", "mdr-template")
		},
		webhook: []string{"spec.maxUnhealthy"}, cel: []string{"spec.maxUnhealthy"},
	},
	"maxUnhealthy with MachineDeletionRemediationTemplate in an escalation step": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			mdr := remediationv1alpha1.EscalatingRemediation{Order: 2, Timeout: metav1.Duration{Duration: time.Hour},
				RemediationTemplate: *ref("machine-deletion-remediation.medik8s.io/v1alpha1", remediationv1alpha1.MachineDeletionRemediationTemplateKind, "default", "mdr-template")}
			escalation(testutil.Step("test-template", 1, time.Minute), mdr)(n)
			n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, intOrStr("20%")
		},
		webhook: []string{"spec.maxUnhealthy"}, cel: []string{"spec.maxUnhealthy"},
	},
	"duplicate escalation orders": {
		mutate:  escalation(testutil.Step("multi-a", 1, time.Minute), testutil.Step("multi-b", 1, time.Minute)),
		webhook: []string{"spec.escalatingRemediations[1].order"}, cel: []string{"spec.escalatingRemediations"},
	},
	"escalation timeout under a minute": {
		mutate:  escalation(testutil.Step("test-template", 1, 59*time.Second)),
		webhook: []string{"spec.escalatingRemediations[0].timeout"}, cel: []string{"spec.escalatingRemediations[0].timeout"},
	},
	"escalation step with a template kind without Template suffix": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			s := testutil.Step("test-template", 1, time.Minute)
			s.RemediationTemplate.Kind = "TestRemediation"
			escalation(s)(n)
		},
		webhook: []string{"spec.escalatingRemediations[0].remediationTemplate.kind"}, cel: []string{"spec.escalatingRemediations[0].remediationTemplate.kind"},
	},
	"too many escalation steps": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			var steps []remediationv1alpha1.EscalatingRemediation
			for i := 0; i <= remediationv1alpha1.MaxEscalatingRemediations; i++ {
				steps = append(steps, testutil.Step("multi-a", i, time.Minute))
			}
			escalation(steps...)(n)
		},
		// The webhook also reports the repeated template on every step after the first.
		cel: []string{"spec.escalatingRemediations"},
	},
	"one template kind in two steps without multiple-templates support": {
		mutate:  escalation(testutil.Step("plain-a", 1, time.Minute), testutil.Step("plain-b", 2, time.Minute)),
		webhook: []string{"spec.escalatingRemediations[0].remediationTemplate", "spec.escalatingRemediations[1].remediationTemplate"},
	},
	"one template kind in two steps where only one template supports it": {
		mutate:  escalation(testutil.Step("multi-a", 1, time.Minute), testutil.Step("plain-b", 2, time.Minute)),
		webhook: []string{"spec.escalatingRemediations[1].remediationTemplate"},
	},
	"one template kind in two steps where a template is missing": {
		mutate:  escalation(testutil.Step("multi-a", 1, time.Minute), testutil.Step("does-not-exist", 2, time.Minute)),
		webhook: []string{"spec.escalatingRemediations[1].remediationTemplate"},
	},
	"the same template in two steps": {
		mutate:  escalation(testutil.Step("multi-a", 1, time.Minute), testutil.Step("multi-a", 2, time.Minute)),
		webhook: []string{"spec.escalatingRemediations[1].remediationTemplate"},
	},
	"negative unhealthy condition duration": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.UnhealthyConditions[0].Duration.Duration = -time.Minute
		},
		webhook: []string{"spec.unhealthyConditions[0].duration"}, cel: []string{"spec.unhealthyConditions[0].duration"},
	},
	"unhealthy condition without type": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.UnhealthyConditions[1].Type = "" },
		webhook: []string{"spec.unhealthyConditions[1].type"}, cel: []string{"spec.unhealthyConditions[1].type"},
	},
	"unhealthy condition with an unknown status": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.UnhealthyConditions[0].Status = "Maybe" },
		webhook: []string{"spec.unhealthyConditions[0].status"}, cel: []string{"spec.unhealthyConditions[0].status"},
	},
	"the same unhealthy condition twice": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.UnhealthyConditions = append(n.Spec.UnhealthyConditions, n.Spec.UnhealthyConditions[0])
		},
		webhook: []string{"spec.unhealthyConditions[2]"},
	},
	"negative stormCooldownDuration": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.StormCooldownDuration = dur(-time.Minute) },
		webhook: []string{"spec.stormCooldownDuration"}, cel: []string{"spec.stormCooldownDuration"},
	},
	"selector with an unknown operator": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.Selector.MatchExpressions[0].Operator = "Near" },
		webhook: []string{"spec.selector.matchExpressions[0].operator"}, cel: []string{"spec.selector"},
	},
	"selector In without values": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.Selector.MatchExpressions[0].Operator = metav1.LabelSelectorOpIn
		},
		webhook: []string{"spec.selector.matchExpressions[0].values"}, cel: []string{"spec.selector"},
	},
	"selector with an invalid label key": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.Selector.MatchExpressions[0].Key = "not a key!" },
		webhook: []string{"spec.selector.matchExpressions[0].key"},
	},
	"unhealthy condition duration above a year": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.UnhealthyConditions[0].Duration.Duration = remediationv1alpha1.MaxDuration + time.Second
		},
		webhook: []string{"spec.unhealthyConditions[0].duration"}, cel: []string{"spec.unhealthyConditions[0].duration"},
	},
	"escalation timeout above a year": {
		mutate:  escalation(testutil.Step("test-template", 1, remediationv1alpha1.MaxDuration+time.Nanosecond)),
		webhook: []string{"spec.escalatingRemediations[0].timeout"}, cel: []string{"spec.escalatingRemediations[0].timeout"},
	},
	"stormCooldownDuration above a year": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.StormCooldownDuration = dur(remediationv1alpha1.MaxDuration + time.Minute)
		},
		webhook: []string{"spec.stormCooldownDuration"}, cel: []string{"spec.stormCooldownDuration"},
	},
	"healthyDelay above a year": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.HealthyDelay = dur(remediationv1alpha1.MaxDuration + time.Hour)
		},
		webhook: []string{"spec.healthyDelay"}, cel: []string{"spec.healthyDelay"},
	},
	"negative healthyDelay beyond a year": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.HealthyDelay = dur(-remediationv1alpha1.MaxDuration - time.Second)
		},
		webhook: []string{"spec.healthyDelay"}, cel: []string{"spec.healthyDelay"},
	},
	"numeric-string minHealthy above 2147483647": {
		mutate:  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("2147483648") },
		webhook: []string{"spec.minHealthy"}, cel: []string{"spec.minHealthy"},
	},
	"numeric-string maxUnhealthy of eleven digits": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			v := intstr.FromString("00000000003") // intOrStr would parse it as the integer 3
			n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, &v
		},
		webhook: []string{"spec.maxUnhealthy"}, cel: []string{"spec.maxUnhealthy"},
	},
	"escalation order above 2147483647": {
		mutate:  escalation(testutil.Step("test-template", math.MaxInt32+1, time.Minute)),
		webhook: []string{"spec.escalatingRemediations[0].order"}, cel: []string{"spec.escalatingRemediations[0].order"},
	},
	"escalation order below -2147483648": {
		mutate:  escalation(testutil.Step("test-template", math.MinInt32-1, time.Minute)),
		webhook: []string{"spec.escalatingRemediations[0].order"}, cel: []string{"spec.escalatingRemediations[0].order"},
	},
	"too many unhealthy conditions": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.UnhealthyConditions = nil
			for i := 0; i <= remediationv1alpha1.MaxUnhealthyConditions; i++ {
				n.Spec.UnhealthyConditions = append(n.Spec.UnhealthyConditions, remediationv1alpha1.UnhealthyCondition{
					Type: corev1.NodeConditionType("Condition" + itoa(i)), Status: corev1.ConditionTrue, Duration: metav1.Duration{Duration: time.Minute}})
			}
		},
		webhook: []string{"spec.unhealthyConditions"}, cel: []string{"spec.unhealthyConditions"},
	},
	"unhealthy condition type too long": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.UnhealthyConditions[0].Type = corev1.NodeConditionType(strings.Repeat("x", remediationv1alpha1.MaxConditionTypeLength+1))
		},
		webhook: []string{"spec.unhealthyConditions[0].type"}, cel: []string{"spec.unhealthyConditions[0].type"},
	},
	"too many pauseRequests": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			for i := 0; i <= remediationv1alpha1.MaxPauseRequests; i++ {
				n.Spec.PauseRequests = append(n.Spec.PauseRequests, "upgrade "+itoa(i))
			}
		},
		webhook: []string{"spec.pauseRequests"}, cel: []string{"spec.pauseRequests"},
	},
	"pauseRequest too long": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.PauseRequests = []string{"ok", strings.Repeat("ü", remediationv1alpha1.MaxPauseRequestLength+1)}
		},
		webhook: []string{"spec.pauseRequests[1]"}, cel: []string{"spec.pauseRequests[1]"},
	},
	"template name too long": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.RemediationTemplate.Name = strings.Repeat("n", remediationv1alpha1.MaxTemplateNameLength+1)
		},
		webhook: []string{"spec.remediationTemplate.name"}, cel: []string{"spec.remediationTemplate.name"},
	},
	"escalation step with a too long template uid": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			s := testutil.Step("test-template", 1, time.Minute)
			s.RemediationTemplate.UID = types.UID(strings.Repeat("u", remediationv1alpha1.MaxTemplateOtherFieldLength+1))
			escalation(s)(n)
		},
		webhook: []string{"spec.escalatingRemediations[0].remediationTemplate.uid"}, cel: []string{"spec.escalatingRemediations[0].remediationTemplate.uid"},
	},
	"selector with too many matchExpressions": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.Selector.MatchExpressions = nil
			for i := 0; i <= remediationv1alpha1.MaxSelectorRequirements; i++ {
				n.Spec.Selector.MatchExpressions = append(n.Spec.Selector.MatchExpressions,
					metav1.LabelSelectorRequirement{Key: "example.com/label-" + itoa(i), Operator: metav1.LabelSelectorOpDoesNotExist})
			}
		},
		webhook: []string{"spec.selector.matchExpressions"}, cel: []string{"spec.selector.matchExpressions"},
	},
	"selector entry with too many values": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			req := metav1.LabelSelectorRequirement{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn}
			for i := 0; i <= remediationv1alpha1.MaxSelectorValues; i++ {
				req.Values = append(req.Values, "node-"+itoa(i))
			}
			n.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{req}
		},
		webhook: []string{"spec.selector.matchExpressions[0].values"}, cel: []string{"spec.selector.matchExpressions"},
	},
	"selector with too many matchLabels": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.Selector.MatchLabels = map[string]string{}
			for i := 0; i <= remediationv1alpha1.MaxSelectorLabels; i++ {
				n.Spec.Selector.MatchLabels["example.com/label-"+itoa(i)] = "yes"
			}
		},
		webhook: []string{"spec.selector.matchLabels"}, cel: []string{"spec.selector.matchLabels"},
	},
	"several problems at once": {
		mutate: func(n *remediationv1alpha1.NodeHealthCheck) {
			n.Spec.MaxUnhealthy = intOrStr("1")
			n.Spec.RemediationTemplate.Kind = "Reboot"
			n.Spec.UnhealthyConditions[0].Duration.Duration = -time.Second
		},
		webhook: []string{"spec.maxUnhealthy", "spec.remediationTemplate.kind", "spec.unhealthyConditions[0].duration"},
		cel:     []string{"spec.maxUnhealthy", "spec.remediationTemplate.kind", "spec.unhealthyConditions[0].duration"},
	},
}

func init() {
	// The webhook reports every repeated template of "too many escalation steps" as a duplicate.
	r := rules["too many escalation steps"]
	r.webhook = []string{"spec.escalatingRemediations"}
	for i := 1; i <= remediationv1alpha1.MaxEscalatingRemediations; i++ {
		r.webhook = append(r.webhook, "spec.escalatingRemediations["+itoa(i)+"].remediationTemplate")
	}
	rules["too many escalation steps"] = r
}

func itoa(i int) string { return strconv.Itoa(i) }

// The admitted examples: the reference documentation's manifests (its example shows both template
// fields as alternatives; here each appears once) and the edge values the rules allow.
var admitted = map[string]func(*remediationv1alpha1.NodeHealthCheck){
	"the valid base object":          func(*remediationv1alpha1.NodeHealthCheck) {},
	"minHealthy as an integer":       func(n *remediationv1alpha1.NodeHealthCheck) { v := intstr.FromInt32(3); n.Spec.MinHealthy = &v },
	"minHealthy as a numeric string": func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("3") },
	"minHealthy 0%":                  func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("0%") },
	"minHealthy 100%":                func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("100%") },
	"maxUnhealthy 0": func(n *remediationv1alpha1.NodeHealthCheck) {
		v := intstr.FromInt32(0)
		n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, &v
	},
	"maxUnhealthy as a percentage": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.MinHealthy, n.Spec.MaxUnhealthy = nil, intOrStr("49%")
	},
	"negative healthyDelay (manual confirmation)": func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.HealthyDelay = dur(-time.Second) },
	"healthyDelay and stormCooldownDuration": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.HealthyDelay, n.Spec.StormCooldownDuration = dur(10*time.Minute), dur(5*time.Minute)
	},
	"pauseRequests": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.PauseRequests = []string{"cluster upgrade by @admin"}
	},
	"durations of exactly a year": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.UnhealthyConditions[0].Duration.Duration = remediationv1alpha1.MaxDuration
		n.Spec.HealthyDelay, n.Spec.StormCooldownDuration = dur(-remediationv1alpha1.MaxDuration), dur(remediationv1alpha1.MaxDuration)
	},
	"an escalation timeout of a year and orders at the int32 bounds": escalation(
		testutil.Step("multi-a", math.MinInt32, remediationv1alpha1.MaxDuration), testutil.Step("multi-b", math.MaxInt32, time.Minute)),
	"minHealthy 2147483647 as an integer": func(n *remediationv1alpha1.NodeHealthCheck) {
		v := intstr.FromInt32(math.MaxInt32)
		n.Spec.MinHealthy = &v
	},
	"minHealthy 2147483647 as a string": func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.MinHealthy = intOrStr("2147483647") },
	"the most unhealthy conditions and pauseRequests": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.UnhealthyConditions = nil
		for i := 0; i < remediationv1alpha1.MaxUnhealthyConditions; i++ {
			n.Spec.UnhealthyConditions = append(n.Spec.UnhealthyConditions, remediationv1alpha1.UnhealthyCondition{
				Type: corev1.NodeConditionType("Condition" + itoa(i)), Status: corev1.ConditionTrue, Duration: metav1.Duration{Duration: time.Minute}})
		}
		for i := 0; i < remediationv1alpha1.MaxPauseRequests; i++ {
			n.Spec.PauseRequests = append(n.Spec.PauseRequests, strings.Repeat("ü", remediationv1alpha1.MaxPauseRequestLength-4)+itoa(1000+i))
		}
	},
	"escalation with a one-minute timeout": escalation(testutil.Step("test-template", 1, time.Minute)),
	"one template kind in two steps with multiple-templates support": escalation(
		testutil.Step("multi-a", 1, 5*time.Minute), testutil.Step("multi-b", 2, 10*time.Minute)),
	"a Metal3RemediationTemplate": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.RemediationTemplate = ref("infrastructure.cluster.x-k8s.io/v1beta1", "Metal3RemediationTemplate", "default", "metal3-template")
	},
	"a cluster-scoped template kind without namespace": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.RemediationTemplate = ref("test.medik8s.io/v1alpha1", "ClusterTestRemediationTemplate", "", "cluster-template")
	},
	"a template kind the API server does not know yet": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.RemediationTemplate = ref("reprovison.example.com/v1", "ReprovisionRemediationTemplate", "example", "reprovision-remediation-template")
	},
	"MachineDeletionRemediationTemplate with minHealthy": func(n *remediationv1alpha1.NodeHealthCheck) {
		n.Spec.RemediationTemplate = ref("machine-deletion-remediation.medik8s.io/v1alpha1", remediationv1alpha1.MachineDeletionRemediationTemplateKind, "default", "mdr-template")
	},
}

// The reference documentation's example, with remediationTemplate and with escalatingRemediations.
const referenceExampleTemplate = `
apiVersion: remediation.medik8s.io/v1alpha1
kind: NodeHealthCheck
metadata:
  name: nhc-snr-worker
spec:
  selector:
    matchExpressions:
      - key: node-role.kubernetes.io/control-plane
        operator: DoesNotExist
      - key: node-role.kubernetes.io/master
        operator: DoesNotExist
  remediationTemplate:
    apiVersion: self-node-remediation.medik8s.io/v1alpha1
    kind: SelfNodeRemediationTemplate
    namespace: snr-system
    name: self-node-remediation-automatic-strategy-template
  minHealthy: "51%"
  unhealthyConditions:
    - type: Ready
      status: "False"
      duration: 300s
    - type: Ready
      status: Unknown
      duration: 300s
`

const referenceExampleEscalation = `
apiVersion: remediation.medik8s.io/v1alpha1
kind: NodeHealthCheck
metadata:
  name: nhc-snr-worker-escalating
spec:
  selector:
    matchExpressions:
      - key: node-role.kubernetes.io/control-plane
        operator: DoesNotExist
      - key: node-role.kubernetes.io/master
        operator: DoesNotExist
  escalatingRemediations:
    - remediationTemplate:
        apiVersion: self-node-remediation.medik8s.io/v1alpha1
        kind: SelfNodeRemediationTemplate
        namespace: snr-system
        name: self-node-remediation-automatic-strategy-template
      order: 1
      timeout: 300s
    - remediationTemplate:
        apiVersion: reprovison.example.com/v1
        kind: ReprovisionRemediationTemplate
        namespace: example
        name: reprovision-remediation-template
      order: 2
      timeout: 30m
  minHealthy: "51%"
  unhealthyConditions:
    - type: Ready
      status: "False"
      duration: 300s
    - type: Ready
      status: Unknown
      duration: 300s
`

// The operator's default NodeHealthCheck (reference README), which omits unhealthyConditions.
const referenceDefaultNHC = `
apiVersion: remediation.medik8s.io/v1alpha1
kind: NodeHealthCheck
metadata:
  name: nhc-worker-default
spec:
  minHealthy: 51%
  remediationTemplate:
    apiVersion: self-node-remediation.medik8s.io/v1alpha1
    kind: SelfNodeRemediationTemplate
    name: self-node-remediation-automatic-strategy-template
    namespace: snr-system
  selector:
    matchExpressions:
      - key: node-role.kubernetes.io/worker
        operator: Exists
`

func fromYAML(doc string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
	u.SetName(uniqueName(u.GetName()))
	return u
}

// layer is one of the two layers of admission, on the API server that has only it.
type layer struct {
	name   string
	client func() client.Client
	// paths are the fields whose errors refuse an object that breaks the rule (nil: this layer
	// does not enforce it).
	paths func(rule) []string
	// runningRefusal is what the refusal of a change says while these nodes are remediated (the
	// CRD's message cannot name them; see the NodeHealthCheck type).
	runningRefusal func(nodes ...string) string
}

var layers = []layer{
	{"the webhook", func() client.Client { return webhookClient }, func(r rule) []string { return r.webhook },
		func(nodes ...string) string {
			return "cannot change while remediation is running for node(s) " + strings.Join(nodes, ", ")
		}},
	{"CEL alone (no webhook)", func() client.Client { return celClient }, func(r rule) []string { return r.cel },
		func(...string) string {
			return "cannot change while remediation is running for the nodes in status.unhealthyNodes"
		}},
}

var _ = Describe("NodeHealthCheck admission", func() {
	for _, l := range layers {
		Context("enforced by "+l.name, func() {
			for name, r := range rules {
				It("on create: "+name, func(ctx SpecContext) {
					nhc := testutil.NewNHC(uniqueName("nhc"))
					r.mutate(nhc)
					err := l.client().Create(ctx, nhc)
					want := l.paths(r)
					if want == nil {
						Expect(err).NotTo(HaveOccurred(), "this layer does not enforce the rule and must admit the object")
						Expect(l.client().Delete(ctx, nhc)).To(Succeed())
						return
					}
					Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
					Expect(causeFields(err)).To(ConsistOf(want), "refusal: %v", err)
				})
			}

			for name, r := range rules {
				if l.paths(r) == nil {
					continue
				}
				It("on update: "+name, func(ctx SpecContext) {
					nhc := testutil.NewNHC(uniqueName("nhc"))
					Expect(l.client().Create(ctx, nhc)).To(Succeed())
					DeferCleanup(func(ctx SpecContext) { Expect(l.client().Delete(ctx, nhc)).To(Succeed()) })
					r.mutate(nhc)
					err := l.client().Update(ctx, nhc)
					Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
					Expect(causeFields(err)).To(ConsistOf(l.paths(r)), "refusal: %v", err)
				})
			}

			for name, mutate := range admitted {
				It("admits "+name, func(ctx SpecContext) {
					nhc := testutil.NewNHC(uniqueName("nhc"))
					mutate(nhc)
					Expect(l.client().Create(ctx, nhc)).To(Succeed())
					Expect(l.client().Delete(ctx, nhc)).To(Succeed())
				})
			}

			for name, doc := range map[string]string{
				"the reference example with remediationTemplate":    referenceExampleTemplate,
				"the reference example with escalatingRemediations": referenceExampleEscalation,
				"the operator's default NodeHealthCheck":            referenceDefaultNHC,
			} {
				It("admits "+name+" unchanged", func(ctx SpecContext) {
					u := fromYAML(doc)
					Expect(l.client().Create(ctx, u)).To(Succeed())
					Expect(l.client().Delete(ctx, u)).To(Succeed())
				})
			}
		})
	}

	It("refuses a NodeHealthCheck without selector (schema, with or without webhook)", func(ctx SpecContext) {
		for _, c := range []client.Client{webhookClient, celClient} {
			u := fromYAML(referenceExampleTemplate)
			unstructured.RemoveNestedField(u.Object, "spec", "selector")
			err := c.Create(ctx, u)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(causeFields(err)).To(ContainElement("spec.selector"))
		}
	})

	Context("defaulting", func() {
		It("fills empty unhealthyConditions and a missing budget with the API's defaults (webhook)", func(ctx SpecContext) {
			nhc := testutil.NewNHC(uniqueName("nhc"))
			nhc.Spec.UnhealthyConditions = nil
			nhc.Spec.MinHealthy = nil
			Expect(webhookClient.Create(ctx, nhc)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(webhookClient.Delete(ctx, nhc)).To(Succeed()) })
			Expect(nhc.Spec.UnhealthyConditions).To(Equal(remediationv1alpha1.DefaultUnhealthyConditions()))
			Expect(nhc.Spec.MinHealthy).To(Equal(&remediationv1alpha1.DefaultMinHealthy))
		})

		It("keeps a given budget and conditions (webhook)", func(ctx SpecContext) {
			nhc := testutil.NewNHC(uniqueName("nhc"))
			nhc.Spec.MinHealthy, nhc.Spec.MaxUnhealthy = nil, intOrStr("2")
			nhc.Spec.UnhealthyConditions = nhc.Spec.UnhealthyConditions[:1]
			Expect(webhookClient.Create(ctx, nhc)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(webhookClient.Delete(ctx, nhc)).To(Succeed()) })
			Expect(nhc.Spec.MinHealthy).To(BeNil())
			Expect(nhc.Spec.UnhealthyConditions).To(HaveLen(1))
		})

		It("fills missing unhealthyConditions from the CRD's default when no webhook runs", func(ctx SpecContext) {
			nhc := testutil.NewNHC(uniqueName("nhc"))
			nhc.Spec.UnhealthyConditions = nil
			Expect(celClient.Create(ctx, nhc)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(celClient.Delete(ctx, nhc)).To(Succeed()) })
			Expect(nhc.Spec.UnhealthyConditions).To(Equal(remediationv1alpha1.DefaultUnhealthyConditions()))
		})
	})

	Context("while a remediation runs (webhook)", func() {
		var nhc *remediationv1alpha1.NodeHealthCheck

		BeforeEach(func(ctx SpecContext) {
			nhc = testutil.NewNHC(uniqueName("nhc"))
			Expect(webhookClient.Create(ctx, nhc)).To(Succeed())
			nhc.Status.UnhealthyNodes = []remediationv1alpha1.UnhealthyNode{{
				Name: "worker-1",
				Remediations: []remediationv1alpha1.Remediation{{
					Resource: corev1.ObjectReference{APIVersion: "test.medik8s.io/v1alpha1", Kind: "TestRemediation", Namespace: "default", Name: "worker-1"},
					Started:  metav1.Now(),
				}},
			}}
			Expect(webhookClient.Status().Update(ctx, nhc)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				Expect(webhookClient.Get(ctx, client.ObjectKeyFromObject(nhc), nhc)).To(Succeed())
				nhc.Status.UnhealthyNodes = nil
				Expect(webhookClient.Status().Update(ctx, nhc)).To(Succeed())
				Expect(webhookClient.Delete(ctx, nhc)).To(Succeed())
			})
		})

		// The update rule itself, for both layers: transition_test.go.

		It("still validates the spec of an allowed change", func(ctx SpecContext) {
			nhc.Spec.MinHealthy = intOrStr("200%")
			err := webhookClient.Update(ctx, nhc)
			Expect(causeFields(err)).To(ConsistOf("spec.minHealthy"))
		})

		It("refuses deletion and says how to proceed", func(ctx SpecContext) {
			err := webhookClient.Delete(ctx, nhc)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			Expect(err.Error()).To(And(ContainSubstring("worker-1"), ContainSubstring("spec.pauseRequests"), ContainSubstring("delete their remediation CRs")))
		})
	})

	Context("without a running remediation (webhook)", func() {
		It("warns when a template kind is not served yet", func(ctx SpecContext) {
			rec := &warningRecorder{}
			cfg := rest.CopyConfig(webhookEnv.Config)
			cfg.WarningHandlerWithContext = rec
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			Expect(err).NotTo(HaveOccurred())
			nhc := testutil.NewNHC(uniqueName("nhc"))
			nhc.Spec.RemediationTemplate = ref("reprovison.example.com/v1", "ReprovisionRemediationTemplate", "example", "reprovision")
			Expect(c.Create(ctx, nhc)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(c.Delete(ctx, nhc)).To(Succeed()) })
			Expect(rec.warnings).To(ContainElement(ContainSubstring("kind ReprovisionRemediationTemplate is not served by the API server")))
		})

		It("warns when the selector selects nodes another NodeHealthCheck selects, naming it and how many", func(ctx SpecContext) {
			pool := uniqueName("overlap")
			for range 2 {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("node"), Labels: map[string]string{"pool": pool}}}
				Expect(webhookClient.Create(ctx, node)).To(Succeed())
				DeferCleanup(func(ctx SpecContext) { Expect(webhookClient.Delete(ctx, node)).To(Succeed()) })
			}
			first := testutil.NewNHC(uniqueName("nhc"))
			first.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}}
			Expect(webhookClient.Create(ctx, first)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(webhookClient.Delete(ctx, first)).To(Succeed()) })

			rec := &warningRecorder{}
			cfg := rest.CopyConfig(webhookEnv.Config)
			cfg.WarningHandlerWithContext = rec
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			Expect(err).NotTo(HaveOccurred())
			admit := func(selector metav1.LabelSelector) []string {
				rec.warnings = nil
				second := testutil.NewNHC(uniqueName("nhc"))
				second.Spec.Selector = selector
				Expect(c.Create(ctx, second, client.DryRunAll)).To(Succeed(), "a warning, not a refusal")
				return rec.warnings
			}
			// The same nodes, by another selector; then a selector that selects none of them.
			Eventually(func() []string {
				return admit(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{pool, "other"}}}})
			}).
				Should(ContainElement(And(ContainSubstring("NodeHealthCheck %s selects 2 of the 2 node(s) this one selects", first.Name), ContainSubstring("first"))))
			Expect(admit(metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool + "-elsewhere"}})).NotTo(ContainElement(ContainSubstring("NodeHealthCheck %s selects", first.Name)),
				"no warning for a selector that selects none of its nodes")
		})
	})
})

// warningRecorder keeps the warnings the API server returns.
type warningRecorder struct{ warnings []string }

func (r *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	r.warnings = append(r.warnings, text)
}

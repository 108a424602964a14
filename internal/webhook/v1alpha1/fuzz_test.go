package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	webhookv1alpha1 "github.com/medik8s/node-healthcheck/internal/webhook/v1alpha1"
)

// picker turns fuzz bytes into choices; when the bytes run out every choice is the first option.
type picker struct{ data []byte }

func (p *picker) byte() byte {
	if len(p.data) == 0 {
		return 0
	}
	b := p.data[0]
	p.data = p.data[1:]
	return b
}

func (p *picker) bool() bool { return p.byte()&1 == 1 }

func pick[T any](p *picker, options ...T) T { return options[int(p.byte())%len(options)] }

var (
	apiVersions = []string{"test.medik8s.io/v1alpha1", "", "v1", "self-node-remediation.medik8s.io/v1alpha1", "a/b/c"}
	kinds       = []string{"TestRemediationTemplate", "", "Template", "TestRemediation", remediationv1alpha1.MachineDeletionRemediationTemplateKind, "Metal3RemediationTemplate"}
	names       = []string{"tmpl", "", "other", strings.Repeat("n", remediationv1alpha1.MaxTemplateNameLength+1)}
	namespaces  = []string{"default", "", strings.Repeat("ns", remediationv1alpha1.MaxTemplateNamespaceLength)}
	budgets     = []string{"51%", "0%", "100%", "101%", "3", "-3", "0", "half", "50.5%", "07%", "", "1000",
		"2147483647", "2147483648", "99999999999", "0000000003", "ÄÄÄÄÄÄÄÄÄÄ"}
	ints      = []int32{0, 3, -1, 12, 1 << 30, math.MaxInt32}
	orders    = []int{0, 1, 2, 3, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1}
	durations = []time.Duration{0, time.Second, 59 * time.Second, time.Minute, 5 * time.Minute, -time.Minute, 90 * time.Minute,
		remediationv1alpha1.MaxDuration, remediationv1alpha1.MaxDuration + time.Nanosecond, -remediationv1alpha1.MaxDuration - time.Second}
	condTypes = []corev1.NodeConditionType{corev1.NodeReady, "", "DiskPressure",
		corev1.NodeConditionType(strings.Repeat("µ", remediationv1alpha1.MaxConditionTypeLength)), corev1.NodeConditionType(strings.Repeat("µ", remediationv1alpha1.MaxConditionTypeLength+1))}
	pauses     = []string{"upgrade", strings.Repeat("ü", remediationv1alpha1.MaxPauseRequestLength), strings.Repeat("x", remediationv1alpha1.MaxPauseRequestLength+1)}
	condStatus = []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionUnknown, corev1.ConditionTrue, "", "Maybe"}
	operators  = []metav1.LabelSelectorOperator{metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, "Near"}
)

func (p *picker) intOrString() *intstr.IntOrString {
	switch p.byte() % 3 {
	case 0:
		return nil
	case 1:
		v := intstr.FromString(pick(p, budgets...))
		return &v
	default:
		v := intstr.FromInt32(pick(p, ints...))
		return &v
	}
}

func (p *picker) ref() corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: pick(p, apiVersions...), Kind: pick(p, kinds...), Namespace: pick(p, namespaces...), Name: pick(p, names...)}
}

func (p *picker) duration() *metav1.Duration {
	if p.bool() {
		return nil
	}
	return &metav1.Duration{Duration: pick(p, durations...)}
}

// spec builds a NodeHealthCheck spec from fuzz bytes: every field varies between valid and invalid
// values, so most inputs break one or two rules at a time.
func (p *picker) spec() remediationv1alpha1.NodeHealthCheckSpec {
	var s remediationv1alpha1.NodeHealthCheckSpec
	for range int(p.byte() % 3) {
		req := metav1.LabelSelectorRequirement{Key: "node-role.kubernetes.io/worker", Operator: pick(p, operators...)}
		if p.bool() {
			req.Values = []string{"a"}
		}
		s.Selector.MatchExpressions = append(s.Selector.MatchExpressions, req)
	}
	for range int(p.byte() % 4) {
		s.UnhealthyConditions = append(s.UnhealthyConditions, remediationv1alpha1.UnhealthyCondition{
			Type: pick(p, condTypes...), Status: pick(p, condStatus...), Duration: metav1.Duration{Duration: pick(p, durations...)},
		})
	}
	s.MinHealthy = p.intOrString()
	s.MaxUnhealthy = p.intOrString()
	switch p.byte() % 4 {
	case 0:
		r := p.ref()
		s.RemediationTemplate = &r
	case 1, 2:
		for range int(p.byte()%4) + 1 {
			s.EscalatingRemediations = append(s.EscalatingRemediations, remediationv1alpha1.EscalatingRemediation{
				RemediationTemplate: p.ref(), Order: pick(p, orders...), Timeout: metav1.Duration{Duration: pick(p, durations...)},
			})
		}
		if p.byte()%8 == 0 {
			r := p.ref()
			s.RemediationTemplate = &r
		}
	}
	s.HealthyDelay = p.duration()
	s.StormCooldownDuration = p.duration()
	for range int(p.byte() % 3) {
		s.PauseRequests = append(s.PauseRequests, pick(p, pauses...))
	}
	return s
}

// roundTrip returns the JSON a client sends for spec and the object the webhook decodes from it.
func roundTrip(t *testing.T, spec remediationv1alpha1.NodeHealthCheckSpec) ([]byte, *remediationv1alpha1.NodeHealthCheck) {
	nhc := &remediationv1alpha1.NodeHealthCheck{
		TypeMeta:   metav1.TypeMeta{APIVersion: remediationv1alpha1.GroupVersion.String(), Kind: "NodeHealthCheck"},
		ObjectMeta: metav1.ObjectMeta{Name: "fuzz"},
		Spec:       spec,
	}
	raw, err := json.Marshal(nhc)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	decoded := &remediationv1alpha1.NodeHealthCheck{}
	if err := json.Unmarshal(raw, decoded); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return raw, decoded
}

var seeds = [][]byte{
	{},
	{0, 0, 0, 1, 0, 0, 0, 0, 0},
	{1, 4, 1, 2, 1, 1, 3, 2, 1, 0, 1, 0, 3, 4, 0, 2},
	{2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
	[]byte("escalation with many steps and orders"),
	{0, 1, 0, 0, 0, 2, 3, 0, 0, 1, 2, 3, 1, 0, 0, 1, 1, 1, 1, 1, 1},
}

// FuzzValidate: no input, however malformed, makes validation panic; and validation is
// deterministic.
func FuzzValidate(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte(`{"spec":{"selector":{"matchExpressions":[{"key":"","operator":"In"}]},"escalatingRemediations":[{"order":1}],"minHealthy":-1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var objs []*remediationv1alpha1.NodeHealthCheck
		if arbitrary := (&remediationv1alpha1.NodeHealthCheck{}); json.Unmarshal(data, arbitrary) == nil {
			objs = append(objs, arbitrary)
		}
		p := &picker{data: data}
		_, generated := roundTrip(t, p.spec())
		generated.Status.UnhealthyNodes = []remediationv1alpha1.UnhealthyNode{{Name: "n", Remediations: make([]remediationv1alpha1.Remediation, int(p.byte()%2))}}
		objs = append(objs, generated)
		for _, o := range objs {
			first := webhookv1alpha1.ValidateSpec(&o.Spec)
			if second := webhookv1alpha1.ValidateSpec(&o.Spec); !equality.Semantic.DeepEqual(first, second) {
				t.Fatalf("validation is not deterministic: %v then %v", first, second)
			}
			for _, other := range objs {
				_ = webhookv1alpha1.ValidateUpdate(o, other)
			}
			_ = webhookv1alpha1.ValidateDelete(o)
		}
	})
}

// FuzzDefaultThenValidate: defaulting never adds a problem, fixes the missing budget, is idempotent,
// and turns a spec that is valid but for its missing defaults into a valid one.
func FuzzDefaultThenValidate(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, nhc := roundTrip(t, (&picker{data: data}).spec())
		beforeErrs := webhookv1alpha1.ValidateSpec(&nhc.Spec)
		before := paths(beforeErrs)
		defaulted := nhc.DeepCopy()
		remediationv1alpha1.SetDefaults(defaulted)
		after := paths(webhookv1alpha1.ValidateSpec(&defaulted.Spec))
		for p := range after {
			if !before[p] {
				t.Fatalf("defaulting added a problem at %s: %v", p, webhookv1alpha1.ValidateSpec(&defaulted.Spec))
			}
		}
		if after["spec.minHealthy"] && defaulted.Spec.MinHealthy == nil {
			t.Fatalf("defaulting left the budget unset")
		}
		if len(defaulted.Spec.UnhealthyConditions) == 0 {
			t.Fatalf("defaulting left unhealthyConditions empty")
		}
		again := defaulted.DeepCopy()
		remediationv1alpha1.SetDefaults(again)
		if !equality.Semantic.DeepEqual(again, defaulted) {
			t.Fatalf("defaulting is not idempotent")
		}
		// A spec whose only problem is a missing budget validates once defaulted.
		if len(beforeErrs) == 1 && beforeErrs[0].Type == field.ErrorTypeRequired && beforeErrs[0].Field == "spec.minHealthy" && len(after) != 0 {
			t.Fatalf("defaulted spec is still invalid: %v", webhookv1alpha1.ValidateSpec(&defaulted.Spec))
		}
	})
}

// FuzzWebhookAgreesWithCEL: on every rule both check, the webhook and the CRD's OpenAPI and CEL
// rules refuse the same specs at the same field paths. The webhook is more precise in a few places;
// normalize maps its paths to the ones the API server reports. Where a refusal names the offending
// value (the CRD's messageExpressions), both layers say the same sentence (valueSentences).
func FuzzWebhookAgreesWithCEL(f *testing.F) {
	v, err := loadCRDValidator()
	if err != nil {
		f.Fatalf("loading CRD validator: %v", err)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, nhc := roundTrip(t, (&picker{data: data}).spec())
		crdErrs, err := v.validate(context.Background(), raw)
		if err != nil {
			t.Fatalf("CRD validation: %v", err)
		}
		webhookErrs := webhookv1alpha1.ValidateSpec(&nhc.Spec)
		got, want := normalize(webhookErrs, true), normalize(crdErrs, false)
		if !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("webhook and CRD disagree for\n%s\nwebhook: %v\n    CRD: %v\n(webhook errors: %v)\n(CRD errors: %v)",
				raw, keys(got), keys(want), webhookErrs, crdErrs)
		}
		if msg := compareValueSentences(webhookErrs, crdErrs); msg != "" {
			t.Fatalf("webhook and CRD name the value differently for\n%s\n%s\n(webhook errors: %v)\n(CRD errors: %v)", raw, msg, webhookErrs, crdErrs)
		}
	})
}

func paths(errs field.ErrorList) map[string]bool {
	out := map[string]bool{}
	for _, e := range errs {
		out[e.Field] = true
	}
	return out
}

// normalize returns the field paths of the errors on rules both layers check.
func normalize(errs field.ErrorList, webhook bool) map[string]bool {
	out := map[string]bool{}
	for _, e := range errs {
		p := e.Field
		if strings.HasPrefix(p, "spec.selector") {
			p = "spec.selector" // CEL reports most selector rules on the selector, the webhook on the entry
		}
		if webhook {
			switch {
			case e.Type == field.ErrorTypeRequired && p == "spec.minHealthy":
				continue // webhook only: filled by defaulting, so CEL allows its absence
			case e.Type == field.ErrorTypeDuplicate && strings.HasPrefix(p, "spec.unhealthyConditions"):
				continue // webhook only: duplicate unhealthy conditions
			case e.Type == field.ErrorTypeInvalid && strings.HasSuffix(p, ".apiVersion"):
				continue // webhook only: apiVersion syntax
			case e.Type == field.ErrorTypeDuplicate && strings.HasSuffix(p, ".order"):
				p = "spec.escalatingRemediations" // CEL reports unique orders on the list
			}
		}
		out[p] = true
	}
	return out
}

func keys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// foundSeparator separates a refusal's rule from the value it names: "EscalatingRemediation Timeout
// must be at least one minute: found timeout 30s". The CRD's fallback message (used when its
// messageExpression cannot be evaluated) is the part before it.
const foundSeparator = ": found "

// duplicateOrdersRE matches the CRD's sentence for several duplicated orders; the webhook says one
// sentence per repeated step, as the public operator does.
var duplicateOrdersRE = regexp.MustCompile(`^(EscalatingRemediation Order must be unique): found duplicate orders \[(.*)\]$`)

// valueSentences returns the refusals that name a value, by normalized field path and rule (the
// part before foundSeparator), each with its sentences. Selector refusals are left out: the
// webhook reports them per entry with Kubernetes' own label selector messages.
func valueSentences(errs field.ErrorList, webhook bool) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	add := func(path, sentence string) {
		rule, _, _ := strings.Cut(sentence, foundSeparator)
		k := path + " | " + rule
		if out[k] == nil {
			out[k] = map[string]bool{}
		}
		out[k][sentence] = true
	}
	for _, e := range errs {
		p := e.Field
		if strings.HasPrefix(p, "spec.selector") || !strings.Contains(e.Detail, foundSeparator) {
			continue
		}
		if webhook && e.Type == field.ErrorTypeDuplicate && strings.HasSuffix(p, ".order") {
			p = "spec.escalatingRemediations" // CEL reports unique orders on the list
		}
		if m := duplicateOrdersRE.FindStringSubmatch(e.Detail); m != nil {
			for _, o := range strings.Split(m[2], ", ") {
				add(p, m[1]+": found duplicate order "+o)
			}
			continue
		}
		add(p, e.Detail)
	}
	return out
}

// compareValueSentences returns how the two layers' value-naming sentences differ, or "". A sentence
// one layer gives must be given by the other too, unless the other refuses that field for another
// reason only (a negative timeout: the webhook says it is under a minute, the CRD's pattern refuses
// it before its CEL rule would); a CRD refusal that falls back to the rule alone (its
// messageExpression gone or failing) differs from the webhook's sentence.
func compareValueSentences(webhookErrs, crdErrs field.ErrorList) string {
	w, c := valueSentences(webhookErrs, true), valueSentences(crdErrs, false)
	crdRules := map[string]bool{} // every CRD refusal by path and rule, including fallbacks
	for _, e := range crdErrs {
		rule, _, _ := strings.Cut(e.Detail, foundSeparator)
		crdRules[e.Field+" | "+rule] = true
	}
	var diffs []string
	for k, sentences := range w {
		if (c[k] != nil || crdRules[k]) && !maps.Equal(sentences, c[k]) {
			diffs = append(diffs, fmt.Sprintf("%s:\n  webhook: %v\n      CRD: %v", k, keys(sentences), keys(c[k])))
		}
	}
	for k, sentences := range c {
		if w[k] == nil {
			diffs = append(diffs, fmt.Sprintf("%s:\n  webhook: []\n      CRD: %v", k, keys(sentences)))
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "\n")
}

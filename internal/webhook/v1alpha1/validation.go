package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

var (
	specPath = field.NewPath("spec")

	// percentRE and numberRE are the two accepted string forms of minHealthy and maxUnhealthy; the
	// CRD's pattern is their union.
	percentRE = regexp.MustCompile(`^(100|[0-9]{1,2})%$`)
	numberRE  = regexp.MustCompile(`^[0-9]+$`)

	supportedConditionStatuses = []string{string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown)}
)

// ValidateSpec checks every rule that needs only the spec itself and returns all violations, with
// their field paths under "spec". Each rule is also a CEL rule (or an OpenAPI constraint) in the CRD,
// except the few noted inline, which need Go: label selector syntax and duplicate unhealthy conditions.
// The bounds of api/v1alpha1/bounds.go are checked here too, with the CRD's messages.
func ValidateSpec(spec *remediationv1alpha1.NodeHealthCheckSpec) field.ErrorList {
	var errs field.ErrorList

	// Label syntax is beyond CEL; the operator/values rule is in CEL as well.
	errs = append(errs, metav1validation.ValidateLabelSelector(&spec.Selector,
		metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
	errs = append(errs, validateSelectorSize(&spec.Selector, specPath.Child("selector"))...)

	errs = append(errs, validateUnhealthyConditions(spec.UnhealthyConditions, specPath.Child("unhealthyConditions"))...)
	errs = append(errs, validateBudget(spec)...)
	errs = append(errs, validateTemplateChoice(spec)...)
	errs = append(errs, validatePauseRequests(spec.PauseRequests, specPath.Child("pauseRequests"))...)

	if spec.StormCooldownDuration != nil {
		p := specPath.Child("stormCooldownDuration")
		if d := spec.StormCooldownDuration.Duration; d < 0 {
			errs = append(errs, field.Invalid(p, d.String(), "must not be negative"))
		}
		errs = append(errs, validateMaxDuration(spec.StormCooldownDuration.Duration, p)...)
	}
	if b := spec.RepairBudget; b != nil {
		p := specPath.Child("repairBudget")
		if b.MaxRemediations < 1 || b.MaxRemediations > 100 {
			errs = append(errs, field.Invalid(p.Child("maxRemediations"), b.MaxRemediations, "must be between 1 and 100"))
		}
		if d := b.Window.Duration; d <= 0 {
			errs = append(errs, field.Invalid(p.Child("window"), d.String(), "must be more than 0"))
		} else {
			errs = append(errs, validateMaxDuration(d, p.Child("window"))...)
		}
	}
	if m := spec.MaxInFlight; m != nil {
		errs = append(errs, validateAtLeastOne(m, specPath.Child("maxInFlight"), inFlightZero)...)
	}
	if fd := spec.FailureDomain; fd != nil {
		p := specPath.Child("failureDomain")
		if fd.TopologyKey == "" {
			errs = append(errs, field.Required(p.Child("topologyKey"), "the node label that names a node's failure domain, for example topology.kubernetes.io/zone"))
		} else {
			for _, msg := range validation.IsQualifiedName(fd.TopologyKey) {
				errs = append(errs, field.Invalid(p.Child("topologyKey"), fd.TopologyKey, msg))
			}
		}
		errs = append(errs, validateAtLeastOne(&fd.MaxUnhealthy, p.Child("maxUnhealthy"),
			"must be at least 1 (or 1%): the failing node counts itself, so 0 would start no remediation")...)
	}
	// healthyDelay may be negative: it then waits for manual confirmation.
	if spec.HealthyDelay != nil {
		if d := spec.HealthyDelay.Duration; d < -remediationv1alpha1.MaxDuration || d > remediationv1alpha1.MaxDuration {
			errs = append(errs, field.Invalid(specPath.Child("healthyDelay"), d.String(), "must be between -8760h and 8760h (365 days)"))
		}
	}
	return errs
}

// validateMaxDuration checks the upper bound of every duration; the message is the CRD's.
func validateMaxDuration(d time.Duration, path *field.Path) field.ErrorList {
	if d > remediationv1alpha1.MaxDuration {
		return field.ErrorList{field.Invalid(path, d.String(), "must be at most 8760h (365 days)")}
	}
	return nil
}

// validateSelectorSize checks the selector's bounds; the label syntax is ValidateLabelSelector's.
func validateSelectorSize(sel *metav1.LabelSelector, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	exprPath := path.Child("matchExpressions")
	if n := len(sel.MatchExpressions); n > remediationv1alpha1.MaxSelectorRequirements {
		errs = append(errs, field.TooMany(exprPath, n, remediationv1alpha1.MaxSelectorRequirements))
	}
	for i, e := range sel.MatchExpressions {
		if n := len(e.Values); n > remediationv1alpha1.MaxSelectorValues {
			errs = append(errs, field.TooMany(exprPath.Index(i).Child("values"), n, remediationv1alpha1.MaxSelectorValues))
		}
	}
	if n := len(sel.MatchLabels); n > remediationv1alpha1.MaxSelectorLabels {
		errs = append(errs, field.TooMany(path.Child("matchLabels"), n, remediationv1alpha1.MaxSelectorLabels))
	}
	return errs
}

func validatePauseRequests(reqs []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := len(reqs); n > remediationv1alpha1.MaxPauseRequests {
		errs = append(errs, field.TooMany(path, n, remediationv1alpha1.MaxPauseRequests))
	}
	for i, r := range reqs {
		if utf8.RuneCountInString(r) > remediationv1alpha1.MaxPauseRequestLength {
			errs = append(errs, field.TooLongCharacters(path.Index(i), r, remediationv1alpha1.MaxPauseRequestLength))
		}
	}
	return errs
}

func validateUnhealthyConditions(conds []remediationv1alpha1.UnhealthyCondition, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := len(conds); n > remediationv1alpha1.MaxUnhealthyConditions {
		errs = append(errs, field.TooMany(path, n, remediationv1alpha1.MaxUnhealthyConditions))
	}
	seen := map[string]bool{}
	for i, c := range conds {
		p := path.Index(i)
		switch {
		case c.Type == "":
			errs = append(errs, field.Required(p.Child("type"), "the node condition type, for example Ready"))
		case utf8.RuneCountInString(string(c.Type)) > remediationv1alpha1.MaxConditionTypeLength:
			errs = append(errs, field.TooLongCharacters(p.Child("type"), c.Type, remediationv1alpha1.MaxConditionTypeLength))
		}
		if !slices.Contains(supportedConditionStatuses, string(c.Status)) {
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status, supportedConditionStatuses))
		}
		if c.Duration.Duration < 0 {
			errs = append(errs, field.Invalid(p.Child("duration"), c.Duration.Duration.String(), "must not be negative"))
		}
		errs = append(errs, validateMaxDuration(c.Duration.Duration, p.Child("duration"))...)
		// Webhook only: two entries for one type and status would give that condition two durations.
		key := string(c.Type) + "=" + string(c.Status)
		if c.Type != "" && seen[key] {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("type %s with status %s", c.Type, c.Status)))
		}
		seen[key] = true
	}
	return errs
}

func validateBudget(spec *remediationv1alpha1.NodeHealthCheckSpec) field.ErrorList {
	var errs field.ErrorList
	switch {
	case spec.MinHealthy != nil && spec.MaxUnhealthy != nil:
		errs = append(errs, field.Forbidden(specPath.Child("maxUnhealthy"), "minHealthy and maxUnhealthy are mutually exclusive: set only one"))
	case spec.MinHealthy == nil && spec.MaxUnhealthy == nil:
		// Not a CEL rule: the defaulting webhook sets minHealthy, and without the webhook the
		// controller applies the same default.
		errs = append(errs, field.Required(specPath.Child("minHealthy"), "one of minHealthy or maxUnhealthy is required"))
	}
	errs = append(errs, validateIntOrPercent(spec.MinHealthy, specPath.Child("minHealthy"))...)
	errs = append(errs, validateIntOrPercent(spec.MaxUnhealthy, specPath.Child("maxUnhealthy"))...)

	if spec.MaxUnhealthy != nil {
		// Every reference counts, also where both template fields are (wrongly) set.
		for _, t := range allTemplates(spec) {
			if t.ref.Kind == remediationv1alpha1.MachineDeletionRemediationTemplateKind {
				errs = append(errs, field.Forbidden(specPath.Child("maxUnhealthy"),
					"maxUnhealthy cannot be used with MachineDeletionRemediationTemplate: deleted nodes break the unhealthy count; use minHealthy"))
				break
			}
		}
	}
	return errs
}

// validateIntOrPercent accepts a non-negative integer, a numeric string such as "3" (an integer of at
// most ten digits), or a whole percentage from 0% to 100%; integers at most MaxBudget. (An integer
// above it cannot reach the webhook: it does not decode into the int32 of IntOrString.)
// inFlightZero refuses a maxInFlight of 0 or 0%, which would start no remediation at all.
const inFlightZero = "must be at least 1 (or 1%): 0 would start no remediation; pauseRequests stops remediation"

// validateAtLeastOne is validateIntOrPercent for a bound that must let at least one node through:
// 0 and 0% are refused with zero.
func validateAtLeastOne(v *intstr.IntOrString, path *field.Path, zero string) field.ErrorList {
	if errs := validateIntOrPercent(v, path); len(errs) > 0 {
		return errs
	}
	switch {
	case v.Type == intstr.Int && v.IntVal < 1:
		return field.ErrorList{field.Invalid(path, v.IntVal, zero)}
	case v.Type == intstr.String && (v.StrVal == "0%" || numberRE.MatchString(v.StrVal) && strings.TrimLeft(v.StrVal, "0") == ""):
		return field.ErrorList{field.Invalid(path, v.StrVal, zero)}
	}
	return nil
}

func validateIntOrPercent(v *intstr.IntOrString, path *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return field.ErrorList{field.Invalid(path, v.IntVal, "must not be negative")}
		}
		return nil
	}
	var errs field.ErrorList
	if utf8.RuneCountInString(v.StrVal) > remediationv1alpha1.MaxBudgetLength {
		errs = append(errs, field.TooLongCharacters(path, v.StrVal, remediationv1alpha1.MaxBudgetLength))
	}
	switch {
	case percentRE.MatchString(v.StrVal):
	case numberRE.MatchString(v.StrVal):
		if len(v.StrVal) > remediationv1alpha1.MaxBudgetLength {
			break // reported above
		}
		if n, err := strconv.ParseInt(v.StrVal, 10, 64); err != nil || n > remediationv1alpha1.MaxBudget {
			errs = append(errs, field.Invalid(path, v.StrVal, "must be at most 2147483647"))
		}
	default:
		errs = append(errs, field.Invalid(path, v.StrVal, "must be a non-negative integer or a whole percentage from 0% to 100%"))
	}
	return errs
}

func validateTemplateChoice(spec *remediationv1alpha1.NodeHealthCheckSpec) field.ErrorList {
	var errs field.ErrorList
	escPath := specPath.Child("escalatingRemediations")
	switch {
	case spec.RemediationTemplate == nil && spec.EscalatingRemediations == nil:
		errs = append(errs, field.Required(specPath.Child("remediationTemplate"), "one of remediationTemplate or escalatingRemediations is required"))
	case spec.RemediationTemplate != nil && spec.EscalatingRemediations != nil:
		errs = append(errs, field.Forbidden(escPath, "remediationTemplate and escalatingRemediations are mutually exclusive: set only one"))
	}
	if spec.RemediationTemplate != nil {
		errs = append(errs, validateTemplateRef(spec.RemediationTemplate, specPath.Child("remediationTemplate"))...)
	}
	if spec.EscalatingRemediations == nil {
		return errs
	}
	if len(spec.EscalatingRemediations) == 0 {
		errs = append(errs, field.Required(escPath, templateRequiredMessage))
	}
	if len(spec.EscalatingRemediations) > remediationv1alpha1.MaxEscalatingRemediations {
		errs = append(errs, field.TooMany(escPath, len(spec.EscalatingRemediations), remediationv1alpha1.MaxEscalatingRemediations))
	}
	orders := map[int]bool{}
	for i := range spec.EscalatingRemediations {
		e := &spec.EscalatingRemediations[i]
		p := escPath.Index(i)
		errs = append(errs, validateTemplateRef(&e.RemediationTemplate, p.Child("remediationTemplate"))...)
		if orders[e.Order] {
			dup := field.Duplicate(p.Child("order"), e.Order)
			dup.Detail = duplicateOrderMessage(e.Order)
			errs = append(errs, dup)
		}
		orders[e.Order] = true
		if e.Order < remediationv1alpha1.MinOrder || e.Order > remediationv1alpha1.MaxOrder {
			errs = append(errs, field.Invalid(p.Child("order"), e.Order, "must be between -2147483648 and 2147483647"))
		}
		if e.Timeout.Duration < remediationv1alpha1.MinEscalationTimeout {
			errs = append(errs, field.Invalid(p.Child("timeout"), e.Timeout.Duration.String(), shortTimeoutMessage(e.Timeout.Duration.String())))
		}
		errs = append(errs, validateMaxDuration(e.Timeout.Duration, p.Child("timeout"))...)
	}
	return errs
}

func validateTemplateRef(ref *corev1.ObjectReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.APIVersion == "" {
		errs = append(errs, field.Required(path.Child("apiVersion"), "apiVersion is required"))
	} else if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
		errs = append(errs, field.Invalid(path.Child("apiVersion"), ref.APIVersion, err.Error()))
	}
	switch {
	case ref.Kind == "":
		errs = append(errs, field.Required(path.Child("kind"), "kind is required"))
	case !isTemplateKind(ref.Kind):
		errs = append(errs, field.Invalid(path.Child("kind"), ref.Kind, templateKindMessage(ref.Kind)))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "name is required"))
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{
		{"apiVersion", ref.APIVersion, remediationv1alpha1.MaxTemplateAPIVersionLength},
		{"kind", ref.Kind, remediationv1alpha1.MaxTemplateKindLength},
		{"name", ref.Name, remediationv1alpha1.MaxTemplateNameLength},
		{"namespace", ref.Namespace, remediationv1alpha1.MaxTemplateNamespaceLength},
		{"fieldPath", ref.FieldPath, remediationv1alpha1.MaxTemplateOtherFieldLength},
		{"resourceVersion", ref.ResourceVersion, remediationv1alpha1.MaxTemplateOtherFieldLength},
		{"uid", string(ref.UID), remediationv1alpha1.MaxTemplateOtherFieldLength},
	} {
		if n := utf8.RuneCountInString(f.value); n > f.max {
			tooLong := field.TooLongCharacters(path.Child(f.name), f.value, f.max)
			tooLong.Detail = templateFieldTooLongMessage(f.name, f.max, n)
			errs = append(errs, tooLong)
		}
	}
	return errs
}

// The refusals below name the offending value in the words of the CRD's CEL rules (their
// messageExpressions in api/v1alpha1/nodehealthcheck_types.go repeat these sentences), so an
// administrator reads the same sentence whichever layer refuses; FuzzWebhookAgreesWithCEL and the
// "Refusals name the value" specs compare them. The order and timeout sentences are the public
// operator's.

// templateRequiredMessage refuses an empty spec.escalatingRemediations (the CRD's rule on the list
// says the same; an absent list with no remediationTemplate is the root rule's "one of ... is
// required").
const templateRequiredMessage = "a template is required: escalatingRemediations is empty; add a step with its remediationTemplate, or set remediationTemplate instead"

func duplicateOrderMessage(order int) string {
	return fmt.Sprintf("EscalatingRemediation Order must be unique: found duplicate order %d", order)
}

// shortTimeoutMessage names the timeout as the webhook decoded it (Go's form, "30s"); the CRD names
// it as written ("0.5m").
func shortTimeoutMessage(timeout string) string {
	return "EscalatingRemediation Timeout must be at least one minute: found timeout " + timeout
}

func templateKindMessage(kind string) string {
	return `kind must be a remediation kind followed by "Template", for example SelfNodeRemediationTemplate: found ` + kind
}

func templateFieldTooLongMessage(name string, maxChars, chars int) string {
	return fmt.Sprintf("%s must be at most %d characters: found %d", name, maxChars, chars)
}

func isTemplateKind(kind string) bool {
	return len(kind) > len(remediationv1alpha1.TemplateSuffix) && strings.HasSuffix(kind, remediationv1alpha1.TemplateSuffix)
}

// ValidateSelectorPresent refuses an empty selector (no matchLabels, no matchExpressions), which
// selects every node, control-plane nodes too: "selector is mandatory", as the public operator's
// webhook says. old is the stored object of an update, nil otherwise. Unlike the public operator, an
// object stored with an empty selector (before the rule, or with the webhook off) may still be
// updated without adding one, with a warning: pausing it in an incident must not need a selector
// first. The CRD cannot express this (it would refuse such updates too), so it is the webhook's.
func ValidateSelectorPresent(old, nhc *remediationv1alpha1.NodeHealthCheck) (field.ErrorList, admission.Warnings) {
	if !selectorEmpty(&nhc.Spec.Selector) {
		return nil, nil
	}
	if old != nil && selectorEmpty(&old.Spec.Selector) {
		return nil, admission.Warnings{fmt.Sprintf("NodeHealthCheck %s: spec.selector is empty and selects every node, control-plane nodes too; set matchLabels or matchExpressions", nhc.Name)}
	}
	return field.ErrorList{field.Required(specPath.Child("selector"),
		"selector is mandatory: an empty selector selects every node, control-plane nodes too; select the nodes to watch with matchLabels or matchExpressions, for example node-role.kubernetes.io/worker")}, nil
}

func selectorEmpty(s *metav1.LabelSelector) bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// ValidateUpdate checks the rules that compare the old and new object: while any node has a running
// remediation, the fields that decide which nodes are remediated and how cannot change. The CRD has
// the same rule as CEL transition rules on the NodeHealthCheck type, with a message that cannot name
// the nodes.
func ValidateUpdate(oldNHC, newNHC *remediationv1alpha1.NodeHealthCheck) field.ErrorList {
	running := oldNHC.Status.NodesWithRunningRemediation()
	if len(running) == 0 {
		return nil
	}
	msg := fmt.Sprintf("cannot change while remediation is running for node(s) %s; wait until they are healthy, or set spec.pauseRequests and wait for the running remediations to end",
		strings.Join(running, ", "))
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(oldNHC.Spec.Selector, newNHC.Spec.Selector) {
		errs = append(errs, field.Forbidden(specPath.Child("selector"), msg))
	}
	if !equality.Semantic.DeepEqual(oldNHC.Spec.RemediationTemplate, newNHC.Spec.RemediationTemplate) {
		errs = append(errs, field.Forbidden(specPath.Child("remediationTemplate"), msg))
	}
	if !equality.Semantic.DeepEqual(oldNHC.Spec.EscalatingRemediations, newNHC.Spec.EscalatingRemediations) {
		errs = append(errs, field.Forbidden(specPath.Child("escalatingRemediations"), msg))
	}
	return errs
}

// ValidateDelete refuses to delete a NodeHealthCheck while it remediates a node: its remediation CRs
// would be garbage collected mid-flight and the node left half fenced. The message says how to proceed.
func ValidateDelete(nhc *remediationv1alpha1.NodeHealthCheck) error {
	running := nhc.Status.NodesWithRunningRemediation()
	if len(running) == 0 {
		return nil
	}
	return fmt.Errorf("remediation is running for node(s) %s; to delete this NodeHealthCheck, first set spec.pauseRequests so no new remediation starts, "+
		"then wait until the node(s) are healthy and their remediations are gone, or delete their remediation CRs yourself", strings.Join(running, ", "))
}

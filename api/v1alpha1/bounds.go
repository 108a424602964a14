package v1alpha1

import (
	"math"
	"time"
)

// Bounds of the spec. The CRD enforces each of them (OpenAPI constraints and CEL rules in
// nodehealthcheck_types.go, whose markers repeat these values as literals) and so does the validating
// webhook, so that every spec the API server stores decodes into the Go types and every value in it
// can be used: with the webhook off, one undecodable object would break the operator's
// NodeHealthCheck informer.

// MaxDuration bounds every duration of the spec: unhealthyConditions[].duration,
// escalatingRemediations[].timeout, stormCooldownDuration, and healthyDelay in both directions (a
// negative healthyDelay only means "wait for manual confirmation", so its size does not matter). A
// year is far longer than any real delay or timeout and far inside what time.Duration holds (about
// 292 years), so adding it to a timestamp, or summing the timeouts of every escalation step, cannot
// overflow.
const MaxDuration = 365 * 24 * time.Hour

// MaxDurationLength bounds the length of a duration string ("8759h59m59.999999999s" has 21
// characters), which keeps the cost of the CRD's CEL rules on durations small.
const MaxDurationLength = 64

// MaxBudget is the largest absolute minHealthy or maxUnhealthy: the Go type holds an int32.
const MaxBudget = math.MaxInt32

// MaxBudgetLength bounds the string form of minHealthy and maxUnhealthy: ten digits hold every
// int32, and a percentage has at most four characters.
const MaxBudgetLength = 10

// MinOrder and MaxOrder bound escalatingRemediations[].order to the int32 range, which a Go int holds
// on every platform, including 32-bit ones.
const (
	MinOrder = math.MinInt32
	MaxOrder = math.MaxInt32
)

// MaxUnhealthyConditions bounds spec.unhealthyConditions: one entry per node condition type and
// status is enough, and nodes have a handful of condition types (a dozen with node-problem-detector).
const MaxUnhealthyConditions = 32

// MaxConditionTypeLength bounds unhealthyConditions[].type: a qualified name, as
// metav1.Condition's type.
const MaxConditionTypeLength = 316

// MaxPauseRequests and MaxPauseRequestLength bound spec.pauseRequests: each entry says who paused and
// why, in a sentence.
const (
	MaxPauseRequests      = 32
	MaxPauseRequestLength = 256
)

// Bounds of spec.selector, which matches labels of nodes; real selectors have one to three terms.
const (
	// MaxSelectorRequirements bounds selector.matchExpressions.
	MaxSelectorRequirements = 32
	// MaxSelectorValues bounds the values of one matchExpressions entry (an In over node names, say).
	MaxSelectorValues = 256
	// MaxSelectorLabels bounds selector.matchLabels.
	MaxSelectorLabels = 32
)

// Bounds of the strings of a remediation template reference: the longest API group (253) and version
// (63) with a slash, a kind (a DNS-1035 label), an object name (a DNS-1123 subdomain) and a namespace
// (a DNS-1123 label). FieldPath, resourceVersion and uid are not used and get the object name's bound.
const (
	MaxTemplateAPIVersionLength = 317
	MaxTemplateKindLength       = 63
	MaxTemplateNameLength       = 253
	MaxTemplateNamespaceLength  = 63
	MaxTemplateOtherFieldLength = 253
)

// Bounds of status.remediationOutcomes, which the operator alone writes (the CRD's MaxItems repeat
// them). A NodeHealthCheck's status must stay well under etcd's request limit (1.5 MiB) in a pool of
// 5,000 nodes after a mass failure, when status.unhealthyNodes is long too. At these bounds the record
// takes at most 64 KiB with typical names (a cloud's 42-character node names, a 49-character template
// name: about 600 bytes a node), and at most 140 KiB with names of the longest length Kubernetes
// allows (253 characters for the node and each template); internal/outcome's TestRecordIsBounded
// measures both.
const (
	// MaxOutcomesPerNode is how many of a node's last outcomes are kept, newest last.
	MaxOutcomesPerNode = 3
	// MaxOutcomeNodes is how many nodes' outcomes are kept: beyond it, the nodes whose newest
	// outcome is oldest are dropped.
	MaxOutcomeNodes = 100
)

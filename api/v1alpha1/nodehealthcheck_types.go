package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodeHealthCheckSpec defines which nodes are watched, when they count as unhealthy, how many may be
// remediated at once, and which remediator fixes them.
//
// Every rule below that needs only this object is enforced by the API server itself (CEL), so a
// cluster without the admission webhook still refuses these specs; the webhook adds the rules that
// need lookups and reports all problems at once.
//
// +kubebuilder:validation:XValidation:rule="has(self.remediationTemplate) || has(self.escalatingRemediations)",message="one of remediationTemplate or escalatingRemediations is required",fieldPath=".remediationTemplate",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!(has(self.remediationTemplate) && has(self.escalatingRemediations))",message="remediationTemplate and escalatingRemediations are mutually exclusive: set only one",fieldPath=".escalatingRemediations",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!(has(self.minHealthy) && has(self.maxUnhealthy))",message="minHealthy and maxUnhealthy are mutually exclusive: set only one",fieldPath=".maxUnhealthy",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.maxUnhealthy) || ((!has(self.remediationTemplate) || !has(self.remediationTemplate.kind) || self.remediationTemplate.kind != 'MachineDeletionRemediationTemplate') && (!has(self.escalatingRemediations) || self.escalatingRemediations.all(e, !has(e.remediationTemplate.kind) || e.remediationTemplate.kind != 'MachineDeletionRemediationTemplate')))",message="maxUnhealthy cannot be used with MachineDeletionRemediationTemplate: deleted nodes break the unhealthy count; use minHealthy",fieldPath=".maxUnhealthy",reason=FieldValueForbidden
type NodeHealthCheckSpec struct {
	// Selector selects the nodes whose health this NodeHealthCheck watches. An empty selector
	// selects all nodes. Selecting control-plane and worker nodes in one NodeHealthCheck is strongly
	// discouraged, and two NodeHealthChecks must not select overlapping nodes. At most 32
	// matchExpressions with at most 256 values each, and at most 32 matchLabels.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 32",message="must have at most 32 entries",messageExpression="'must have at most 32 entries: found %d'.format([size(self.matchExpressions)])",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 256)",message="each entry must have at most 256 values",messageExpression="'each entry must have at most 256 values: found more in the entries with key %s'.format([self.matchExpressions.filter(e, has(e.values) && size(e.values) > 256).map(e, e.key)])",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 32",message="must have at most 32 entries",messageExpression="'must have at most 32 entries: found %d'.format([size(self.matchLabels)])",fieldPath=".matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) : (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))",message="each matchExpressions entry needs operator In or NotIn with values, or Exists or DoesNotExist without values"
	Selector metav1.LabelSelector `json:"selector"`

	// UnhealthyConditions lists the node conditions that make a node unhealthy. A node is unhealthy
	// when any entry (logical OR) has matched its condition for at least the entry's duration.
	// Defaults to Ready "False" or Unknown for 300s. At most 32 entries.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:default:={{type:Ready,status:"False",duration:"300s"},{type:Ready,status:Unknown,duration:"300s"}}
	UnhealthyConditions []UnhealthyCondition `json:"unhealthyConditions,omitempty"`

	// MinHealthy allows a new remediation only while at least this many selected nodes are healthy:
	// an absolute number (at most 2147483647) or a percentage (0-100%, rounded up) of the selected
	// nodes. Mutually exclusive with maxUnhealthy; "51%" when neither is set.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:Pattern="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 0",message="must not be negative"
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? (!self.matches('^[0-9]{1,10}$') || int(self) <= 2147483647) : self <= 2147483647",message="must be at most 2147483647"
	MinHealthy *intstr.IntOrString `json:"minHealthy,omitempty"`

	// MaxUnhealthy allows a new remediation only while at most this many selected nodes are
	// unhealthy: an absolute number (at most 2147483647) or a percentage (0-100%, rounded up) of the
	// selected nodes. Mutually exclusive with minHealthy. Must not be used with remediators that
	// delete nodes, such as MachineDeletionRemediation.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:Pattern="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 0",message="must not be negative"
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? (!self.matches('^[0-9]{1,10}$') || int(self) <= 2147483647) : self <= 2147483647",message="must be at most 2147483647"
	MaxUnhealthy *intstr.IntOrString `json:"maxUnhealthy,omitempty"`

	// RemediationTemplate references the remediation template of a remediation provider. For an
	// unhealthy node a remediation CR is created from it: same apiVersion and namespace, kind without
	// the "Template" suffix, name of the node, spec copied from the template's spec.template.spec.
	// Mutually exclusive with escalatingRemediations.
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.apiVersion) && self.apiVersion != ''",message="apiVersion is required",fieldPath=".apiVersion",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="has(self.kind) && self.kind != ''",message="kind is required",fieldPath=".kind",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="has(self.name) && self.name != ''",message="name is required",fieldPath=".name",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="!has(self.kind) || self.kind == '' || (self.kind.endsWith('Template') && size(self.kind) > 8)",message="kind must be a remediation kind followed by \"Template\", for example SelfNodeRemediationTemplate",messageExpression="'kind must be a remediation kind followed by \"Template\", for example SelfNodeRemediationTemplate: found %s'.format([self.kind])",fieldPath=".kind"
	// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || size(self.apiVersion) <= 317",message="apiVersion must be at most 317 characters",messageExpression="'apiVersion must be at most 317 characters: found %d'.format([size(self.apiVersion)])",fieldPath=".apiVersion"
	// +kubebuilder:validation:XValidation:rule="!has(self.kind) || size(self.kind) <= 63",message="kind must be at most 63 characters",messageExpression="'kind must be at most 63 characters: found %d'.format([size(self.kind)])",fieldPath=".kind"
	// +kubebuilder:validation:XValidation:rule="!has(self.name) || size(self.name) <= 253",message="name must be at most 253 characters",messageExpression="'name must be at most 253 characters: found %d'.format([size(self.name)])",fieldPath=".name"
	// +kubebuilder:validation:XValidation:rule="!has(self.__namespace__) || size(self.__namespace__) <= 63",message="namespace must be at most 63 characters",messageExpression="'namespace must be at most 63 characters: found %d'.format([size(self.__namespace__)])",fieldPath=".namespace"
	// +kubebuilder:validation:XValidation:rule="!has(self.fieldPath) || size(self.fieldPath) <= 253",message="fieldPath must be at most 253 characters",messageExpression="'fieldPath must be at most 253 characters: found %d'.format([size(self.fieldPath)])",fieldPath=".fieldPath"
	// +kubebuilder:validation:XValidation:rule="!has(self.resourceVersion) || size(self.resourceVersion) <= 253",message="resourceVersion must be at most 253 characters",messageExpression="'resourceVersion must be at most 253 characters: found %d'.format([size(self.resourceVersion)])",fieldPath=".resourceVersion"
	// +kubebuilder:validation:XValidation:rule="!has(self.uid) || size(self.uid) <= 253",message="uid must be at most 253 characters",messageExpression="'uid must be at most 253 characters: found %d'.format([size(self.uid)])",fieldPath=".uid"
	RemediationTemplate *corev1.ObjectReference `json:"remediationTemplate,omitempty"`

	// EscalatingRemediations lists remediation templates to try one after another, in ascending
	// order: when a step times out, or its remediation CR reports Succeeded=False, the next step
	// starts. Mutually exclusive with remediationTemplate.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="a template is required: escalatingRemediations is empty; add a step with its remediationTemplate, or set remediationTemplate instead",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.order == x.order))",message="EscalatingRemediation Order must be unique",messageExpression="[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19].filter(i, i < size(self) && self.map(s, s.order).indexOf(self[i].order) == i && self.map(s, s.order).lastIndexOf(self[i].order) != i).map(i, self[i].order).size() == 1 ? 'EscalatingRemediation Order must be unique: found duplicate order %d'.format([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19].filter(i, i < size(self) && self.map(s, s.order).indexOf(self[i].order) == i && self.map(s, s.order).lastIndexOf(self[i].order) != i).map(i, self[i].order)[0]]) : 'EscalatingRemediation Order must be unique: found duplicate orders %s'.format([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19].filter(i, i < size(self) && self.map(s, s.order).indexOf(self[i].order) == i && self.map(s, s.order).lastIndexOf(self[i].order) != i).map(i, self[i].order)])"
	EscalatingRemediations []EscalatingRemediation `json:"escalatingRemediations,omitempty"`

	// PauseRequests, while not empty, keeps new remediations from starting; running ones continue.
	// Each entry is free text that says who paused and why, for example
	// "cluster upgrade by @admin". At most 32 entries of at most 256 characters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	PauseRequests []string `json:"pauseRequests,omitempty"`

	// HealthyDelay keeps a recovered node's remediation CRs for this long after the node is healthy
	// again, to ride out flapping or allow post-remediation checks. A negative value keeps them until
	// an administrator confirms the node with the remediation.medik8s.io/manually-confirmed-healthy
	// annotation, or sets this field to 0. Defaults to 0. At most a year (8760h) either way.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern="^-?([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^-?([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$') || (duration(self) >= duration('-8760h') && duration(self) <= duration('8760h'))",message="must be between -8760h and 8760h (365 days)"
	HealthyDelay *metav1.Duration `json:"healthyDelay,omitempty"`

	// StormCooldownDuration, when set, turns on storm recovery: after the healthy-node threshold was
	// violated, no new remediation starts until the threshold has held again for this long. At most
	// a year (8760h).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern="^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$') || duration(self) <= duration('8760h')",message="must be at most 8760h (365 days)"
	StormCooldownDuration *metav1.Duration `json:"stormCooldownDuration,omitempty"`

	// DryRun, when true, makes this NodeHealthCheck observe only: it evaluates, lists and counts the
	// nodes exactly as when active, and reports each remediation it would start (the WouldRemediate
	// event, the DryRun condition, the nodehealthcheck_would_remediate metric), but creates no
	// remediation CR and takes no node lease. CRs created before it was set are deleted when their
	// nodes recover, and not escalated. Later decisions count the remediations it would have
	// started as running (status.unhealthyNodes[].dryRunRemediations). It does not look at node
	// leases. Setting it back to false starts remediation at once. An extension of this operator
	// (docs/compatibility.md); defaults to false.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// RepairBudget, when set, limits how often one node is remediated: a node whose remediation
	// started maxRemediations times within the window gets no new one until the oldest of them is
	// older than the window (condition RepairBudgetExhausted, event and metric say so). The
	// NodeHealthCheck's annotation remediation.medik8s.io/repair-budget-reset, "<node>=<time>" (RFC
	// 3339) entries or a bare time for every node, stops counting remediations started at or before
	// it (never the node's own annotation, which its kubelet may write). The starts are recorded in
	// status.remediationHistory, so the count survives restarts and leader changes. Unset: no limit
	// (as the public operator). An extension of this operator.
	// +optional
	RepairBudget *RepairBudget `json:"repairBudget,omitempty"`

	// MaxInFlight, when set, limits how many selected nodes are under remediation at once, apart
	// from minHealthy and maxUnhealthy: an absolute number (at least 1) or a percentage (1-100%,
	// rounded up, at least one node) of the selected nodes. An unhealthy node beyond the limit waits
	// (skip reason RemediationsInFlight) until a remediation ends; the node that became unhealthy
	// first goes first. Running remediations escalate as usual. Unset: no limit (as the public
	// operator). An extension of this operator.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:Pattern="^((100|[1-9][0-9]?)%|[0-9]+)$"
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1"
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? (!self.matches('^[0-9]{1,10}$') || (int(self) >= 1 && int(self) <= 2147483647)) : self <= 2147483647",message="must be at least 1 and at most 2147483647"
	MaxInFlight *intstr.IntOrString `json:"maxInFlight,omitempty"`

	// SkipNodesBeingRemoved, when true, starts no remediation of a node that is being removed: one
	// the cluster autoscaler (taint ToBeDeletedByClusterAutoscaler), Karpenter (karpenter.sh/disrupted)
	// or the cloud provider (node.cloudprovider.kubernetes.io/shutdown) has tainted. Such a node is
	// listed with skip reason NodeBeingRemoved; running remediations continue. The remediators' own
	// taints never count. Unset or false: such nodes are remediated (as the public operator). An
	// extension of this operator.
	// +optional
	SkipNodesBeingRemoved bool `json:"skipNodesBeingRemoved,omitempty"`

	// AllowRemediationRequests, when true, lets an annotation on a selected Node ask for its
	// remediation now: remediation.medik8s.io/request-remediation, set to the time of the request
	// (RFC 3339; for example kubectl nhc request <node>). The node then counts as unhealthy, as if one
	// of its unhealthy conditions had matched for its duration, and every rule that holds a new
	// remediation still holds this one (pause, upgrades, minHealthy/maxUnhealthy, maxInFlight, where
	// a request goes first, failure domains, the repair budget, leases, one control-plane node at a
	// time). A requested remediation of a node whose conditions stay healthy lasts until its
	// remediator reports (a CR's Succeeded condition), the node's conditions change, or its steps
	// are exhausted. The operator records the request it answered in the node's
	// remediation.medik8s.io/remediation-request-handled annotation and never removes the request; a
	// request older than 24 hours that was not answered is ignored (set a new time to ask again).
	// Since a node's kubelet may annotate its own Node, turning this on lets a node ask for its own
	// remediation. Unset or false: the annotation is ignored, with a warning event. An extension of
	// this operator.
	// +optional
	AllowRemediationRequests bool `json:"allowRemediationRequests,omitempty"`

	// FailureDomain, when set, bounds the unhealthy nodes per failure domain: the selected nodes are
	// grouped by the value of the topologyKey label (nodes without it form one domain of their
	// own), and in a domain where more of them than maxUnhealthy are unhealthy or about to be, no
	// new remediation starts (skip reason FailureDomainUnhealthy), while other domains go on. A zone
	// or rack partition that a flat threshold does not see is left alone. Unset: no bound (as the
	// public operator). An extension of this operator.
	// +optional
	FailureDomain *FailureDomain `json:"failureDomain,omitempty"`
}

// FailureDomain groups the selected nodes by a topology label and bounds the unhealthy ones in
// each group.
type FailureDomain struct {
	// TopologyKey is the node label whose value names a node's failure domain, for example
	// topology.kubernetes.io/zone.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern="^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
	TopologyKey string `json:"topologyKey"`

	// MaxUnhealthy is how many of a domain's selected nodes may be unhealthy or about to be for a new
	// remediation to start in it: an absolute number (at least 1: the failing node counts itself)
	// or a percentage (1-100%, rounded up) of the domain's selected nodes.
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:Pattern="^((100|[1-9][0-9]?)%|[0-9]+)$"
	// +kubebuilder:validation:XValidation:rule="type(self) == string || self >= 1",message="must be at least 1"
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? (!self.matches('^[0-9]{1,10}$') || (int(self) >= 1 && int(self) <= 2147483647)) : self <= 2147483647",message="must be at least 1 and at most 2147483647"
	MaxUnhealthy intstr.IntOrString `json:"maxUnhealthy"`
}

// RepairBudget limits how often one node is remediated (Cluster API's KubeadmControlPlane
// remediation has maxRetry and retryPeriod for the same purpose).
type RepairBudget struct {
	// MaxRemediations is how many remediations of one node may start within Window.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxRemediations int `json:"maxRemediations"`

	// Window is the period the remediations are counted in, for example 24h. More than 0, at most
	// 8760h.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern="^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$') || (duration(self) > duration('0s') && duration(self) <= duration('8760h'))",message="must be more than 0 and at most 8760h (365 days)"
	Window metav1.Duration `json:"window"`
}

// UnhealthyCondition is a node condition type and status that makes a node unhealthy once the node's
// condition has had that status for at least Duration.
type UnhealthyCondition struct {
	// Type is the node condition type, for example Ready.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Type corev1.NodeConditionType `json:"type"`

	// Status is the node condition status: "True", "False" or Unknown.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Enum="True";"False";Unknown
	Status corev1.ConditionStatus `json:"status"`

	// Duration is how long the condition must have had this status, measured from its
	// lastTransitionTime. A Go duration such as "300s", "1.5h" or "2h45m"; from 0s to a year (8760h).
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern="^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$') || duration(self) <= duration('8760h')",message="must be at most 8760h (365 days)"
	Duration metav1.Duration `json:"duration"`
}

// EscalatingRemediation is one step of an escalation: a remediation template, the step's position
// and how long it may try before the next step starts.
// +kubebuilder:validation:XValidation:rule="!self.timeout.matches('^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$') || duration(self.timeout) >= duration('1m')",message="EscalatingRemediation Timeout must be at least one minute",messageExpression="'EscalatingRemediation Timeout must be at least one minute: found timeout ' + self.timeout",fieldPath=".timeout"
type EscalatingRemediation struct {
	// RemediationTemplate references the remediation template of this step.
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.apiVersion) && self.apiVersion != ''",message="apiVersion is required",fieldPath=".apiVersion",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="has(self.kind) && self.kind != ''",message="kind is required",fieldPath=".kind",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="has(self.name) && self.name != ''",message="name is required",fieldPath=".name",reason=FieldValueRequired
	// +kubebuilder:validation:XValidation:rule="!has(self.kind) || self.kind == '' || (self.kind.endsWith('Template') && size(self.kind) > 8)",message="kind must be a remediation kind followed by \"Template\", for example SelfNodeRemediationTemplate",messageExpression="'kind must be a remediation kind followed by \"Template\", for example SelfNodeRemediationTemplate: found %s'.format([self.kind])",fieldPath=".kind"
	// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || size(self.apiVersion) <= 317",message="apiVersion must be at most 317 characters",messageExpression="'apiVersion must be at most 317 characters: found %d'.format([size(self.apiVersion)])",fieldPath=".apiVersion"
	// +kubebuilder:validation:XValidation:rule="!has(self.kind) || size(self.kind) <= 63",message="kind must be at most 63 characters",messageExpression="'kind must be at most 63 characters: found %d'.format([size(self.kind)])",fieldPath=".kind"
	// +kubebuilder:validation:XValidation:rule="!has(self.name) || size(self.name) <= 253",message="name must be at most 253 characters",messageExpression="'name must be at most 253 characters: found %d'.format([size(self.name)])",fieldPath=".name"
	// +kubebuilder:validation:XValidation:rule="!has(self.__namespace__) || size(self.__namespace__) <= 63",message="namespace must be at most 63 characters",messageExpression="'namespace must be at most 63 characters: found %d'.format([size(self.__namespace__)])",fieldPath=".namespace"
	// +kubebuilder:validation:XValidation:rule="!has(self.fieldPath) || size(self.fieldPath) <= 253",message="fieldPath must be at most 253 characters",messageExpression="'fieldPath must be at most 253 characters: found %d'.format([size(self.fieldPath)])",fieldPath=".fieldPath"
	// +kubebuilder:validation:XValidation:rule="!has(self.resourceVersion) || size(self.resourceVersion) <= 253",message="resourceVersion must be at most 253 characters",messageExpression="'resourceVersion must be at most 253 characters: found %d'.format([size(self.resourceVersion)])",fieldPath=".resourceVersion"
	// +kubebuilder:validation:XValidation:rule="!has(self.uid) || size(self.uid) <= 253",message="uid must be at most 253 characters",messageExpression="'uid must be at most 253 characters: found %d'.format([size(self.uid)])",fieldPath=".uid"
	RemediationTemplate corev1.ObjectReference `json:"remediationTemplate"`

	// Order is this step's position: lower orders run first. Orders must be unique and fit in 32 bits
	// (-2147483648 to 2147483647).
	// +required
	// +kubebuilder:validation:Minimum=-2147483648
	// +kubebuilder:validation:Maximum=2147483647
	Order int `json:"order"`

	// Timeout is how long this step may try before the next one starts; from 1m to a year (8760h).
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern="^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$') || duration(self) <= duration('8760h')",message="must be at most 8760h (365 days)"
	Timeout metav1.Duration `json:"timeout"`
}

// NodeHealthCheckStatus is what the operator observed and decided. The nhc controller is its only
// writer.
type NodeHealthCheckStatus struct {
	// ObservedGeneration is the metadata.generation of the spec this status was evaluated from, so
	// that tools waiting for a NodeHealthCheck to be reconciled (kstatus: Helm 4's --wait, Flux,
	// Argo CD) can tell a spec the operator has seen from one it has not. An extension of this
	// operator.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ObservedNodes is the number of nodes the selector selects.
	// +optional
	ObservedNodes *int `json:"observedNodes,omitempty"`

	// HealthyNodes is the number of selected nodes that are healthy and have no remediation left.
	// +optional
	HealthyNodes *int `json:"healthyNodes,omitempty"`

	// RemediatingNodes is the number of nodes in unhealthyNodes that have remediation CRs of this
	// NodeHealthCheck (the nodes being remediated), for `kubectl get nhc`. An extension of this
	// operator.
	// +optional
	RemediatingNodes *int `json:"remediatingNodes,omitempty"`

	// InFlightRemediations is deprecated and always empty; see unhealthyNodes.
	// +optional
	InFlightRemediations map[string]metav1.Time `json:"inFlightRemediations,omitempty"`

	// UnhealthyNodes lists the nodes that are unhealthy or still have remediation CRs, with those
	// CRs.
	// +optional
	// +listType=map
	// +listMapKey=name
	UnhealthyNodes []UnhealthyNode `json:"unhealthyNodes,omitempty"`

	// Conditions describe the NodeHealthCheck's state. Known types: Disabled, StormActive,
	// StormCooldownActive.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Phase summarises the state: Disabled, Paused, Remediating or Enabled.
	// +optional
	Phase NHCPhase `json:"phase,omitempty"`

	// Reason explains the phase in a sentence.
	// +optional
	Reason string `json:"reason,omitempty"`

	// LastUpdateTime is when the status last changed.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`

	// RemediationHistory records, while spec.repairBudget is set, when each node's recent
	// remediations started (within the budget's window), for the repair budget. An extension of
	// this operator.
	// +optional
	// +listType=atomic
	RemediationHistory []NodeRemediationHistory `json:"remediationHistory,omitempty"`

	// DryRunRemediationHistory records, while spec.dryRun and spec.repairBudget are set, when each
	// node's simulated remediations started (within the budget's window), apart from the real ones:
	// a dry-run NodeHealthCheck's repair budget counts both, an active one only remediationHistory,
	// so turning dry-run off never spends the real budget on remediations that did not happen. An
	// extension of this operator.
	// +optional
	// +listType=atomic
	DryRunRemediationHistory []NodeRemediationHistory `json:"dryRunRemediationHistory,omitempty"`

	// RemediationOutcomes records how the last remediations of each node ended (Healthy,
	// NodeReplaced, NodeDeleted, StepsExhausted, NodeLeftSelector, Stopped), sorted by node name:
	// at most 3 per node, newest last, for at most 100 nodes (beyond that, the nodes whose newest
	// outcome is oldest are dropped). Written in the status write that removes a node's
	// remediations from unhealthyNodes (StepsExhausted: in the one that records its last step's
	// timeout). Only real remediation CRs count, never a dry-run NodeHealthCheck's simulated ones.
	// An extension of this operator.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	RemediationOutcomes []NodeRemediationOutcomes `json:"remediationOutcomes,omitempty"`
}

// NodeRemediationOutcomes is how one node's last remediations ended.
type NodeRemediationOutcomes struct {
	// Name is the node's name.
	// +required
	Name string `json:"name"`

	// Outcomes are the node's last ended remediations, oldest first (at most 3).
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	Outcomes []EndedRemediation `json:"outcomes"`
}

// EndedRemediation is how one remediation of a node ended.
type EndedRemediation struct {
	// Outcome says how it ended.
	// +required
	Outcome RemediationOutcome `json:"outcome"`

	// Step is the number (from 1) of the escalation step that ran last: the number of the node's
	// remediation CRs when it ended; 1 for a single remediationTemplate.
	// +required
	Step int `json:"step"`

	// Template is the name of the template of the step that ran last (empty when its CR did not
	// name it).
	// +optional
	Template string `json:"template,omitempty"`

	// Started is when its first remediation CR was created.
	// +required
	Started metav1.Time `json:"started"`

	// Ended is when it ended: when the status write recorded the removal of its CRs, or, for
	// StepsExhausted, when the last step timed out.
	// +required
	Ended metav1.Time `json:"ended"`
}

// NodeRemediationHistory is when one node's recent remediations started.
type NodeRemediationHistory struct {
	// Name is the node's name.
	// +required
	Name string `json:"name"`

	// Started are the start times of the node's remediations within the window, oldest first.
	// +required
	// +listType=atomic
	Started []metav1.Time `json:"started"`
}

// UnhealthyNode is a node that is unhealthy, or healthy again but still has remediation CRs.
type UnhealthyNode struct {
	// Name is the node's name.
	// +required
	Name string `json:"name"`

	// Remediations are the remediation CRs created for this node, in the order they were created.
	// +optional
	// +listType=atomic
	Remediations []Remediation `json:"remediations,omitempty"`

	// ConditionsHealthyTimestamp is when the node's conditions became healthy again.
	// +optional
	ConditionsHealthyTimestamp *metav1.Time `json:"conditionsHealthyTimestamp,omitempty"`

	// HealthyDelayed is true while healthyDelay keeps the node's CRs although it is healthy.
	// +optional
	HealthyDelayed *bool `json:"healthyDelayed,omitempty"`

	// DryRunRemediations are the remediations a dry-run NodeHealthCheck would have created for this
	// node, in order; no CR exists for them. Later decisions count them as the CRs they stand for
	// (the healthy-node budget, escalation timeouts), so that they are the decisions the
	// NodeHealthCheck would make if it were active. Cleared when the node recovers or dry-run is
	// turned off. An extension of this operator.
	// +optional
	// +listType=atomic
	DryRunRemediations []DryRunRemediation `json:"dryRunRemediations,omitempty"`

	// RemediationRequested is the time of the node's remediation request
	// (spec.allowRemediationRequests) that the node is listed for, while it waits or its remediation
	// runs. An extension of this operator.
	// +optional
	RemediationRequested *metav1.Time `json:"remediationRequested,omitempty"`
}

// DryRunRemediation is a remediation CR that a dry-run NodeHealthCheck would have created.
type DryRunRemediation struct {
	// Template references the remediation template the CR would have been created from.
	// +required
	Template corev1.ObjectReference `json:"template"`

	// Started is when the CR would have been created.
	// +required
	Started metav1.Time `json:"started"`

	// TimedOut is when this escalation step would have timed out; unset while it would run.
	// +optional
	TimedOut *metav1.Time `json:"timedOut,omitempty"`
}

// Remediation is one remediation CR created for a node.
type Remediation struct {
	// Resource references the remediation CR, with its uid.
	// +required
	Resource corev1.ObjectReference `json:"resource"`

	// Started is when the remediation CR was created.
	// +required
	Started metav1.Time `json:"started"`

	// TimedOut is when NodeHealthCheck gave up on this CR and escalated; unset while it runs.
	// +optional
	TimedOut *metav1.Time `json:"timedOut,omitempty"`

	// TemplateName is the name of the template the CR was created from, which tells two escalation
	// steps of one kind apart.
	// +optional
	TemplateName string `json:"templateName,omitempty"`
}

// NodeHealthCheck watches the health of a set of nodes and asks a remediator to fix the unhealthy
// ones.
//
// While any node has a running remediation (status.unhealthyNodes[].remediations not empty), the
// spec fields that decide which nodes are remediated and how (selector, remediationTemplate,
// escalatingRemediations) cannot change: the same rule as the webhook's, here as CEL transition
// rules so that it also holds without the webhook. They compare with the stored status, so a
// status-only update never trips them. Two steps are the same when order, template and timeout
// are, the timeout compared as a duration ("300s" is "5m0s"), as the webhook compares decoded values.
// Unlike the webhook's, their message cannot list the nodes: a CEL message that walks
// status.unhealthyNodes exceeds the CRD's cost budget, since that list has no size limit (mass
// failures in large clusters must still fit in the status).
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.status) && has(oldSelf.status.unhealthyNodes) && oldSelf.status.unhealthyNodes.exists(n, has(n.remediations) && size(n.remediations) > 0)) || (self.spec.selector == oldSelf.spec.selector)",message="cannot change while remediation is running for the nodes in status.unhealthyNodes that have remediations; wait until they are healthy, or set spec.pauseRequests and wait for the running remediations to end",fieldPath=".spec.selector",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.status) && has(oldSelf.status.unhealthyNodes) && oldSelf.status.unhealthyNodes.exists(n, has(n.remediations) && size(n.remediations) > 0)) || (has(self.spec.remediationTemplate) == has(oldSelf.spec.remediationTemplate) && (!has(self.spec.remediationTemplate) || self.spec.remediationTemplate == oldSelf.spec.remediationTemplate))",message="cannot change while remediation is running for the nodes in status.unhealthyNodes that have remediations; wait until they are healthy, or set spec.pauseRequests and wait for the running remediations to end",fieldPath=".spec.remediationTemplate",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.status) && has(oldSelf.status.unhealthyNodes) && oldSelf.status.unhealthyNodes.exists(n, has(n.remediations) && size(n.remediations) > 0)) || (has(self.spec.escalatingRemediations) == has(oldSelf.spec.escalatingRemediations) && (!has(self.spec.escalatingRemediations) || (self.spec.escalatingRemediations.map(e, e.order) == oldSelf.spec.escalatingRemediations.map(e, e.order) && self.spec.escalatingRemediations.all(e, oldSelf.spec.escalatingRemediations.exists(o, o.order == e.order && o.remediationTemplate == e.remediationTemplate && (o.timeout == e.timeout || (o.timeout.matches('^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$') && e.timeout.matches('^([0-9]{1,18}([.][0-9]+)?ns|[0-9]{1,15}([.][0-9]+)?(us|µs)|[0-9]{1,12}([.][0-9]+)?ms|[0-9]{1,9}([.][0-9]+)?s|[0-9]{1,7}([.][0-9]+)?m|[0-9]{1,5}([.][0-9]+)?h){1,9}$') && duration(o.timeout) == duration(e.timeout))))))))",message="cannot change while remediation is running for the nodes in status.unhealthyNodes that have remediations; wait until they are healthy, or set spec.pauseRequests and wait for the running remediations to end",fieldPath=".spec.escalatingRemediations",reason=FieldValueForbidden
// +kubebuilder:resource:path=nodehealthchecks,scope=Cluster,shortName=nhc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Disabled, Paused, Remediating or Enabled"
// +kubebuilder:printcolumn:name="Observed",type=integer,JSONPath=`.status.observedNodes`,description="Selected nodes"
// +kubebuilder:printcolumn:name="Healthy",type=integer,JSONPath=`.status.healthyNodes`,description="Healthy nodes without remediation"
// +kubebuilder:printcolumn:name="Remediating",type=integer,JSONPath=`.status.remediatingNodes`,description="Nodes with remediation CRs of this NodeHealthCheck"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="Why the NodeHealthCheck is in its phase"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeHealthCheck struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired behaviour.
	// +required
	Spec NodeHealthCheckSpec `json:"spec"`
	// Status is what the operator observed and decided.
	// +optional
	Status NodeHealthCheckStatus `json:"status,omitempty"`
}

// NodeHealthCheckList is a list of NodeHealthChecks.
// +kubebuilder:object:root=true
type NodeHealthCheckList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the NodeHealthChecks.
	Items []NodeHealthCheck `json:"items"`
}

// NodesWithRunningRemediation returns the names of the nodes that have at least one remediation CR,
// in status order.
func (s *NodeHealthCheckStatus) NodesWithRunningRemediation() []string {
	var names []string
	for _, n := range s.UnhealthyNodes {
		if len(n.Remediations) > 0 {
			names = append(names, n.Name)
		}
	}
	return names
}

// TemplateRefs returns every remediation template the spec references: remediationTemplate, or the
// escalation steps in list order.
func (s *NodeHealthCheckSpec) TemplateRefs() []corev1.ObjectReference {
	if s.RemediationTemplate != nil {
		return []corev1.ObjectReference{*s.RemediationTemplate}
	}
	refs := make([]corev1.ObjectReference, 0, len(s.EscalatingRemediations))
	for _, e := range s.EscalatingRemediations {
		refs = append(refs, e.RemediationTemplate)
	}
	return refs
}

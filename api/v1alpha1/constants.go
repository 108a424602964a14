package v1alpha1

import "time"

// Condition types of NodeHealthCheck.status.conditions. Each type has exactly one writer: the nhc
// controller.
const (
	// ConditionTypeDisabled is True when the NodeHealthCheck cannot work: its template is missing or
	// invalid, or a conflicting MachineHealthCheck exists. No remediation starts while it is True.
	ConditionTypeDisabled = "Disabled"
	// ConditionTypeStormActive is True while the healthy-node threshold is violated and
	// stormCooldownDuration is set.
	ConditionTypeStormActive = "StormActive"
	// ConditionTypeStormCooldownActive is True while the threshold holds again but the storm cooldown
	// has not passed yet.
	ConditionTypeStormCooldownActive = "StormCooldownActive"
	// ConditionTypeUpgradeInProgress is True while an upgrade signal holds new remediations back,
	// Unknown until the upgrade detectors have been evaluated (which holds them back too), and False
	// otherwise. Its reason names the signal; running remediations continue either way, without
	// escalating while it is not False.
	ConditionTypeUpgradeInProgress = "UpgradeInProgress"
	// ConditionTypeDryRun is True while spec.dryRun is set: its reason says whether a remediation
	// would start now (ConditionReasonWouldRemediate, the message naming the nodes and templates) or
	// not (ConditionReasonNothingToRemediate). Absent when spec.dryRun is not set.
	ConditionTypeDryRun = "DryRun"
	// ConditionTypeSelectorOverlap is True while other NodeHealthChecks select some of the nodes this
	// one selects (reason ConditionReasonOverlappingSelectors, the message naming them and how many);
	// absent otherwise. Which one remediates a node both select stays "first wins".
	ConditionTypeSelectorOverlap = "SelectorOverlap"
	// ConditionTypeRepairBudgetExhausted is True while spec.repairBudget holds back the remediation
	// of some unhealthy nodes (reason RepairBudgetExhausted; the message names them and when each may
	// be remediated again); absent otherwise.
	ConditionTypeRepairBudgetExhausted = "RepairBudgetExhausted"
	// ConditionTypeFailureDomainUnhealthy is True while, in some failure domain
	// (spec.failureDomain), more selected nodes than the bound are unhealthy or about to be, so no new
	// remediation starts there (reason FailureDomainUnhealthy; the message names each such domain
	// and its counts); absent otherwise.
	ConditionTypeFailureDomainUnhealthy = "FailureDomainUnhealthy"
	// ConditionTypeRemediationsStalled is True while some nodes' remediation has ended without them
	// being done with: every escalation step ran and the last timed out or failed (the node is
	// still unhealthy: a machine dead for good, say), or the node is healthy again and its CRs wait
	// for manual confirmation (a negative healthyDelay). Such a remediation holds no maxInFlight
	// slot; the condition, an event and a metric make sure it is not forgotten.
	ConditionTypeRemediationsStalled = "RemediationsStalled"
	// ConditionTypeConditionTimesUntrusted is True while some selected nodes report a condition
	// whose lastTransitionTime the operator does not trust: later than the manager's clock, earlier
	// than the node's creation, or, at a change the operator's watch showed, earlier than that
	// moment or the condition's heartbeat by more than the clock-skew bound (a kubelet's or
	// node-problem-detector's clock that is off, or a forged time). Such a condition counts from
	// when the operator saw it change, so a short blip never counts as its whole duration at once.
	ConditionTypeConditionTimesUntrusted = "ConditionTimesUntrusted"
	// ConditionTypeMachineHealthCheckOverlap is True while Cluster API MachineHealthChecks cover some
	// of the selected nodes (reason ConditionReasonCoveredByMachineHealthCheck; the message names
	// them and how many): those nodes are left to them. Absent otherwise.
	ConditionTypeMachineHealthCheckOverlap = "MachineHealthCheckOverlap"
	// ConditionTypeClockSkewExceeded is True while the skew between the manager's clock and the API
	// server's is beyond --max-clock-skew (reason ClockSkewBeyondBound): durations read from
	// timestamps others wrote cannot be judged, so no remediation starts or escalates. Unknown until
	// the skew was first measured, False within the bound; absent when the bound is off.
	ConditionTypeClockSkewExceeded = "ClockSkewExceeded"
)

// Reasons of NodeHealthCheck conditions.
const (
	// ConditionReasonWouldRemediate is the reason of DryRun=True while the decision starts a
	// remediation that dry-run holds back.
	ConditionReasonWouldRemediate = "WouldRemediate"
	// ConditionReasonNothingToRemediate is the reason of DryRun=True while no remediation would start.
	ConditionReasonNothingToRemediate = "NothingToRemediate"
	// ConditionReasonOverlappingSelectors is the reason of SelectorOverlap=True.
	ConditionReasonOverlappingSelectors = "OverlappingSelectors"
	// ConditionReasonRepairBudgetExhausted is the reason of RepairBudgetExhausted=True.
	ConditionReasonRepairBudgetExhausted = "RepairBudgetExhausted"
	// ConditionReasonStepsExhausted and ConditionReasonAwaitingConfirmation are the reasons of
	// RemediationsStalled=True: some node's steps are exhausted (whatever else waits), or nodes only
	// wait for manual confirmation.
	ConditionReasonStepsExhausted = "StepsExhausted"
	// ConditionReasonClockOffConditionWriter is the reason of ConditionTimesUntrusted=True.
	ConditionReasonClockOffConditionWriter = "ConditionWriterClockOff"
	ConditionReasonAwaitingConfirmation    = "AwaitingConfirmation"
	// ConditionReasonFailureDomainUnhealthy is the reason of FailureDomainUnhealthy=True.
	ConditionReasonFailureDomainUnhealthy = "FailureDomainUnhealthy"
	// ConditionReasonCoveredByMachineHealthCheck is the reason of MachineHealthCheckOverlap=True.
	ConditionReasonCoveredByMachineHealthCheck = "CoveredByMachineHealthCheck"
	// ConditionReasonClockSkewBeyondBound, ConditionReasonClockSkewWithinBound and
	// ConditionReasonClockSkewUnknown are the reasons of ClockSkewExceeded True, False and Unknown.
	ConditionReasonClockSkewBeyondBound = "ClockSkewBeyondBound"
	ConditionReasonClockSkewWithinBound = "ClockSkewWithinBound"
	ConditionReasonClockSkewUnknown     = "ClockSkewNotMeasured"
	// ConditionReasonEnabled is the reason of Disabled=False.
	ConditionReasonEnabled = "NodeHealthCheckEnabled"
	// ConditionReasonDisabledTemplateNotFound is the reason of Disabled=True when a referenced
	// remediation template (or its kind) does not exist.
	ConditionReasonDisabledTemplateNotFound = "RemediationTemplateNotFound"
	// ConditionReasonDisabledTemplateInvalid is the reason of Disabled=True when a referenced
	// remediation template exists but lacks spec.template.
	ConditionReasonDisabledTemplateInvalid = "RemediationTemplateInvalid"
	// ConditionReasonDisabledTemplateUnavailable is the reason of Disabled=True when a referenced
	// remediation template's kind cannot be read now (its conversion webhook down, its informer not
	// synced); the message names the template and the API server's error.
	ConditionReasonDisabledTemplateUnavailable = "RemediationTemplateUnavailable"
	// ConditionReasonDisabledMHC is the reason of Disabled=True when a conflicting MachineHealthCheck
	// exists.
	ConditionReasonDisabledMHC = "ConflictingMachineHealthCheckDetected"
	// ConditionReasonDisabledInvalidConfig is the reason of Disabled=True for a configuration that
	// passed admission but cannot work (for example a webhook that was not installed).
	ConditionReasonDisabledInvalidConfig = "InvalidConfiguration"
	// ConditionReasonDisabledRemediationUnavailable is the reason of Disabled=True when the CRs of a
	// remediation kind the NodeHealthCheck uses cannot be listed or watched now (a conversion webhook
	// down, a CRD being deleted); the message names the kind and the API server's error.
	ConditionReasonDisabledRemediationUnavailable = "RemediationKindUnavailable"
	// ConditionReasonDisabledRemediationNotWatchable is the reason of Disabled=True when the operator
	// may not list and watch the remediation CR kind of a referenced template: it cannot tell which
	// nodes are remediated, so it starts no remediation.
	ConditionReasonDisabledRemediationNotWatchable = "RemediationKindNotWatchable"
	// ConditionReasonHealthyNodeThresholdChange is the reason of the storm conditions.
	ConditionReasonHealthyNodeThresholdChange = "HealthyNodeThresholdChange"

	// ConditionReasonNoUpgrade is the reason of UpgradeInProgress=False when no signal is seen.
	ConditionReasonNoUpgrade = "NoUpgradeDetected"
	// ConditionReasonUpgradeUnknown is the reason of UpgradeInProgress=Unknown: the upgrade detectors
	// have not been evaluated yet (or cannot be; the message says why).
	ConditionReasonUpgradeUnknown = "UpgradeStateUnknown"
	// ConditionReasonUpgradePauseExpired is the reason of UpgradeInProgress=False when every signal
	// seen has held remediation back for longer than the operator's maximum pause, each from when it
	// began: remediation resumes although they are still seen.
	ConditionReasonUpgradePauseExpired = "UpgradePauseExpired"
	// ConditionReasonClusterVersionProgressing: OpenShift's ClusterVersion is Progressing.
	ConditionReasonClusterVersionProgressing = "ClusterVersionProgressing"
	// ConditionReasonMachineConfigUpdating: on a hosted control plane, a node about to be remediated
	// is being updated by the Machine Config Operator.
	ConditionReasonMachineConfigUpdating = "MachineConfigUpdating"
	// ConditionReasonClusterAPIRollout: a Cluster API KubeadmControlPlane or MachineDeployment rolls out.
	ConditionReasonClusterAPIRollout = "ClusterAPIRollout"
	// ConditionReasonNodeRollingUpgrade: selected nodes run kubelets of different minor versions and
	// at least one of them is cordoned.
	ConditionReasonNodeRollingUpgrade = "NodeRollingUpgrade"
	// ConditionReasonPauseObject: the cluster-wide pause ConfigMap or Lease exists.
	ConditionReasonPauseObject = "UpgradePauseRequested"
)

// NHCPhase is a short, human readable summary of what a NodeHealthCheck is doing.
// +kubebuilder:validation:Enum=Disabled;Paused;Remediating;Enabled
type NHCPhase string

// Known phases, in order of precedence: Disabled > Paused > Remediating > Enabled.
const (
	// PhaseDisabled means the Disabled condition is True.
	PhaseDisabled NHCPhase = "Disabled"
	// PhasePaused means spec.pauseRequests is set (or an upgrade pauses remediation): no new
	// remediation starts and none escalates; running ones continue.
	PhasePaused NHCPhase = "Paused"
	// PhaseRemediating means at least one node has a running remediation.
	PhaseRemediating NHCPhase = "Remediating"
	// PhaseEnabled means the NodeHealthCheck watches its nodes and nothing is being remediated.
	PhaseEnabled NHCPhase = "Enabled"
)

// RemediationOutcome says how a remediation ended (status.remediationOutcomes, the metric
// nodehealthcheck_remediation_outcomes_total). A remediation is a node's remediation CRs of one
// NodeHealthCheck, from its first CR to the last one's removal; only real CRs count, never a
// dry-run NodeHealthCheck's simulated steps. An extension of this operator.
// +kubebuilder:validation:Enum=Healthy;NodeReplaced;NodeDeleted;StepsExhausted;NodeLeftSelector;Stopped
type RemediationOutcome string

// Known outcomes. Each remediation ends with exactly one, recorded once, in the status write that
// removes the node's remediations from status.unhealthyNodes; StepsExhausted instead when its last
// escalation step times out, and then nothing more when the remediation ends.
const (
	// OutcomeHealthy: the node's conditions are healthy again and its CRs were removed.
	OutcomeHealthy RemediationOutcome = "Healthy"
	// OutcomeNodeReplaced: the node object was recreated (its creationTimestamp is later than the
	// remediation's first CR) and is healthy.
	OutcomeNodeReplaced RemediationOutcome = "NodeReplaced"
	// OutcomeNodeDeleted: the node object is gone (or was recreated and is not healthy: the node
	// that was remediated is gone, the new one gets its own remediation).
	OutcomeNodeDeleted RemediationOutcome = "NodeDeleted"
	// OutcomeStepsExhausted: every escalation step timed out or failed while the node stayed
	// unhealthy (the last step's CR was marked timed out). Recorded when that happens, once; not
	// again when the node later recovers or its CRs go.
	OutcomeStepsExhausted RemediationOutcome = "StepsExhausted"
	// OutcomeNodeLeftSelector: the node still exists but the NodeHealthCheck's selector no longer
	// selects it, so its CRs were removed.
	OutcomeNodeLeftSelector RemediationOutcome = "NodeLeftSelector"
	// OutcomeStopped: the remediation's CRs went for any other reason while the node is selected and
	// not healthy: a CR deleted (or its owner reference removed) by someone else. (The changes of a
	// NodeHealthCheck that could end a remediation otherwise, of its selector or templates, are
	// refused while it runs.)
	OutcomeStopped RemediationOutcome = "Stopped"
)

// RemediationOutcomes are the known outcomes, in the order of the constants.
var RemediationOutcomes = []RemediationOutcome{OutcomeHealthy, OutcomeNodeReplaced, OutcomeNodeDeleted, OutcomeStepsExhausted, OutcomeNodeLeftSelector, OutcomeStopped}

// Labels on remediation CRs, as the public operator sets them.
const (
	// PartOfLabel is set on every remediation CR to PartOfValue.
	PartOfLabel = "app.kubernetes.io/part-of"
	PartOfValue = "node-healthcheck-controller"
	// ControlPlaneCRLabel (empty value) marks a remediation CR of a control-plane node; such CRs
	// count for the one-control-plane-node-at-a-time rule even after their node is gone.
	ControlPlaneCRLabel = "remediation.medik8s.io/isControlPlaneNode"
)

// Annotation keys of the remediation contract. Remediators and administrators read and write these,
// so their values are part of the API.
const (
	// NHCTimedOutAnnotation is set on a remediation CR, with an RFC 3339 time, when NodeHealthCheck
	// gave up on it (its escalation step timed out or it reported Succeeded=False). The remediator
	// may use it to stop its efforts.
	NHCTimedOutAnnotation = "remediation.medik8s.io/nhc-timed-out"
	// NodeNameAnnotation is set on a remediation CR to the name of the node it remediates; needed
	// where the CR name is generated.
	NodeNameAnnotation = "remediation.medik8s.io/node-name"
	// TemplateNameAnnotation is set on a remediation CR to the name of the template it was created
	// from.
	TemplateNameAnnotation = "remediation.medik8s.io/template-name"
	// HealthyDelayAnnotation is set on a remediation CR to the time its node became healthy again
	// while spec.healthyDelay keeps the CR.
	HealthyDelayAnnotation = "remediation.medik8s.io/healthy-delay"
	// ManuallyConfirmedHealthyAnnotation on a Node (any value) lets NodeHealthCheck skip healthyDelay
	// for that node. The operator removes it once the node's remediation CRs are gone.
	ManuallyConfirmedHealthyAnnotation = "remediation.medik8s.io/manually-confirmed-healthy"
	// RepairBudgetResetAnnotation on a NodeHealthCheck makes spec.repairBudget count only the
	// remediations started after a time (RFC 3339): "<node>=<time>" entries, separated by commas or
	// spaces, for the nodes named, or a bare "<time>" for every node. An administrator who repaired
	// node w1 resets its budget with kubectl annotate nhc <name>
	// remediation.medik8s.io/repair-budget-reset=w1=$(date -u +%Y-%m-%dT%H:%M:%SZ) --overwrite. An
	// entry that is not such a time, or is dated after the operator's time beyond the clock-skew
	// bound, is ignored with an event. The same annotation on a Node is not trusted (the node's own
	// kubelet may write any annotation on it, and would clear its own history): it is ignored, with
	// an event saying where to set it.
	RepairBudgetResetAnnotation = "remediation.medik8s.io/repair-budget-reset"
	// RemediationRequestAnnotation on a Node, set to a time (RFC 3339), asks the NodeHealthCheck that
	// selects the node to remediate it now, where spec.allowRemediationRequests is set: kubectl
	// annotate node <node> remediation.medik8s.io/request-remediation=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	// --overwrite. The operator leaves it in place: a request is answered once, by the remediation
	// recorded in RemediationRequestHandledAnnotation. A request older than
	// RemediationRequestMaxAge that was not answered is ignored; one dated in the future counts from
	// now.
	RemediationRequestAnnotation = "remediation.medik8s.io/request-remediation"
	// RemediationRequestHandledAnnotation on a Node is written by the operator: the time of the last
	// remediation request a remediation answered (a request made while a remediation of the node
	// ran is answered by it). A request at or before it is not acted on again.
	RemediationRequestHandledAnnotation = "remediation.medik8s.io/remediation-request-handled"
	// RemediationRequestedAtAnnotation on a remediation CR is the time of the request it answers
	// (RemediationRequestAnnotation); absent on CRs of nodes found unhealthy.
	RemediationRequestedAtAnnotation = "remediation.medik8s.io/requested-at"
	// FailureDomainAnnotation on a remediation CR records the node's failure domain when the CR was
	// created, as "<topologyKey>=<value>" (spec.failureDomain): a node that later moves to another
	// domain still counts in this one while the remediation runs, also after a restart.
	FailureDomainAnnotation = "remediation.medik8s.io/failure-domain"
	// RemediationRequestBaselineAnnotation on the first remediation CR that answers a request records
	// the node as the remediation found it, as JSON: {"at": the operator's time (RFC 3339),
	// "conditions": [the node's conditions of the types the unhealthy conditions name, each with
	// type, status and lastTransitionTime]}. The remediation is answered once they differ (the node
	// went down, and maybe came back): compared with the node's own timestamps, never with another
	// clock's.
	RemediationRequestBaselineAnnotation = "remediation.medik8s.io/request-baseline"
	// MultipleTemplatesSupportAnnotation on a remediation template (value "true") says its remediator
	// handles several CRs per node: CRs get generated names, and one kind may appear in several
	// escalation steps.
	MultipleTemplatesSupportAnnotation = "remediation.medik8s.io/multiple-templates-support"
	// MachineConfigCurrentAnnotation and MachineConfigDesiredAnnotation on a Node are the Machine
	// Config Operator's: they differ while the node is being updated.
	MachineConfigCurrentAnnotation = "machineconfiguration.openshift.io/currentConfig"
	MachineConfigDesiredAnnotation = "machineconfiguration.openshift.io/desiredConfig"
	// OldRemediationCRAnnotation flags a remediation CR that has been running for too long.
	OldRemediationCRAnnotation = "nodehealthcheck.medik8s.io/old-remediation-cr-flag"
	// OldRemediationCRFlag is the value written (the public operator's); only presence is read.
	OldRemediationCRFlag = "flagon"
)

// Label keys of the remediation contract.
const (
	// ExcludeFromRemediationLabel with value "true" on a Node keeps NodeHealthCheck from remediating it.
	ExcludeFromRemediationLabel = "remediation.medik8s.io/exclude-from-remediation"
	// AggregateToExtRemediationLabel with value "true" on a remediator's ClusterRole aggregates its
	// rules (template get, remediation CR CRUD) into the operator's role.
	AggregateToExtRemediationLabel = "rbac.ext-remediation/aggregate-to-ext-remediation"
)

// Remediation contract conventions.
const (
	// TemplateSuffix ends the kind of every remediation template; the remediation CR's kind is the
	// template kind without it.
	TemplateSuffix = "Template"
	// MachineDeletionRemediationTemplateKind is the template kind of the machine-deletion remediator,
	// which deletes nodes and therefore cannot be combined with maxUnhealthy.
	MachineDeletionRemediationTemplateKind = "MachineDeletionRemediationTemplate"
	// RemediationConditionSucceeded is the condition type a remediator sets on its CR: False makes
	// NodeHealthCheck escalate at once, True means the remediator is done.
	RemediationConditionSucceeded = "Succeeded"
	// RemediationConditionPermanentNodeDeletionExpected is the condition type a remediator sets on
	// its CR when it deletes the node for good: the CR is then kept after the node is gone.
	RemediationConditionPermanentNodeDeletionExpected = "PermanentNodeDeletionExpected"
)

// RemediationRequestMaxAge is how long a remediation request (RemediationRequestAnnotation) that was
// not answered stays valid: an administrator's "remediate now" does not reboot or fence a node days
// later, when the rule that held it (a pause, an upgrade) ends or the node joins a NodeHealthCheck.
const RemediationRequestMaxAge = 24 * time.Hour

package v1alpha1

// Event reasons of the operator's events regarding NodeHealthChecks and Nodes. Most are the public
// operator's, so existing alerts and dashboards keep working; each is defined here once.
const (
	// EventReasonDisabled (warning): the NodeHealthCheck became Disabled; the message says why.
	EventReasonDisabled = "Disabled"
	// EventReasonEnabled: the NodeHealthCheck is no longer Disabled.
	EventReasonEnabled = "Enabled"
	// EventReasonDetectedUnhealthy: a selected node became unhealthy.
	EventReasonDetectedUnhealthy = "DetectedUnhealthy"
	// EventReasonRemediationSkipped (warning): an unhealthy node gets no remediation now; the
	// message says why (budget, pause, lease, etcd quorum, another NodeHealthCheck, ...).
	EventReasonRemediationSkipped = "RemediationSkipped"
	// EventReasonInvalidNodeLabel (warning): a node's exclude-from-remediation label has an empty
	// value and is ignored.
	EventReasonInvalidNodeLabel = "InvalidNodeLabel"
	// EventReasonClockSkewExceeded (warning): the manager's clock is too far from the API server's
	// (ClockSkewExceeded=True); the message says by how much. EventReasonClockSkewResolved: it is
	// within the bound again.
	EventReasonClockSkewExceeded = "ClockSkewExceeded"
	EventReasonClockSkewResolved = "ClockSkewResolved"
	// EventReasonInvalidNodeAnnotation (warning): an annotation the operator reads on a node has a
	// value it cannot use and is ignored (a repair-budget-reset value that is not an RFC 3339 time).
	EventReasonInvalidNodeAnnotation = "InvalidNodeAnnotation"
	// EventReasonRemediationRequested: a node's remediation request (spec.allowRemediationRequests)
	// was seen; the node counts as unhealthy until it is answered.
	EventReasonRemediationRequested = "RemediationRequested"
	// EventReasonRemediationRequestIgnored (warning): a node's remediation request is not acted on;
	// the message says why (not allowed by the NodeHealthCheck, not a time, older than 24 hours,
	// dry-run).
	EventReasonRemediationRequestIgnored = "RemediationRequestIgnored"
	// EventReasonRemediationCreated: a remediation CR was created.
	EventReasonRemediationCreated = "RemediationCreated"
	// EventReasonRemediationRefused (warning): the API server refused to create a remediation CR in
	// a way a retry cannot fix (forbidden, invalid); the message names the CR and the API's answer.
	EventReasonRemediationRefused = "RemediationRefused"
	// EventReasonRemediationRemoved: a remediation CR was deleted.
	EventReasonRemediationRemoved = "RemediationRemoved"
	// EventReasonNoTemplateLeft (warning): the last escalation step timed out or failed.
	EventReasonNoTemplateLeft = "NoTemplateLeft"
	// EventReasonInvalidAnnotation (warning), regarding a NodeHealthCheck: one of its annotations the
	// operator reads (repair-budget-reset) holds an entry it ignores, and why.
	EventReasonInvalidAnnotation = "InvalidAnnotation"
	// EventReasonRemovalHoldExpired (warning), regarding a node: the node has been being removed for
	// longer than the operator's --removal-hold (a drain or finalizer that never completes); the
	// removal holds its remediation back no longer (spec.skipNodesBeingRemoved).
	EventReasonRemovalHoldExpired = "RemovalHoldExpired"
	// EventReasonRemediationStalled (warning), regarding a NodeHealthCheck and related to a node: the
	// node's remediation ended without it being done with (every step exhausted, or waiting for
	// manual confirmation); it no longer holds a maxInFlight slot (the RemediationsStalled
	// condition).
	EventReasonRemediationStalled = "RemediationStalled"
	// EventReasonWouldRemediate: a dry-run NodeHealthCheck would now create a remediation CR for a
	// node (its first, or the next escalation step); it creates none.
	EventReasonWouldRemediate = "WouldRemediate"
	// EventReasonSelectorOverlap (warning): the NodeHealthCheck began to select nodes another one
	// selects too (the SelectorOverlap condition).
	EventReasonSelectorOverlap = "SelectorOverlap"
	// EventReasonRepairBudgetExhausted (warning): an unhealthy node is not remediated because it was
	// remediated spec.repairBudget.maxRemediations times within the window.
	EventReasonRepairBudgetExhausted = "RepairBudgetExhausted"
	// EventReasonFailureDomainUnhealthy (warning): a failure domain (spec.failureDomain) began to hold
	// more unhealthy nodes than its bound; no new remediation starts there until it holds fewer.
	EventReasonFailureDomainUnhealthy = "FailureDomainUnhealthy"
	// EventReasonMachineLinkRejected (warning), regarding a NodeHealthCheck and related to a node:
	// the node's annotations name a Machine that does not confirm the link (missing, its
	// status.nodeRef names no or another node, another cluster than the node names): the node's CR
	// is created without that Machine as an owner, and the Machine's role does not count.
	EventReasonMachineLinkRejected = "MachineLinkRejected"
	// EventReasonOldRemediationCR (warning): a remediation CR has been running for too long.
	EventReasonOldRemediationCR = "RemediationCRTooOld"

	// EventReasonStormRecoveryStarted (warning): the healthy-node threshold was violated with storm
	// recovery on.
	EventReasonStormRecoveryStarted = "StormRecoveryStarted"
	// EventReasonStormRecoveryCooldownStarted: the threshold holds again; the cooldown runs.
	EventReasonStormRecoveryCooldownStarted = "StormRecoveryCooldownStarted"
	// EventReasonStormRecoveryEnded: the cooldown passed; remediation resumes.
	EventReasonStormRecoveryEnded = "StormRecoveryEnded"

	// EventReasonUpgradeDetected: an upgrade signal holds new remediations back.
	EventReasonUpgradeDetected = "UpgradeDetected"
	// EventReasonUpgradeEnded: no upgrade signal is seen any more; remediation resumes.
	EventReasonUpgradeEnded = "UpgradeEnded"
	// EventReasonUpgradePauseExpired (warning): signals held remediation back for the maximum pause;
	// remediation resumes although they are still seen.
	EventReasonUpgradePauseExpired = "UpgradePauseExpired"
	// EventReasonConflictingMachineHealthCheck (warning, on a MachineHealthCheck): NodeHealthChecks
	// are disabled while it exists.
	EventReasonConflictingMachineHealthCheck = "ConflictingMachineHealthCheck"
	// EventReasonTerminationHandlerTolerated (on a MachineHealthCheck): the default termination
	// handler is tolerated, and terminating nodes are left to it.
	EventReasonTerminationHandlerTolerated = "TerminationHandlerTolerated"
	// EventReasonInvalidSpec (warning) regards a NodeHealthCheck the operator cannot decode: it is
	// ignored (not evaluated, nothing remediated, its remediation CRs left as they are) until its spec
	// is fixed.
	EventReasonInvalidSpec = "InvalidSpec"
)

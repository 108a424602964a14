// Package testutil holds what the project's envtest suites share: starting a real control plane
// (kube-apiserver and etcd from KUBEBUILDER_ASSETS) with the project's CRDs and the test remediators'
// CRDs; one bootstrap for the controller suites (ControllerSuite: BeforeSuite, AfterSuite, the
// fake clock); builders for NodeHealthCheck objects, templates and remediation CRs (the remediation
// controller's own builder), and a pool of nodes with its NodeHealthCheck (NewPool; Sicken makes a
// node of it unhealthy); readers of status (Status, Condition, matched by HaveCondition); one lister
// of remediation CRs (ListCRs, NodeCRs, CRsOf); and the witnesses a Consistently that nothing
// happens must follow (witness.go: SeenHealthy for the shared cache and the nhc controller,
// RemediationDecided for the remediation controller). It is imported by tests only.
package testutil

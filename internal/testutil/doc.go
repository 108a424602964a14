// Package testutil holds what the project's envtest suites share: starting a real control plane
// (kube-apiserver and etcd from KUBEBUILDER_ASSETS) with the project's CRDs, the test remediators'
// CRDs, and builders for NodeHealthCheck objects. It is imported by tests only.
package testutil

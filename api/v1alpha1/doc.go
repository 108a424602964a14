// Package v1alpha1 holds the NodeHealthCheck API (remediation.medik8s.io/v1alpha1): the types, the
// constants of the remediation contract (condition types, reasons, phases, annotation and label keys)
// and the default values. It is wire-compatible with the public Node Healthcheck operator, so its
// manifests and remediators work unchanged.
//
// The package has no controller-runtime dependency: it is imported by the operator, by its tests and
// by anyone who wants to read NodeHealthCheck objects with a plain client.
//
// +kubebuilder:object:generate=true
// +groupName=remediation.medik8s.io
package v1alpha1

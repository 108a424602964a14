// Package v1alpha1 owns admission for NodeHealthCheck: the mutating webhook that applies the API's
// defaults and the validating webhook that refuses specs that cannot work, on create, update and
// delete.
//
// Validation is split in two layers. ValidateSpec, ValidateUpdate and ValidateDelete are pure
// functions of the objects and return every problem at once as a field.ErrorList with field paths;
// the rules that need only the object itself are also CEL rules in the CRD, so the API server refuses
// those specs when the webhook is down. The Validator adds what CEL cannot know: whether a template's
// kind is namespaced, and whether templates that share a kind support several remediations per node
// (through the manager's cache: RESTMapper and a metadata-only informer), and whether the cluster's
// control-plane topology is supported (OpenShift's Infrastructure/cluster, one uncached read per
// create or update, so a topology change is never missed; admissions are rare).
package v1alpha1

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
// control-plane topology is supported (OpenShift's Infrastructure/cluster, read from the same cache
// and watched, so a topology change is seen as the watch delivers it).
//
// The validating webhook (ValidatingWebhook) is controller-runtime's typed validator behind a small
// handler for one case the typed one cannot serve: a stored NodeHealthCheck that does not decode into
// the Go type (written before the CRD bounded its values, or while the webhook was off). The typed
// validator refuses every update and delete of it, as it cannot decode the old object; here an update
// is validated on its own, without the rules that compare it with the stored version, and a delete is
// allowed, each with a warning that names the object and what did not decode.
//
// Files: nodehealthcheck_webhook.go is the typed admission (setup, defaulting, the Validator's
// create, update and delete); validation.go the pure rules; undecodable.go the handler for stored
// objects that do not decode; lookups.go what admission reads from the cluster (templates, the
// control-plane topology, overlapping selectors) through the manager's cache.
package v1alpha1

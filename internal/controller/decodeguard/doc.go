// Package decodeguard keeps one NodeHealthCheck that the operator cannot decode from breaking the
// cache for all the others.
//
// The API server may store a NodeHealthCheck its Go type cannot hold: an integer too large for its
// field (spec.minHealthy: 99999999999), a duration time.ParseDuration refuses
// (spec.healthyDelay: "99999999999h"), a value of the wrong type. That happens when the CRD's
// validation was weaker when the object was written, or the CRD was installed without CEL. A typed
// informer decodes whole lists: one such object fails every list, the reflector retries forever and
// the cache never syncs, so no NodeHealthCheck is evaluated and the manager never becomes ready.
//
// This package owns the NodeHealthCheck informer's list and watch (see NewCache): it lists and
// watches NodeHealthChecks as unstructured objects and decodes each one on its own, exactly as the
// typed client would (Decode). An object that does not decode is left out of the cache and recorded
// in a Registry; a watch event that makes a cached object undecodable removes it from the cache (the
// controllers see it as deleted, and do nothing for it), and once it is fixed it is added again.
//
// Reporting: the list-watch logs each newly undecodable object with its decode error, the Registry
// keeps the metric nodehealthcheck_undecodable (gauge, label nhc: 1 while that NodeHealthCheck cannot
// be decoded; the series is removed when it is fixed or deleted), and the Reporter controller, on the
// leader, emits a Warning event with reason InvalidSpec regarding the NodeHealthCheck that says what
// to fix. See docs/metrics.md and docs/architecture.md.
package decodeguard

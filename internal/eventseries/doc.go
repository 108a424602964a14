// Package eventseries merges bursts of similar events into one series, as client-go's event
// aggregator merges similar core events (the public operator's recorder): events of one type and
// reason regarding one object are similar, whatever their note, action and related object. While they
// come in a burst (each within Window of the previous one), the first Burst of them are recorded as
// they are, each related to its node; the rest are recorded without a related object, under the
// burst's first combined action, with the note prefixed "(combined from similar events): ", so that
// client-go's events.k8s.io recorder merges them into one series (one create, one patch when it
// repeats, then its periodic refresh). An isolated event, or the first few of a mass failure,
// still name their node; a mass failure of one NodeHealthCheck costs a few event writes per reason
// instead of one per node. The combined events regard their object without its resourceVersion,
// which changes with every status write of a NodeHealthCheck and is part of what client-go's
// recorder tells series apart by.
//
// It owns no API object and reads nothing; Recorder wraps the manager's recorder of each controller
// (internal/controller.SetupWithManager).
package eventseries

// Package health holds the operator's pure decisions: whether a node is healthy, soon unhealthy or
// unhealthy under a NodeHealthCheck's unhealthy conditions, how many healthy nodes the remediation
// budget (minHealthy or maxUnhealthy) requires, and, for one NodeHealthCheck, which nodes to start
// remediating, which to leave alone and why, which have recovered, and when anything next changes on
// its own.
//
// Everything here is a function of plain inputs and the current time: no client, no clock, no
// logging. Controllers gather the inputs from the cache, call these functions and act on the result;
// tests drive them with tables, fuzzing and simulated node histories.
package health

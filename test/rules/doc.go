// Package rules tests the Helm chart's Prometheus alerts with Prometheus' own tools, in a module of
// its own so that the Prometheus module's dependencies stay out of the operator's go.mod: `promtool
// check rules` parses every expression and annotation template, `promtool test rules`
// (testdata/alerts.yaml) evaluates each alert on series that should fire it and on series that
// should not, and the PromQL parser reads the metric names of every alert and dashboard query
// (they must be in testdata/metrics.txt, which test/chart checks against what the manager
// registers) and checks that aggregations keep namespace. `make test-rules` builds promtool from
// this module (bin/promtool-<version>) and runs it.
package rules

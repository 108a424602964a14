// Package scale is the scale benchmark of issue 15: the real manager binary on a local control plane
// (test/localcluster) with 1,000 or 5,000 nodes in pools of equal size, one NodeHealthCheck per pool,
// through four phases: steady state, 1% of the nodes failing, 30% failing at once with some pools over
// their threshold, and a mass recovery. It measures what the manager costs (reconciles, API requests
// counted from the API server's audit log, CPU, memory) and how fast and how safely it remediates, and
// writes the figures to bin/bench/scale-<nodes>-<time>.json.
//
// TestScale runs when NHC_SCALE is set (make bench-scale SCALE=1000); TestScaleSmoke runs 100 nodes with
// short phases in every `go test ./...` and asserts the invariants that must hold at any scale.
//
// Two ways to simulate nodes: with kwok and kube-controller-manager's node lifecycle controller (a
// failure stops a node's heartbeats; up to 1,000 nodes on two cores), or driven by the benchmark
// itself (it writes the Ready condition as kube-controller-manager and the kubelet would, and makes
// heartbeat-only status updates at a kubelet's rate), which 5,000 nodes need on two cores.
package scale

// Package realnode runs a one-node Kubernetes cluster on this machine, with a real node: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, containerd with runc, a kubelet
// registered as Node "realnode", kube-proxy (nftables) and a CNI bridge, all from the pinned binaries
// under bin/ (`make controlplane`, `make node`). Pods run as containers, so what the chart asks of a
// runtime (its securityContext, probes, volumes, Services) is enforced by one. The suite of this
// package installs the packaged chart there the way users do; `make cluster` keeps a cluster running
// for people (docs/e2e.md).
//
// The node is a network namespace of its own (network.go), its daemons and pods one cgroup subtree
// (cgroups.go), and everything else it creates lives under one folder (config.go). A watchdog process
// removes all of it when the cluster stops, and also when the process that started it dies in any
// way (cleanup.go); Leftovers says what, if anything, is still there.
//
// It needs root and a cgroup v1 host (the kubelet runs with failCgroupV1: false and the cgroupfs
// driver). One cluster runs on a machine at a time.
package realnode

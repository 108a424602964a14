package realnode

import (
	"fmt"
	"os"
	"path/filepath"
)

// The node's configuration files, written into the cluster's folder. Every path the daemons would
// otherwise take from / (/var/lib, /run, /etc/cni, /opt/cni/bin, /var/log/pods) is the cluster's own,
// so that nothing of it outlives the cluster (cleanup.go) and another containerd or kubelet on the
// machine is not disturbed.

// PauseImage is the sandbox image: test/realnode/pause, built by hack/node.sh into the node folder's
// pause.oci.tar and imported before the kubelet starts. There is no registry to pull it from.
const PauseImage = "localhost/node-healthcheck/pause:1"

// containerdConfig is containerd's configuration: the CRI plugin with runc (from the node folder, its
// state in the cluster's folder), the CNI plugins of the node folder and the cluster's CNI
// configuration, the local pause image, and the shims' sockets in the cluster's folder.
//
//   - restrict_oom_score_adj: nothing here may lower an oom_score_adj (this process runs with a
//     positive one); without it runc fails every sandbox with "can't get final child's PID from
//     pipe: EOF". Containers get at least containerd's score instead.
//   - netns_mounts_under_state_dir: the pods' network namespaces are mounted in the cluster's
//     folder, not /run/netns.
//   - the opt, NRI and image-verifier plugins would create /opt/containerd and /var/run/nri.
func (c *Cluster) containerdConfig() string {
	d := c.containerdDir()
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri", "io.containerd.image-verifier.v1.bindir", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs", "io.containerd.mount-handler.v1.erofs"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.shim.v1.manager"]
  socket_dir = %[5]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[6]q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [%[7]q]
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[8]q]
    conf_dir = %[9]q
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      BinaryName = %[10]q
      Root = %[11]q
      SystemdCgroup = false
`, filepath.Join(d, "root"), filepath.Join(d, "state"), c.ContainerdSocket, c.ContainerdSocket+".ttrpc",
		c.shimSocketDir(), PauseImage, filepath.Join(d, "cdi"), filepath.Join(c.nodeDir, "cni"),
		c.cniConfDir(), filepath.Join(c.nodeDir, "runc"), c.runcRoot())
}

func (c *Cluster) containerdDir() string { return filepath.Join(c.Dir, "containerd") }
func (c *Cluster) cniConfDir() string    { return filepath.Join(c.Dir, "cni", "net.d") }
func (c *Cluster) runcRoot() string      { return filepath.Join(c.Dir, "runc") }

// shimSocketDir holds the shims' sockets; containerd refuses a folder longer than 42 characters.
func (c *Cluster) shimSocketDir() string { return filepath.Join(c.Dir, "s") }

// cniNetwork names the pod network (and the CNI library's cache files of its pods).
const cniNetwork = "nhc-realnode"

// cniConfig is the pod network: one Linux bridge in the node's network namespace, the node as the
// pods' gateway, addresses from PodCIDR. The host reaches the pods through the node (a route the
// cluster adds); nothing is masqueraded, there is nowhere to go beyond the host.
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
`, cniNetwork, filepath.Join(c.Dir, "cni", "ipam"), PodCIDR)
}

// kubeletConfig is the kubelet's configuration (what kubeadm writes to /var/lib/kubelet/config.yaml),
// for this host:
//   - failCgroupV1: false and cgroupDriver: cgroupfs: the host has cgroup v1 and no systemd;
//   - cgroupRoot: the cluster's cgroup (cgroups.go), so the pods live in its subtree;
//   - authentication by client certificate (the API server's) and webhook, authorization by webhook, as
//     kubeadm sets them; no read-only port;
//   - the pods' nameserver is the cluster's DNS (dns.go), with the host's resolv.conf left out
//     (resolvConf ""): nothing beyond the host answers;
//   - eviction only when the disk is nearly full: the machine's disk is shared with other work and a
//     test must not see its pods evicted because another build filled it to 90%%.
func (c *Cluster) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
containerRuntimeEndpoint: unix://%[2]s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[3]q
authorization:
  mode: Webhook
readOnlyPort: 0
failSwapOn: false
podLogsDir: %[4]q
resolvConf: ""
clusterDNS: [%[5]q]
clusterDomain: %[6]q
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
serializeImagePulls: false
`, c.cgroupRoot, c.ContainerdSocket, c.pki.path("ca.crt"), filepath.Join(c.Dir, "pod-logs"), HostIP, ClusterDomain)
}

// kubeProxyConfig runs kube-proxy in nftables mode (the `nft` command, Debian's nftables package):
// Service IPs work for the pods (the operator reaches the API server at the kubernetes Service) and
// for the API server (it calls the webhooks through their Service). conntrack.maxPerCore 0 leaves
// nf_conntrack_max alone: it is the whole host's, not the node's network namespace's.
func (c *Cluster) kubeProxyConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
clusterCIDR: %q
conntrack:
  maxPerCore: 0
`, kubeconfig, NodeName, PodCIDR)
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o600)
}

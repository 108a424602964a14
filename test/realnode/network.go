package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// The node is a network namespace of its own, as a kind node is a container of its own: the control
// plane, containerd, the kubelet, kube-proxy and the pods' bridge live there, so their ports, their
// nftables rules and their interfaces cannot meet anything else on the machine, and removing the
// namespace removes all of them at once. A veth pair links it to the host: the host reaches the API
// server at NodeIP, and the pods and Services through routes via NodeIP.
const (
	// NodeName is the node's name (the kubelet's --hostname-override).
	NodeName = "realnode"
	// NodeIP is the node's address: the API server's and the kubelet's.
	NodeIP = "10.250.0.2"
	// HostIP is the host's end of the link to the node.
	HostIP = "10.250.0.1"
	// PodCIDR is the pods' network, routed from the host through the node.
	PodCIDR = "10.244.0.0/24"
	// ServiceCIDR is the Services' cluster IPs, routed from the host through the node (kube-proxy).
	ServiceCIDR = "10.96.0.0/16"
	// APIServerPort is the API server's port on NodeIP.
	APIServerPort = 6443
	// hostLink is the host's end of the veth pair; the node's end is its eth0.
	hostLink   = "nhc-realnode"
	linkPrefix = "/30"
)

// netnsPath is where the node's network namespace is mounted, in the cluster's folder.
func (c *Cluster) netnsPath() string { return filepath.Join(c.Dir, "netns", "node") }

// createNetwork creates the node's network namespace and links it to the host.
func (c *Cluster) createNetwork() error {
	ns := c.netnsPath()
	if err := os.MkdirAll(filepath.Dir(ns), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(ns, nil, 0o600); err != nil {
		return err
	}
	inNode := func(args ...string) []string { return append([]string{"nsenter", "--net=" + ns, "--"}, args...) }
	steps := [][]string{
		{"unshare", "--net=" + ns, "true"},
		inNode("ip", "link", "set", "lo", "up"),
		inNode("ip", "link", "add", "eth0", "type", "veth", "peer", "name", hostLink, "netns", strconv.Itoa(os.Getpid())),
		inNode("ip", "addr", "add", NodeIP+linkPrefix, "dev", "eth0"),
		inNode("ip", "link", "set", "eth0", "up"),
		// A route for the Service range: the API server's own connections to a Service IP (the
		// webhooks) are routed before kube-proxy's rules translate them, and without a route they
		// fail at once ("network is unreachable"). The node has no default route: nothing it runs
		// reaches beyond the host.
		inNode("ip", "route", "add", ServiceCIDR, "via", HostIP),
		// The node routes between the host and the pods' bridge.
		inNode("sysctl", "-q", "-w", "net.ipv4.ip_forward=1"),
		{"ip", "addr", "add", HostIP + linkPrefix, "dev", hostLink},
		{"ip", "link", "set", hostLink, "up"},
		{"ip", "route", "add", PodCIDR, "via", NodeIP},
		{"ip", "route", "add", ServiceCIDR, "via", NodeIP},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return fmt.Errorf("creating the node's network: %w", err)
		}
	}
	// A pod that calls a Service whose endpoint is a pod on the same bridge needs the bridged reply
	// to pass kube-proxy's rules too (per network namespace; absent where br_netfilter is not built).
	_ = run(inNode("sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1")...)
	return nil
}

// run runs a command of the host (found in /usr/sbin and /sbin too) and returns its output in the
// error when it fails.
func run(args ...string) error {
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec // the cluster's own commands
	cmd.Env = append(os.Environ(), "PATH="+hostPath())
	if p, err := lookPath(args[0]); err == nil {
		cmd.Path = p
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hostPath is PATH with the system folders a root shell has, for the host's commands.
func hostPath() string { return os.Getenv("PATH") + ":/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin" }

// lookPath finds a host command in hostPath.
func lookPath(name string) (string, error) {
	for _, d := range filepath.SplitList(hostPath()) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", name, hostPath())
}

// inNode returns the command that runs bin with args in the node's network namespace (nsenter) and in
// the cluster's system cgroup: a shell moves itself into each hierarchy's cgroup.procs and then
// becomes bin (exec), so the daemon is born there and keeps the PID. Nothing of this process ever
// joins either.
func inNode(netns string, procs []string, bin string, args ...string) *exec.Cmd {
	const script = `for f in $NHC_REALNODE_CGROUP_PROCS; do echo $$ > "$f" || exit 1; done; exec "$@"`
	cmd := exec.Command("nsenter", append([]string{"--net=" + netns, "--", "/bin/sh", "-c", script, "sh", bin}, args...)...) //nolint:gosec // the cluster's own binaries
	if p, err := lookPath("nsenter"); err == nil {
		cmd.Path = p
	}
	cmd.Env = append(os.Environ(), "NHC_REALNODE_CGROUP_PROCS="+strings.Join(procs, " "))
	return cmd
}

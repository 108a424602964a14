package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// DefaultDir is the cluster's folder unless Options.Dir says otherwise: one real-node cluster runs on
// a machine at a time (the node's link and routes on the host are fixed), and a fixed folder lets the
// next cluster clean up what a lost one left.
const DefaultDir = "/tmp/nhc-realnode"

// Options tune Start.
type Options struct {
	// Dir is the cluster's folder (DefaultDir when empty): its state, its logs (logs/, kept until the
	// next cluster starts) and the admin kubeconfig.
	Dir string
	// NodeDir holds the node's binaries (`make node`): $NODE_DIR, else bin/node.
	NodeDir string
	// ControlPlaneDir holds etcd, kube-apiserver, kube-controller-manager and kubectl (`make
	// controlplane`): $KUBEBUILDER_ASSETS, else the newest bin/k8s/*.
	ControlPlaneDir string
	// Logf reports progress, a line per call (as log.Printf); nil is silent.
	Logf func(format string, args ...any)
	// NodeMonitorGracePeriod is kube-controller-manager's --node-monitor-grace-period (how long a
	// node may miss heartbeats before it is Ready=Unknown); empty: its default (50s).
	NodeMonitorGracePeriod string
}

// Cluster is a running one-node cluster.
type Cluster struct {
	// Dir is the cluster's folder.
	Dir string
	// Kubeconfig is an admin kubeconfig (system:masters) for the API server at NodeIP.
	Kubeconfig string
	// Config is the admin client configuration.
	Config *rest.Config
	// ContainerdSocket is containerd's socket, for crictl and ctr on the node.
	ContainerdSocket string

	nodeDir, controlPlaneDir string
	cgroupRoot               string
	cgroupProcs              []string
	pki                      *pki
	st                       state
	procs                    []*proc
	lock                     *os.File
	watchdog                 *exec.Cmd
	watchdogIn               *os.File
	logf                     func(string, ...any)
	nodeGrace                string
	// dns is the cluster's DNS server's socket (dns.go).
	dns net.PacketConn
}

// Start builds and starts the cluster: the node's network namespace, etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd (with the pause image imported), the kubelet and
// kube-proxy, and waits until the node is Ready. It must run as root on a cgroup v1 host. On any
// error, what was started is cleaned up before it returns.
func Start(o Options) (_ *Cluster, err error) {
	c, err := newCluster(o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	if err := c.start(); err != nil {
		return nil, fmt.Errorf("%w (logs in %s)", err, filepath.Join(c.Dir, "logs"))
	}
	return c, nil
}

func newCluster(o Options) (*Cluster, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the real-node cluster runs a kubelet, containerd and runc: it needs root")
	}
	c := &Cluster{Dir: o.Dir, nodeDir: o.NodeDir, controlPlaneDir: o.ControlPlaneDir, logf: o.Logf, nodeGrace: o.NodeMonitorGracePeriod}
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	var err error
	if c.nodeDir, err = binDir(c.nodeDir, "NODE_DIR", "node", "kubelet", "make node"); err != nil {
		return nil, err
	}
	if c.controlPlaneDir, err = binDir(c.controlPlaneDir, "KUBEBUILDER_ASSETS", "k8s/*", "kube-apiserver", "make controlplane"); err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "kube-controller-manager", "kubectl"} {
		if _, err := os.Stat(filepath.Join(c.controlPlaneDir, b)); err != nil {
			return nil, fmt.Errorf("%s: %w (run make controlplane)", b, err)
		}
	}
	// Commands of the host the cluster runs: iproute2 and util-linux (in every Debian), and nftables'
	// nft for kube-proxy (make node installs it).
	for _, cmd := range []string{"ip", "nsenter", "unshare", "sysctl", "nft"} {
		if _, err := lookPath(cmd); err != nil {
			return nil, fmt.Errorf("the host lacks %s: run make node (it installs nftables), or install iproute2, util-linux, procps", cmd)
		}
	}
	if c.cgroupRoot, err = cgroupRoot(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	// One cluster per folder (and, with the fixed network, per machine): the lock is held by this
	// process and by its watchdog until the cleanup is done.
	if c.lock, err = os.OpenFile(filepath.Join(c.Dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600); err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(c.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = c.lock.Close()
		return nil, fmt.Errorf("another real-node cluster runs in %s (its logs: %s/logs): %w", c.Dir, c.Dir, err)
	}
	if _, err := os.Stat(statePath(c.Dir)); err == nil {
		c.logf("Cleaning up what a cluster before left in %s", c.Dir)
		if err := cleanup(c.Dir, c.logf); err != nil {
			_ = c.lock.Close()
			return nil, fmt.Errorf("cleaning up the cluster before: %w", err)
		}
	}
	if linkExists(hostLink) {
		_ = c.lock.Close()
		return nil, fmt.Errorf("network interface %s exists: another real-node cluster runs on this machine", hostLink)
	}
	_ = os.RemoveAll(filepath.Join(c.Dir, "logs"))
	for _, d := range []string{"logs", "run"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			_ = c.lock.Close()
			return nil, err
		}
	}
	c.ContainerdSocket = filepath.Join(c.containerdDir(), "containerd.sock")
	c.st = state{CgroupRoot: c.cgroupRoot, NodeDir: c.nodeDir, ContainerdSocket: c.ContainerdSocket}
	for _, d := range HostDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			c.st.CreatedHostDirs = append(c.st.CreatedHostDirs, d)
		}
	}
	if err := c.st.save(c.Dir); err != nil {
		_ = c.lock.Close()
		return nil, err
	}
	if err := c.startWatchdog(); err != nil {
		_ = c.lock.Close()
		return nil, err
	}
	return c, nil
}

// binDir returns dir, else $env, else the newest folder matching bin/<glob> holding want.
func binDir(dir, env, glob, want, make string) (string, error) {
	if dir == "" {
		dir = os.Getenv(env)
	}
	if dir == "" {
		found, _ := filepath.Glob(testutil.Path("bin", glob, want))
		if len(found) > 0 {
			dir = filepath.Dir(found[len(found)-1])
		}
	}
	if dir == "" {
		return "", fmt.Errorf("no %s: run %s", want, make)
	}
	if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
		return "", fmt.Errorf("%w (run %s)", err, make)
	}
	return filepath.Abs(dir)
}

// startWatchdog starts this binary again as the cluster's watchdog (cleanup.go), in a session of its
// own so that the terminal's signals do not reach it; it holds the lock until it is done.
func (c *Cluster) startWatchdog() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	log, err := os.OpenFile(filepath.Join(c.Dir, "logs", "cleanup.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		_ = w.Close()
		return err
	}
	defer log.Close()
	cmd := exec.Command(self) //nolint:gosec // this binary
	cmd.Env = append(os.Environ(), watchdogEnv+"="+c.Dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, log, log
	cmd.ExtraFiles = []*os.File{c.lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return fmt.Errorf("starting the cleanup watchdog: %w", err)
	}
	c.watchdog, c.watchdogIn = cmd, w
	return nil
}

// Stop stops the cluster and removes it from the machine (cleanup.go), keeping its logs in Dir/logs.
// It returns an error naming anything left behind.
func (c *Cluster) Stop() error {
	if c.watchdog == nil {
		return nil
	}
	if c.dns != nil {
		_ = c.dns.Close()
	}
	_ = c.watchdogIn.Close()
	err := c.watchdog.Wait()
	c.watchdog = nil
	// The watchdog killed every daemon, or failed saying which survived.
	for _, p := range c.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			err = errors.Join(err, fmt.Errorf("%s (PID %d) survived the cleanup", p.name, p.cmd.Process.Pid))
		}
	}
	_ = c.lock.Close()
	if err != nil {
		return fmt.Errorf("cleaning up the cluster: %w:\n%s", err, tail(filepath.Join(c.Dir, "logs", "cleanup.log"), 20))
	}
	if left := Leftovers(c.Dir); len(left) > 0 {
		return fmt.Errorf("the cluster left behind: %v", left)
	}
	return nil
}

func (c *Cluster) start() error {
	begin := time.Now()
	if err := c.createNetwork(); err != nil {
		return err
	}
	if err := createCgroups(c.cgroupRoot, func(d string) error {
		c.st.CreatedCgroups = append(c.st.CreatedCgroups, d)
		return c.st.save(c.Dir)
	}); err != nil {
		return err
	}
	var err error
	if c.cgroupProcs, err = systemProcs(c.cgroupRoot); err != nil {
		return err
	}
	kubeconfigs, err := c.writePKI()
	if err != nil {
		return err
	}
	c.Kubeconfig = kubeconfigs["admin"]
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := c.startControlPlane(cs, kubeconfigs); err != nil {
		return err
	}
	c.logf("Control plane ready after %s", time.Since(begin).Round(time.Millisecond))
	if err := c.startDNS(cs); err != nil {
		return err
	}
	if err := c.startNode(cs, kubeconfigs); err != nil {
		return err
	}
	c.logf("Node %s Ready after %s", NodeName, time.Since(begin).Round(time.Millisecond))
	return nil
}

// writePKI writes the certificates and a kubeconfig for each component, as kubeadm names them.
func (c *Cluster) writePKI() (map[string]string, error) {
	var err error
	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return nil, err
	}
	kubernetesIP, _, err := net.ParseCIDR(ServiceCIDR)
	if err != nil {
		return nil, err
	}
	kubernetesIP[len(kubernetesIP)-1]++ // the kubernetes Service: the range's first address
	if err := c.pki.issue("apiserver", "kube-apiserver", nil, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "localhost", kubernetesIP.String(), NodeIP, "127.0.0.1"); err != nil {
		return nil, err
	}
	if err := c.pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}); err != nil {
		return nil, err
	}
	server := "https://" + net.JoinHostPort(NodeIP, strconv.Itoa(APIServerPort))
	users := map[string][]string{
		"admin":                   {"kubernetes-admin", "system:masters"},
		"kube-controller-manager": {"system:kube-controller-manager"},
		"kube-scheduler":          {"system:kube-scheduler"},
		"kubelet":                 {"system:node:" + NodeName, "system:nodes"},
		"kube-proxy":              {"system:kube-proxy"},
	}
	kubeconfigs := map[string]string{}
	for name, u := range users {
		if kubeconfigs[name], err = c.pki.kubeconfig(name, server, u[0], u[1:]...); err != nil {
			return nil, err
		}
	}
	// The admin kubeconfig at the top of the folder, for people: KUBECONFIG=<dir>/kubeconfig.
	data, err := os.ReadFile(kubeconfigs["admin"])
	if err != nil {
		return nil, err
	}
	admin := filepath.Join(c.Dir, "kubeconfig")
	kubeconfigs["admin"] = admin
	return kubeconfigs, os.WriteFile(admin, data, 0o600)
}

// startControlPlane starts etcd, kube-apiserver (flags as kubeadm sets them, for one node), waits
// until it is ready, then kube-controller-manager (every default controller, with service-account
// credentials, as kubeadm) and kube-scheduler.
func (c *Cluster) startControlPlane(cs *kubernetes.Clientset, kubeconfigs map[string]string) error {
	cp := func(b string) string { return filepath.Join(c.controlPlaneDir, b) }
	p := c.pki.path
	// etcd listens on the node's loopback only; without fsync: a test cluster's data need not
	// survive a power cut, and fsync on a busy shared disk stalls the API server.
	if _, err := c.run("etcd", cp("etcd"), "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=default=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return err
	}
	if _, err := c.run("kube-apiserver", cp("kube-apiserver"),
		"--advertise-address="+NodeIP, "--secure-port="+strconv.Itoa(APIServerPort),
		"--etcd-servers=http://127.0.0.1:2379",
		"--client-ca-file="+p("ca.crt"), "--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--kubelet-client-certificate="+p("apiserver-kubelet-client.crt"), "--kubelet-client-key="+p("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
		// On SIGTERM, end open watches within this grace period instead of waiting for them.
		"--shutdown-watch-termination-grace-period=2s"); err != nil {
		return err
	}
	if err := c.waitFor("kube-apiserver", 2*time.Minute, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", err
	}); err != nil {
		return err
	}
	kcm := []string{"--kubeconfig=" + kubeconfigs["kube-controller-manager"], "--leader-elect=false", "--secure-port=0",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p("sa.key"), "--root-ca-file=" + p("ca.crt"),
		"--cluster-signing-cert-file=" + p("ca.crt"), "--cluster-signing-key-file=" + p("ca.key"),
		"--service-cluster-ip-range=" + ServiceCIDR}
	if c.nodeGrace != "" {
		kcm = append(kcm, "--node-monitor-grace-period="+c.nodeGrace)
	}
	if _, err := c.run("kube-controller-manager", cp("kube-controller-manager"), kcm...); err != nil {
		return err
	}
	_, err := c.run("kube-scheduler", filepath.Join(c.nodeDir, "kube-scheduler"),
		"--kubeconfig="+kubeconfigs["kube-scheduler"], "--leader-elect=false", "--secure-port=0")
	return err
}

// startNode starts containerd, imports the pause image, starts the kubelet and kube-proxy, and waits
// until the node is Ready and the default namespace has its ServiceAccount.
func (c *Cluster) startNode(cs *kubernetes.Clientset, kubeconfigs map[string]string) error {
	for path, content := range map[string]string{
		filepath.Join(c.containerdDir(), "config.toml"):           c.containerdConfig(),
		filepath.Join(c.cniConfDir(), "10-nhc-realnode.conflist"): c.cniConfig(),
		filepath.Join(c.Dir, "kubelet", "config.yaml"):            c.kubeletConfig(),
		filepath.Join(c.Dir, "kube-proxy", "config.yaml"):         c.kubeProxyConfig(kubeconfigs["kube-proxy"]),
	} {
		if err := writeFile(path, content); err != nil {
			return err
		}
	}
	if _, err := c.run("containerd", filepath.Join(c.nodeDir, "containerd"), "--config="+filepath.Join(c.containerdDir(), "config.toml")); err != nil {
		return err
	}
	if err := c.waitFor("containerd", time.Minute, func() (bool, error) {
		err := exec.Command(filepath.Join(c.nodeDir, "ctr"), "--address="+c.ContainerdSocket, "version").Run() //nolint:gosec // our binary
		return err == nil, err
	}); err != nil {
		return err
	}
	if err := c.ImportImage(filepath.Join(c.nodeDir, "pause.oci.tar"), "localhost/node-healthcheck/pause"); err != nil {
		return err
	}
	// The kubelet changes some kernel settings when it starts; cleanup puts them back.
	c.st.Sysctls = readSysctls()
	if err := c.st.save(c.Dir); err != nil {
		return err
	}
	if _, err := c.run("kubelet", filepath.Join(c.nodeDir, "kubelet"),
		"--config="+filepath.Join(c.Dir, "kubelet", "config.yaml"), "--kubeconfig="+kubeconfigs["kubelet"],
		"--root-dir="+filepath.Join(c.Dir, "kubelet"), "--cert-dir="+filepath.Join(c.Dir, "kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+NodeIP); err != nil {
		return err
	}
	if _, err := c.run("kube-proxy", filepath.Join(c.nodeDir, "kube-proxy"),
		"--config="+filepath.Join(c.Dir, "kube-proxy", "config.yaml")); err != nil {
		return err
	}
	return c.waitFor("node "+NodeName, 3*time.Minute, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if ready = cond.Status == corev1.ConditionTrue; !ready {
					err = fmt.Errorf("Ready=%s: %s", cond.Status, cond.Message)
				}
			}
		}
		if !ready {
			return false, err
		}
		_, err = cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

// ImportImage imports an OCI archive into containerd's CRI namespace as `ctr images import` does,
// with base as the image's name: an archive whose index names the image by its tag only (as `make
// image` writes it) is stored as base:tag, the full reference the kubelet asks the CRI for. Only this
// machine's platform is unpacked.
func (c *Cluster) ImportImage(archive, base string) error {
	out, err := exec.Command(filepath.Join(c.nodeDir, "ctr"), "--address="+c.ContainerdSocket, "--namespace=k8s.io", //nolint:gosec // our binary
		"images", "import", "--base-name="+base, archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s as %s: %w: %s", archive, base, err, out)
	}
	return nil
}

// Crictl runs crictl on the node against containerd and returns its standard output.
func (c *Cluster) Crictl(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.nodeDir, "crictl"), append([]string{"--runtime-endpoint=unix://" + c.ContainerdSocket}, args...)...) //nolint:gosec // our binary
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return out, fmt.Errorf("crictl %v: %w: %s", args, err, ee.Stderr)
	}
	return out, err
}

// KubectlPath is the control plane's kubectl.
func (c *Cluster) KubectlPath() string { return filepath.Join(c.controlPlaneDir, "kubectl") }

// CrictlPath is the node's crictl.
func (c *Cluster) CrictlPath() string { return filepath.Join(c.nodeDir, "crictl") }

// Kubectl returns a kubectl command (the control plane's) with the admin kubeconfig.
func (c *Cluster) Kubectl(args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(c.controlPlaneDir, "kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...) //nolint:gosec // our binary
}

// StartKwok starts kwok from kwokDir (`make kwok`: the kwok binary and its stages) as one of the
// cluster's daemons, stopped and cleaned up with them: it heartbeats the nodes whose labels match
// selector (through their Leases, 40s) and reports them Ready, as simulated workers beside the real
// node. It does not wait for anything.
func (c *Cluster) StartKwok(kwokDir, selector string) error {
	_, err := c.run("kwok", filepath.Join(kwokDir, "kwok"),
		"--kubeconfig="+c.Kubeconfig, "--config="+filepath.Join(kwokDir, "kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-label-selector="+selector,
		"--node-lease-duration-seconds=40", "--node-ip=10.0.0.1", "--node-port=0")
	return err
}

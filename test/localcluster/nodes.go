package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// KwokLabel marks the nodes kwok simulates; a node without it gets no heartbeats.
const KwokLabel = "type"

// KwokLabelValue is KwokLabel's value on simulated nodes.
const KwokLabelValue = "kwok"

// NodeGracePeriod is how long the node lifecycle controller waits for a heartbeat before it marks a
// node Ready=Unknown (kube-controller-manager --node-monitor-grace-period; the default is 50s).
const NodeGracePeriod = "10s"

// Processes are helper processes of the local cluster, stopped with it.
type processes struct {
	mu    sync.Mutex
	procs []*exec.Cmd
}

func (p *processes) start(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.procs = append(p.procs, cmd)
	p.mu.Unlock()
	return nil
}

func (p *processes) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.procs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	p.procs = nil
}

// KwokDir returns the folder with kwok and its stages ($KWOK_DIR, else the newest under bin/kwok).
func KwokDir() (string, error) {
	if dir := os.Getenv("KWOK_DIR"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "kwok")); err == nil {
			return dir, nil
		}
	}
	cached, _ := filepath.Glob(testutil.Path("bin", "kwok", "*", "kwok"))
	if len(cached) == 0 {
		return "", errors.New("kwok is not built: run 'make kwok' (or the tests with 'make test', which builds it)")
	}
	return filepath.Dir(cached[len(cached)-1]), nil
}

// StartNodeSimulation starts what makes nodes behave like real ones: kube-controller-manager with
// the node lifecycle controller (Ready=Unknown when heartbeats stop, after NodeGracePeriod), the
// garbage collector, ClusterRole aggregation and the namespace and service-account controllers, and
// kwok, which heartbeats every node labelled KwokLabel=KwokLabelValue through
// its Lease and reports it Ready. Output goes to out.
func (c *Cluster) StartNodeSimulation(out io.Writer) error {
	return c.StartNodeSimulationWith(out, NodeSimulationOptions{})
}

// NodeSimulationOptions tune StartNodeSimulationWith.
type NodeSimulationOptions struct {
	// GracePeriod replaces NodeGracePeriod (for example "20s"). kwok renews each node's Lease every
	// 10s (a quarter of its 40s duration), so with the 10s default a renewal that is late at all
	// makes the node Unknown: on a loaded machine with many nodes, give it more.
	GracePeriod string
}

// StartNodeSimulationWith is StartNodeSimulation with options.
func (c *Cluster) StartNodeSimulationWith(out io.Writer, o NodeSimulationOptions) error {
	kwokDir, err := KwokDir()
	if err != nil {
		return err
	}
	grace := NodeGracePeriod
	if o.GracePeriod != "" {
		grace = o.GracePeriod
	}
	if err := c.startControllerManager(out, grace, "node-lifecycle-controller", "garbage-collector-controller",
		"clusterrole-aggregation-controller", "namespace-controller", "serviceaccount-controller",
		"serviceaccount-token-controller"); err != nil {
		return err
	}
	kwok := exec.Command(filepath.Join(kwokDir, "kwok"), //nolint:gosec // our binary
		"--kubeconfig="+c.Kubeconfig, "--config="+filepath.Join(kwokDir, "kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-label-selector="+KwokLabel+"="+KwokLabelValue,
		"--node-lease-duration-seconds=40", "--node-ip=10.0.0.1", "--node-port=0")
	kwok.Stdout, kwok.Stderr = out, out
	if err := c.helpers.start(kwok); err != nil {
		return fmt.Errorf("starting kwok: %w", err)
	}
	return nil
}

// StartControllerManager starts kube-controller-manager with only the controllers named (for
// example "clusterrole-aggregation-controller"), tuned as StartNodeSimulation's: a node lifecycle
// controller among them marks nodes Ready=Unknown NodeGracePeriod after their last heartbeat. Output
// goes to out.
func (c *Cluster) StartControllerManager(out io.Writer, controllers ...string) error {
	return c.startControllerManager(out, NodeGracePeriod, controllers...)
}

func (c *Cluster) startControllerManager(out io.Writer, grace string, controllers ...string) error {
	rootCA := filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(rootCA, c.Config.CAData, 0o600); err != nil {
		return err
	}
	kcm := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"), //nolint:gosec // our binary
		"--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers="+strings.Join(controllers, ","),
		// The service-account token controller signs with the API server's key.
		"--service-account-private-key-file="+filepath.Join(c.Env.ControlPlane.APIServer.CertDir, "sa-signer.key"), "--root-ca-file="+rootCA,
		"--node-monitor-grace-period="+grace, "--node-monitor-period=1s",
		// The default 20 requests per second spread 300 nodes going Unknown at once over a minute in
		// the scale benchmark (a real control plane's node lifecycle is not that throttled).
		"--kube-api-qps=200", "--kube-api-burst=400",
		// Never evict or taint-evict pods here; only the Ready condition matters.
		"--node-eviction-rate=0", "--secondary-node-eviction-rate=0")
	kcm.Stdout, kcm.Stderr = out, out
	if err := c.helpers.start(kcm); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	return nil
}

// AddNode creates a node that kwok heartbeats, with the labels.
func (c *Cluster) AddNode(ctx context.Context, k client.Client, name string, labels map[string]string) (*corev1.Node, error) {
	all := map[string]string{KwokLabel: KwokLabelValue, "kubernetes.io/hostname": name}
	for k, v := range labels {
		all[k] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: all, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}
	if err := k.Create(ctx, n); err != nil {
		return nil, fmt.Errorf("creating node %s: %w", name, err)
	}
	return n, nil
}

// SetHeartbeats stops or resumes a node's heartbeats, as a machine that hangs or comes back: kwok
// stops or resumes renewing its Lease, and the node lifecycle controller marks it Ready=Unknown after
// NodeGracePeriod, or kwok reports it Ready again.
func SetHeartbeats(ctx context.Context, k client.Client, node string, on bool) error {
	value := "null"
	if on {
		value = `"` + KwokLabelValue + `"`
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, KwokLabel, value)
	return k.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// Ready returns the node's Ready condition status ("" when it has none).
func Ready(ctx context.Context, k client.Client, node string) (corev1.ConditionStatus, error) {
	n := &corev1.Node{}
	if err := k.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return "", err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status, nil
		}
	}
	return "", nil
}

package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Manager is a running manager process.
type Manager struct {
	// Cmd is the process.
	Cmd *exec.Cmd
	// Args are its arguments.
	Args []string
	// ProbeAddr and MetricsAddr are the host:port of the probe and metrics endpoints; WebhookPort is
	// the webhook server's port (on every interface).
	ProbeAddr, MetricsAddr string
	WebhookPort            int

	cluster *Cluster
	webhook bool
	done    chan error
	output  *tailWriter
}

// outputTail is how much of a manager's output an error about it quotes.
const outputTail = 4 << 10

// ManagerOptions tune a manager process.
type ManagerOptions struct {
	// Binary is the manager executable.
	Binary string
	// Kubeconfig is the manager's identity; empty: the chart's ServiceAccount.
	Kubeconfig string
	// LeaderElectionNamespace holds the leader Lease; empty: the chart's namespace.
	LeaderElectionNamespace string
	// Args are extra flags; a flag the chart's Deployment sets too replaces the chart's value.
	Args []string
	// Env are extra environment variables (NAME=value) on top of this process's, for example GOGC.
	Env []string
	// Output receives the process's stdout and stderr.
	Output io.Writer
}

// StartManager runs the manager binary out of cluster against c, with the arguments of the chart's
// Deployment (see InstallChart) adapted to a process on this machine: free local ports, the
// certificate folder CertDir, a kubeconfig. Once WaitReady sees it ready, its webhook server joins
// the chart's webhook Service, until the process exits.
func (c *Cluster) StartManager(o ManagerOptions) (*Manager, error) {
	if c.chart == nil {
		return nil, errors.New("install the chart first (InstallChart): the manager runs with its arguments, RBAC and webhook configurations")
	}
	probe, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	kubeconfig, leaseNS := c.chart.serviceAccountKubeconfig, ChartNamespace
	if o.Kubeconfig != "" {
		kubeconfig = o.Kubeconfig
	}
	if o.LeaderElectionNamespace != "" {
		leaseNS = o.LeaderElectionNamespace
	}
	args := MergeArgs(c.chart.managerArgs, append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-election-namespace=" + leaseNS,
		"--webhook-port=" + strconv.Itoa(port),
		"--webhook-cert-dir=" + c.CertDir,
		"--health-probe-bind-address=" + probe,
		"--metrics-bind-address=" + metrics,
	}, o.Args...))
	cmd := exec.Command(o.Binary, args...) //nolint:gosec // the binary is ours
	output := newTailWriter(o.Output, outputTail)
	cmd.Stdout, cmd.Stderr = output, output
	if len(o.Env) > 0 {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.Binary, err)
	}
	m := &Manager{Cmd: cmd, Args: args, ProbeAddr: probe, MetricsAddr: metrics, WebhookPort: port, cluster: c,
		webhook: flagValue(args, "--enable-webhooks") != "false", done: make(chan error, 1), output: output}
	go func() {
		err := cmd.Wait()
		// The pod is gone: its endpoint leaves the Service.
		m.unpublish()
		m.done <- err
	}()
	return m, nil
}

// ErrPortTaken is WaitReady's error for a manager that exited because another process bound one of
// its ports first.
var ErrPortTaken = errors.New("another process took one of the manager's ports")

// portStarts bounds how often StartReady starts a manager whose port was taken.
const portStarts = 3

// StartReady starts a manager (StartManager) and waits until it is ready (WaitReady). The ports are
// picked free and then handed to the process, and another process on this machine may bind one in
// between; a manager that exits for that is started again on other ports (a pod has a network
// namespace of its own and never meets this). Any other exit is the error.
func (c *Cluster) StartReady(ctx context.Context, o ManagerOptions) (*Manager, error) {
	for start := 1; ; start++ {
		m, err := c.StartManager(o)
		if err != nil {
			return nil, err
		}
		err = m.WaitReady(ctx)
		if err == nil {
			return m, nil
		}
		_ = m.Stop(10 * time.Second)
		if !errors.Is(err, ErrPortTaken) || start == portStarts {
			return nil, err
		}
	}
}

// MergeArgs returns base with each of overrides replacing the flag of the same name, or appended.
func MergeArgs(base, overrides []string) []string {
	out := append([]string(nil), base...)
	for _, o := range overrides {
		name, _, _ := strings.Cut(o, "=")
		replaced := false
		for i, b := range out {
			if n, _, _ := strings.Cut(b, "="); n == name {
				out[i], replaced = o, true
			}
		}
		if !replaced {
			out = append(out, o)
		}
	}
	return out
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if n, v, _ := strings.Cut(a, "="); n == name {
			return v
		}
	}
	return ""
}

// WaitReady polls /readyz until it answers 200 or ctx ends; then the manager's webhook server joins
// the webhook Service.
func (m *Manager) WaitReady(ctx context.Context) error {
	url := "http://" + m.ProbeAddr + "/readyz"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m.publish(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("manager not ready at %s: %w; it printed last:\n%s", url, ctx.Err(), m.output)
		case err := <-m.done:
			m.done <- err
			out := m.output.String()
			if strings.Contains(out, "address already in use") {
				err = errors.Join(ErrPortTaken, err)
			}
			return fmt.Errorf("manager exited before it was ready: %w; it printed last:\n%s", err, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *Manager) endpointSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("%s-%d", WebhookService, m.WebhookPort), Namespace: ChartNamespace,
		Labels: map[string]string{discoveryv1.LabelServiceName: WebhookService, discoveryv1.LabelManagedBy: "localcluster"},
	}}
}

// publish adds the manager's webhook server to the webhook Service, as the EndpointSlice controller
// does for a ready pod.
func (m *Manager) publish(ctx context.Context) error {
	if !m.webhook {
		return nil
	}
	ip, err := HostIP()
	if err != nil {
		return err
	}
	slice := m.endpointSlice()
	slice.AddressType = discoveryv1.AddressTypeIPv4
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	slice.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("webhook"), Port: ptr.To(int32(m.WebhookPort)), Protocol: ptr.To(corev1.ProtocolTCP)}}
	if err := m.cluster.k8s.Create(ctx, slice); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("publishing the webhook endpoint: %w", err)
	}
	return m.cluster.waitForWebhooks(ctx)
}

// waitForWebhooks waits until the API server calls the NodeHealthCheck webhooks: it resolves the
// Service's endpoints from its own informer, which sees a new EndpointSlice a moment after it is
// created (a pod's endpoint, likewise, serves a moment after the pod is ready). A server-side dry
// run of a NodeHealthCheck either reaches a webhook (admitted or refused by its rules) or fails
// calling it.
func (c *Cluster) waitForWebhooks(ctx context.Context) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck",
		"metadata": map[string]any{"name": "localcluster-webhook-probe"},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"localcluster": "probe"}}},
	}}
	for {
		err := c.k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the API server does not reach the webhooks: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *Manager) unpublish() {
	if !m.webhook {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		err := m.cluster.k8s.Delete(ctx, m.endpointSlice())
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(time.Second) // the API server may be restarting
	}
}

// Stop sends SIGTERM and waits up to timeout for the process to exit; it returns the exit error
// (nil for a clean exit) and kills the process if it did not stop in time.
func (m *Manager) Stop(timeout time.Duration) error {
	_ = m.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.done:
		m.done <- err
		return err
	case <-time.After(timeout):
		_ = m.Cmd.Process.Kill()
		<-m.done
		return fmt.Errorf("manager did not exit within %s of SIGTERM", timeout)
	}
}

// Wait waits for the process to exit and returns its exit error.
func (m *Manager) Wait() error {
	err := <-m.done
	m.done <- err
	return err
}

// Exited reports whether the process has exited.
func (m *Manager) Exited() bool {
	select {
	case err := <-m.done:
		m.done <- err
		return true
	default:
		return false
	}
}

// HostIP returns this machine's first IPv4 address that is not a loopback one: the API server's
// webhook client dials it (an EndpointSlice may not hold a loopback address).
func HostIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("this machine has no IPv4 address other than loopback: the API server cannot reach the webhook server through a Service")
}

// FreeAddr returns a free 127.0.0.1 host:port.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreePort returns a free port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Package localcluster starts a local control plane (etcd and kube-apiserver from KUBEBUILDER_ASSETS)
// with the project's CRDs and the webhook configurations pointing at a local webhook port, and runs
// the real manager binary against it. `make demo` and the end-to-end suite use it.
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
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// Cluster is a running local control plane.
type Cluster struct {
	// Env is the envtest environment behind the cluster.
	Env *envtest.Environment
	// Config is an admin client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file, for the manager and kubectl.
	Kubeconfig string
	// Dir is a scratch folder removed by Stop.
	Dir string

	helpers processes
}

// Start starts the control plane, installs the NodeHealthCheck CRD, the test remediators' CRDs and
// the webhook configurations (served at a free local port with a generated certificate), and writes
// an admin kubeconfig.
func Start() (*Cluster, error) {
	if err := testutil.CheckAssets(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nhc-localcluster-")
	if err != nil {
		return nil, err
	}
	env := testutil.NewEnvironment(nil, true)
	cfg, err := env.Start()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	c := &Cluster{Env: env, Config: cfg, Dir: dir}
	user, err := env.AddUser(envtest.User{Name: "local-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("adding admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// Stop stops the control plane and removes the scratch folder.
func (c *Cluster) Stop() error {
	c.helpers.stop()
	err := c.Env.Stop()
	return errors.Join(err, os.RemoveAll(c.Dir))
}

// Manager is a running manager process.
type Manager struct {
	// Cmd is the process.
	Cmd *exec.Cmd
	// ProbeAddr and MetricsAddr are the host:port of the probe and metrics endpoints.
	ProbeAddr, MetricsAddr string
	done                   chan error
}

// ManagerOptions tune a manager process.
type ManagerOptions struct {
	// Binary is the manager executable.
	Binary string
	// WebhookPort overrides the port the webhook configurations point at; another free port is
	// needed for a second replica.
	WebhookPort int
	// Kubeconfig is the manager's identity; empty: the admin kubeconfig.
	Kubeconfig string
	// LeaderElectionNamespace holds the leader Lease; empty: default.
	LeaderElectionNamespace string
	// Args are extra flags.
	Args []string
	// Output receives the process's stdout and stderr.
	Output io.Writer
}

// StartManager runs the manager binary out of cluster against c with leader election in namespace
// default, secure metrics and the webhooks on the port the webhook configurations use.
func (c *Cluster) StartManager(o ManagerOptions) (*Manager, error) {
	probe, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	wio := &c.Env.WebhookInstallOptions
	port := wio.LocalServingPort
	if o.WebhookPort != 0 {
		port = o.WebhookPort
	}
	kubeconfig, leaseNS := c.Kubeconfig, "default"
	if o.Kubeconfig != "" {
		kubeconfig = o.Kubeconfig
	}
	if o.LeaderElectionNamespace != "" {
		leaseNS = o.LeaderElectionNamespace
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-election-namespace=" + leaseNS,
		"--webhook-port=" + strconv.Itoa(port),
		"--webhook-cert-dir=" + wio.LocalServingCertDir,
		"--health-probe-bind-address=" + probe,
		"--metrics-bind-address=" + metrics,
	}, o.Args...)
	cmd := exec.Command(o.Binary, args...) //nolint:gosec // the binary is ours
	cmd.Stdout, cmd.Stderr = o.Output, o.Output
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.Binary, err)
	}
	m := &Manager{Cmd: cmd, ProbeAddr: probe, MetricsAddr: metrics, done: make(chan error, 1)}
	go func() { m.done <- cmd.Wait() }()
	return m, nil
}

// WaitReady polls /readyz until it answers 200 or ctx ends.
func (m *Manager) WaitReady(ctx context.Context) error {
	url := "http://" + m.ProbeAddr + "/readyz"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("manager not ready at %s: %w", url, ctx.Err())
		case err := <-m.done:
			m.done <- err
			return fmt.Errorf("manager exited before it was ready: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
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
		return fmt.Errorf("manager did not exit within %s of SIGTERM", timeout)
	}
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

// FreeAddr returns a free 127.0.0.1 host:port.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreePort returns a free local port.
func FreePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return strconv.Atoi(port)
}

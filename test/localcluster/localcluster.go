// Package localcluster starts a local control plane (etcd, kube-apiserver and, with
// StartNodeSimulation, kube-controller-manager and kwok from the cached binaries), installs the
// Helm chart into it and runs the real manager binary against it, as the chart's ServiceAccount and
// behind the chart's webhook configurations. `make demo` and the end-to-end suite use it.
//
// What a cluster would do for the operator's pods, the package does for the manager processes: it
// mounts the webhook certificate Secret into a folder (as the kubelet does, with a delay), and
// publishes each ready manager's webhook port in an EndpointSlice of the chart's webhook Service (as
// the EndpointSlice controller does). The API server routes webhook calls to those endpoints
// (--enable-aggregator-routing), so admission goes through the chart's Service, with the operator's
// own certificate, verified for the Service's name.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// CertDir is where the webhook certificate Secret is mounted for the managers.
	CertDir string
	// AuditLog is the API server's audit log (JSON lines), when StartOptions.AuditPolicy was set.
	AuditLog string

	k8s     client.Client
	helpers processes
	// chart is what InstallChart installed; nil before.
	chart *release
	// certs mounts the webhook certificate Secret at CertDir.
	certs certMount
	// stop ends the background work (the certificate mount).
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// apiServerStopTimeout is how long the API server may drain its connections on SIGTERM.
const apiServerStopTimeout = 90 * time.Second

// StartOptions tune StartWith.
type StartOptions struct {
	// AuditPolicy is an audit policy (audit.k8s.io/v1 YAML, see UserAuditPolicy); when set, the API
	// server writes its audit events as JSON lines to Cluster.AuditLog, before it answers each request.
	AuditPolicy string
	// APIServerFlags are extra kube-apiserver flags (name without dashes: value), each replacing
	// envtest's default of that name, for example "authorization-mode": "Node,RBAC".
	APIServerFlags map[string]string
}

// Start starts the control plane with the test remediators' CRDs (the NodeHealthCheck CRD and the
// webhook configurations come with the chart, see InstallChart) and writes an admin kubeconfig.
func Start() (*Cluster, error) {
	return StartWith(StartOptions{})
}

// StartWith is Start with options.
func StartWith(o StartOptions) (*Cluster, error) {
	if err := testutil.CheckAssets(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nhc-localcluster-")
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDInstallOptions:       envtest.CRDInstallOptions{Paths: []string{testutil.TestCRDDir()}},
		ErrorIfCRDPathMissing:   true,
		ControlPlaneStopTimeout: apiServerStopTimeout,
	}
	api := env.ControlPlane.GetAPIServer()
	// The API server's certificates and service-account keys live in the scratch folder, so that a
	// restart (RestartAPIServer) keeps every client's credentials valid.
	api.CertDir = filepath.Join(dir, "apiserver")
	if err := os.Mkdir(api.CertDir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// Webhook Services resolve to their endpoints, not to a cluster IP that nothing routes here.
	api.Configure().Set("enable-aggregator-routing", "true")
	// On SIGTERM, end open watches within this grace period instead of waiting for them.
	api.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	for name, value := range o.APIServerFlags {
		api.Configure().Set(name, value)
	}
	auditLog, err := configureAudit(api, dir, o.AuditPolicy)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting control plane: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	c := &Cluster{Env: env, Config: cfg, Dir: dir, CertDir: filepath.Join(dir, "webhook-certs"), AuditLog: auditLog, ctx: ctx, stop: stop}
	if c.k8s, err = client.New(cfg, client.Options{}); err != nil {
		_ = c.Stop()
		return nil, err
	}
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
	c.stop()
	c.wg.Wait()
	c.helpers.stop()
	err := c.Env.Stop()
	return errors.Join(err, os.RemoveAll(c.Dir))
}

// RestartAPIServer stops the API server (SIGTERM; it drains its connections), waits down, and
// starts it again with the same address, certificates and etcd. It returns how long the API server
// was unavailable.
func (c *Cluster) RestartAPIServer(down time.Duration) (time.Duration, error) {
	api := c.Env.ControlPlane.APIServer
	start := time.Now()
	stopErr := api.Stop() // on a timeout, the process was killed: start it anyway
	time.Sleep(down)
	if err := api.Start(); err != nil {
		return 0, errors.Join(stopErr, fmt.Errorf("starting the API server again: %w", err))
	}
	if stopErr != nil {
		return 0, fmt.Errorf("stopping the API server: %w", stopErr)
	}
	return time.Since(start), nil
}

package v1alpha1_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	webhookv1alpha1 "github.com/medik8s/node-healthcheck/internal/webhook/v1alpha1"
)

// Two real control planes:
//   - webhookEnv installs the NodeHealthCheck CRD reduced to its structure, so every request reaches
//     the webhooks, which the manager's webhook server serves exactly as in production, and OpenShift's
//     Infrastructure CRD, so the specs can set the control-plane topology the webhook reads;
//   - celEnv installs the generated CRD with its CEL and OpenAPI rules and no webhooks, as on a
//     cluster whose webhook is down or not installed.
var (
	scheme = runtime.NewScheme()

	webhookEnv, celEnv       *envtest.Environment
	webhookClient, celClient client.Client

	cancel context.CancelFunc
)

func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission webhook suite")
}

var _ = BeforeSuite(func() {
	testutil.LogToGinkgo()
	Expect(testutil.CheckAssets()).To(Succeed())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(remediationv1alpha1.AddToScheme(scheme)).To(Succeed())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())

	crd, err := testutil.LoadNHCCRD()
	Expect(err).NotTo(HaveOccurred())

	webhookEnv = testutil.NewEnvironment(testutil.StructuralOnly(crd), true)
	webhookEnv.CRDInstallOptions.Paths = append(webhookEnv.CRDInstallOptions.Paths, testutil.Path("test", "crds", "openshift", "infrastructures.yaml"))
	webhookCfg, err := webhookEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	webhookClient = newClient(webhookCfg)
	startManager(ctx, webhookCfg, &webhookEnv.WebhookInstallOptions)

	celEnv = testutil.NewEnvironment(nil, false)
	celCfg, err := celEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	celClient = newClient(celCfg)

	for _, c := range []client.Client{webhookClient, celClient} {
		createTemplates(ctx, c)
	}
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	for _, env := range []*envtest.Environment{webhookEnv, celEnv} {
		if env != nil {
			Expect(env.Stop()).To(Succeed())
		}
	}
})

func newClient(cfg *rest.Config) client.Client {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// startManager runs a manager with the production webhook setup against cfg and waits until its
// webhook server accepts TLS connections.
func startManager(ctx context.Context, cfg *rest.Config, wio *envtest.WebhookInstallOptions) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    wio.LocalServingHost,
			Port:    wio.LocalServingPort,
			CertDir: wio.LocalServingCertDir,
		}),
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(webhookv1alpha1.SetupWithManager(mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	Eventually(func() error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test only
		if err != nil {
			return err
		}
		return conn.Close()
	}).Should(Succeed())
}

var nameCounter int

// uniqueName gives each spec its own object names.
func uniqueName(prefix string) string {
	nameCounter++
	return fmt.Sprintf("%s-%d-%d", prefix, GinkgoParallelProcess(), nameCounter)
}

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/test/localcluster"
)

// runTestHook runs the chart's `helm test` hook as its pod would: its objects (ServiceAccount and
// rights) created, the manager binary run with the pod's arguments as that ServiceAccount, the
// metrics URL pointing at m (the Service's DNS name does not resolve on this machine), the metrics
// CA the pod mounts written to a file.
func runTestHook(ctx context.Context, m *localcluster.Manager) (string, error) {
	hook := cluster.ChartTestHook()
	for _, obj := range hook.Objects {
		obj = obj.DeepCopy()
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, obj))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed()) })
	}
	kubeconfig, err := cluster.ServiceAccountKubeconfig(localcluster.ChartNamespace, hook.ServiceAccount)
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cluster.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(localcluster.ChartNamespace).CreateToken(ctx, hook.ServiceAccount, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tokenFile := filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600)).To(Succeed())

	Expect(hook.Args).To(HaveExactElements(Equal("self-test"), ContainSubstring("--name="), Equal("--webhooks=true"),
		Equal("--metrics-url=https://nhc-node-healthcheck-metrics.node-healthcheck.svc:8443/metrics"),
		Equal("--metrics-ca-file=/etc/nhc-metrics-ca/ca.crt"), Equal("--metrics-server-name=nhc-node-healthcheck-webhook.node-healthcheck.svc")), "the chart's test pod")
	// The CA the test pod mounts from the webhook certificate's Secret (ca.crt).
	secret, err := cs.CoreV1().Secrets(localcluster.ChartNamespace).Get(ctx, localcluster.WebhookSecret, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(secret.Data).To(HaveKey("ca.crt"))
	caFile := filepath.Join(GinkgoT().TempDir(), "ca.crt")
	Expect(os.WriteFile(caFile, secret.Data["ca.crt"], 0o600)).To(Succeed())
	args := localcluster.MergeArgs(hook.Args, []string{"--kubeconfig=" + kubeconfig,
		"--metrics-url=https://" + m.MetricsAddr + "/metrics", "--metrics-token-file=" + tokenFile, "--metrics-ca-file=" + caFile})
	cmd := exec.CommandContext(ctx, managerBinary, args...) //nolint:gosec // our binary
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("self-test:\n%s", out)
	return string(out), err
}

var _ = Describe("The chart's helm test hook", func() {
	It("passes against a running operator, and fails once it is gone", func(ctx SpecContext) {
		m := startManager(localcluster.ManagerOptions{Args: []string{"--leader-election-id=e2e-selftest"}})
		waitListening(insecureClient, "https://"+m.MetricsAddr+"/metrics")
		out, err := runTestHook(ctx, m)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(And(
			ContainSubstring("ok   the NodeHealthCheck API is served"),
			ContainSubstring("ok   a valid NodeHealthCheck is defaulted and admitted (dry run)"),
			ContainSubstring("ok   an invalid NodeHealthCheck is refused by the validating webhook (dry run)"),
			ContainSubstring("ok   the metrics endpoint answers"),
			ContainSubstring("node-healthcheck works")))

		// Without the operator, admission and metrics fail, and so does the test.
		Expect(m.Stop(30 * time.Second)).To(Succeed())
		out, err = runTestHook(ctx, m)
		Expect(err).To(HaveOccurred())
		Expect(out).To(And(
			ContainSubstring("ok   the NodeHealthCheck API is served"),
			ContainSubstring("FAIL a valid NodeHealthCheck is defaulted and admitted (dry run)"),
			ContainSubstring("FAIL the metrics endpoint answers")))
	})
})

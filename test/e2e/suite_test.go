// Package e2e runs the real manager binary against a local control plane.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

var (
	cluster *localcluster.Cluster
	k8s     client.Client
	scheme  = runtime.NewScheme()
	// managerBinary is the manager under test: the image's (make image), or $MANAGER_BINARY.
	managerBinary string
	// remediator reboots the simulated nodes of TestRemediation CRs.
	remediator     *localcluster.Remediator
	stopRemediator context.CancelFunc
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "End-to-end suite")
}

var _ = BeforeSuite(func() {
	testutil.LogToGinkgo()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(remediationv1alpha1.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())

	var err error
	managerBinary, err = localcluster.ManagerBinary(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())

	cluster, err = localcluster.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// Nodes behave like real ones: kwok heartbeats them, the node lifecycle controller marks them
	// Unknown when heartbeats stop, and a test remediator "reboots" them.
	simulationLog, err := os.Create(filepath.Join(cluster.Dir, "simulation.log"))
	Expect(err).NotTo(HaveOccurred())
	Expect(cluster.StartNodeSimulation(simulationLog)).To(Succeed())
	// The chart installs the CRD, the RBAC and the webhook configurations; the operator manages its
	// own webhook certificate. Managers run as the chart's ServiceAccount with exactly the chart's
	// RBAC, behind the chart's webhook Service, and the test remediator grants its permissions
	// through aggregation, as remediators do.
	// The returning-node grace matched to this cluster's node grace period (10s, not the default 50s
	// the chart's 60s is for): loaded CI machines make kwok nodes miss heartbeats and come back.
	_, err = cluster.InstallChart(map[string]any{"certManager": map[string]any{"enabled": false}, "returningNodeGrace": "20s"})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(context.Background(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-remediator", Labels: map[string]string{remediationv1alpha1.AggregateToExtRemediationLabel: "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediationtemplates"}, Verbs: []string{"get"}},
			{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediations"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		},
	})).To(Succeed())
	Eventually(func() int {
		agg := &rbacv1.ClusterRole{}
		Expect(k8s.Get(context.Background(), client.ObjectKey{Name: "nhc-node-healthcheck-ext-remediation"}, agg)).To(Succeed())
		return len(agg.Rules)
	}).WithTimeout(30 * time.Second).Should(Equal(2))

	remediator = &localcluster.Remediator{Client: k8s, Namespace: testutil.TemplateNamespace, RebootDelay: 3 * time.Second, Log: GinkgoWriter.Printf}
	var ctx context.Context
	ctx, stopRemediator = context.WithCancel(context.Background())
	go remediator.Run(ctx)
})

var _ = AfterSuite(func() {
	if stopRemediator != nil {
		stopRemediator()
	}
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})

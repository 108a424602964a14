package hostile

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

var (
	cluster *localcluster.Cluster
	// k8s is the admin client.
	k8s    client.Client
	scheme = runtime.NewScheme()
	// managerBinary is the manager under test: the image's (make image), or $MANAGER_BINARY.
	managerBinary string
)

func TestHostile(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Hostile kubelet suite")
}

var _ = BeforeSuite(func() {
	testutil.LogToGinkgo()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(remediationv1alpha1.AddToScheme(scheme)).To(Succeed())

	var err error
	managerBinary, err = localcluster.ManagerBinary(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())

	// A kubelet's credentials mean what they mean in a real cluster only with the Node authorizer
	// (which requests a node may make) and NodeRestriction (which objects, and which of their
	// fields, it may change).
	cluster, err = localcluster.StartWith(localcluster.StartOptions{APIServerFlags: map[string]string{
		"authorization-mode":       "Node,RBAC",
		"enable-admission-plugins": "NodeRestriction",
	}})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// Only ClusterRole aggregation, for the test remediator's role: no node lifecycle controller,
	// since the test writes the nodes' conditions itself and nothing heartbeats them.
	controllersLog, err := os.Create(filepath.Join(cluster.Dir, "controller-manager.log"))
	Expect(err).NotTo(HaveOccurred())
	Expect(cluster.StartControllerManager(controllersLog, "clusterrole-aggregation-controller")).To(Succeed())
	_, err = cluster.InstallChart(map[string]any{"certManager": map[string]any{"enabled": false}})
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
})

var _ = AfterSuite(func() {
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})

// kubeletOf returns a client with the node's own credentials, as its kubelet has them: a client
// certificate signed by the API server's client CA, for user system:node:<node> in group
// system:nodes (the Node authorizer and NodeRestriction act on exactly these).
func kubeletOf(node string) (kubernetes.Interface, *rest.Config) {
	GinkgoHelper()
	user, err := cluster.Env.AddUser(envtest.User{Name: "system:node:" + node, Groups: []string{"system:nodes"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	cfg := rest.CopyConfig(user.Config())
	// A compromised kubelet is not polite: no client-side rate limit (the API server's priority and
	// fairness still applies to it).
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return cs, cfg
}

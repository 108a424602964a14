package realnode_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/realnode"
)

// enableEnv runs the suite: it needs root, `make node` and minutes, so `go test ./...` skips it and
// `make test-realnode` sets it.
const enableEnv = "NHC_REALNODE"

var (
	cluster *realnode.Cluster
	cs      *kubernetes.Clientset
	// startTime is how long the cluster took to start, for the report.
	startTime time.Duration
	// missingHostDirs are the host folders the daemons use that did not exist before the cluster.
	missingHostDirs []string
)

// absentHostDirs returns the folders of realnode.HostDirs that do not exist.
func absentHostDirs() []string {
	var absent []string
	for _, d := range realnode.HostDirs {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			absent = append(absent, d)
		}
	}
	return absent
}

func TestRealNode(t *testing.T) {
	if os.Getenv(enableEnv) == "" {
		t.Skipf("the real-node suite runs with %s=1 (make test-realnode: root, a cgroup v1 host, make node)", enableEnv)
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Real-node suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	missingHostDirs = absentHostDirs()
	begin := time.Now()
	var err error
	// The node grace period short enough for kwok workers' failures to be seen in seconds, long
	// enough for the real kubelet's renewals (every 10s) on a loaded machine.
	cluster, err = realnode.Start(realnode.Options{Logf: func(format string, args ...any) { GinkgoWriter.Printf(format+"\n", args...) },
		NodeMonitorGracePeriod: nodeGrace.String()})
	Expect(err).NotTo(HaveOccurred())
	startTime = time.Since(begin)
	cs, err = kubernetes.NewForConfig(cluster.Config)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cluster != nil {
		// Stop removes the cluster from the machine and names whatever it left behind.
		Expect(cluster.Stop()).To(Succeed())
		Expect(realnode.Leftovers(cluster.Dir)).To(BeEmpty())
		Expect(absentHostDirs()).To(ContainElements(missingHostDirs), "host folders the cluster created are gone")
	}
})

// ReportAfterEach prints the end of the node's logs when a spec fails.
var _ = ReportAfterEach(func(r SpecReport) {
	if !r.Failed() || cluster == nil {
		return
	}
	for _, name := range []string{"kubelet", "containerd", "kube-controller-manager"} {
		data, _ := os.ReadFile(filepath.Join(cluster.Dir, "logs", name+".log"))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(GinkgoWriter, "--- the end of %s.log:\n%s\n", name, strings.Join(lines, "\n"))
	}
})

// chartVersion returns the chart's version or appVersion (Chart.yaml's field).
func chartField(field string) string {
	data, err := os.ReadFile(testutil.Path("charts", "node-healthcheck", "Chart.yaml"))
	Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^` + field + `: *"?([^"\n]+)"?\s*$`).FindSubmatch(data)
	Expect(m).NotTo(BeNil(), "Chart.yaml has no %s", field)
	return string(m[1])
}

// imageArchive returns `make image`'s OCI archive, refusing a stale image (testutil.ImageLayout: the
// archive is written with the layout).
func imageArchive() string {
	layout, err := testutil.ImageLayout()
	Expect(err).NotTo(HaveOccurred())
	archive := os.Getenv("IMAGE_TARBALL")
	if archive == "" {
		archive = filepath.Join(filepath.Dir(layout), "node-healthcheck-"+chartField("appVersion")+".oci.tar")
	}
	Expect(archive).To(BeAnExistingFile(), "run make image")
	return archive
}

// chartPackage returns `make chart`'s packaged chart, refusing one older than the chart's files.
func chartPackage() string {
	pkg := os.Getenv("CHART_PACKAGE")
	if pkg == "" {
		pkg = testutil.Path("bin", "chart", "node-healthcheck-"+chartField("version")+".tgz")
	}
	info, err := os.Stat(pkg)
	Expect(err).NotTo(HaveOccurred(), "run make chart")
	Expect(filepath.Walk(testutil.Path("charts", "node-healthcheck"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.ModTime().After(info.ModTime()) {
			return fmt.Errorf("%s is newer than %s: run make chart", p, pkg)
		}
		return err
	})).To(Succeed())
	return pkg
}

// helm runs the helm of go.mod's tool against the cluster, with its state (and its discovery cache,
// else in ~/.kube/cache) in a folder of the test.
func helm(ctx context.Context, args ...string) (string, error) {
	return runHelm(ctx, "go", append([]string{"tool", "helm"}, args...)...)
}

// helm4 runs the Helm 4 CLI (`make helm4`: $HELM4, else bin/helm-v4*) as helm does the Helm 3 one.
func helm4(ctx context.Context, args ...string) (string, error) {
	bin := os.Getenv("HELM4")
	if bin == "" {
		found, _ := filepath.Glob(testutil.Path("bin", "helm-v4*"))
		Expect(found).NotTo(BeEmpty(), "run make helm4")
		bin = found[len(found)-1]
	}
	return runHelm(ctx, bin, args...)
}

func runHelm(ctx context.Context, bin string, args ...string) (string, error) {
	home := GinkgoT().TempDir()
	if bin == "go" {
		args = append(args[:2:2], append([]string{"--kubeconfig=" + cluster.Kubeconfig}, args[2:]...)...)
	} else {
		args = append([]string{"--kubeconfig=" + cluster.Kubeconfig}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = testutil.RepoRoot()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data",
		"KUBECACHEDIR="+home+"/kube")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

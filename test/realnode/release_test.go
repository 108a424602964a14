package realnode_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/plumbing/imagebuild"
	releasefiles "github.com/medik8s/node-healthcheck/internal/plumbing/release"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// releaseDir returns `make release`'s folder for the chart's appVersion ($RELEASE_DIR, else
// bin/release/<appVersion>), refusing one older than the image or the chart's files.
func releaseDir() string {
	dir := os.Getenv("RELEASE_DIR")
	if dir == "" {
		dir = testutil.Path("bin", "release", chartField("appVersion"))
	}
	sums, err := os.Stat(filepath.Join(dir, releasefiles.ChecksumsFile))
	Expect(err).NotTo(HaveOccurred(), "run make release")
	layout, err := testutil.ImageLayout()
	Expect(err).NotTo(HaveOccurred())
	index, err := os.Stat(filepath.Join(layout, "index.json"))
	Expect(err).NotTo(HaveOccurred())
	Expect(index.ModTime()).NotTo(BeTemporally(">", sums.ModTime()), "the image is newer than the release: run make release")
	Expect(filepath.Walk(testutil.Path("charts", "node-healthcheck"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.ModTime().After(sums.ModTime()) {
			Fail(p + " is newer than the release: run make release")
		}
		return err
	})).To(Succeed())
	return dir
}

// The release's two ways into a cluster that Helm's own suite above does not take: the chart from
// an OCI registry (pushed and signed by releasefiles.Push), and install.yaml with kubectl. Both use the
// chart's names (release nhc in namespace node-healthcheck) and leave the cluster without the
// operator, its namespaces and its CRD, so the other installs of this suite find what they expect
// in whichever order the containers run.
var _ = Describe("The release on a real node", Ordered, func() {
	var (
		dir     string
		version string
		c       client.Client
	)

	BeforeAll(func() {
		dir, version = releaseDir(), chartField("appVersion")
		archive := filepath.Join(dir, releasefiles.ImageArchiveName(version))
		begin := time.Now()
		Expect(cluster.ImportImage(archive, imageRepository)).To(Succeed())
		GinkgoWriter.Printf("Imported the release's %s in %s\n", archive, time.Since(begin).Round(time.Millisecond))
		scheme := runtime.NewScheme()
		Expect(remediationv1alpha1.AddToScheme(scheme)).To(Succeed())
		var err error
		c, err = client.New(cluster.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
	})

	AfterAll(func(ctx context.Context) {
		if dir == "" {
			return // BeforeAll found no release: nothing was installed
		}
		// Whatever a failed spec left: the Helm release, then every object of install.yaml
		// (namespaces and the CRD included), gone before the next container runs.
		_, _ = helm(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m", "--ignore-not-found")
		out, err := cluster.Kubectl("delete", "--ignore-not-found", "--wait=false", "-f", filepath.Join(dir, releasefiles.InstallFile)).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Eventually(func(g Gomega) {
			for _, ns := range []string{namespace, "medik8s-leases"} {
				_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s: %v", ns, err)
			}
			_, err := cs.Discovery().ServerResourcesForGroupVersion(remediationv1alpha1.GroupVersion.String())
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the NodeHealthCheck CRD: %v", err)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("installs the chart from an OCI registry, pushed and signed by the release, with helm", func(ctx context.Context) {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		DeferCleanup(srv.Close)
		host := strings.TrimPrefix(srv.URL, "http://")
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		pushed, err := releasefiles.Push(ctx, dir, version, releasefiles.PushOptions{Image: host + "/medik8s/node-healthcheck:" + version,
			ChartRepo: "oci://" + host + "/charts", Key: key, PlainHTTP: true, Created: time.Unix(0, 0)})
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("Pushed %s and %s\n", pushed.Image, pushed.Chart)

		begin := time.Now()
		out, err := helm(ctx, "install", release, "oci://"+host+"/charts/node-healthcheck", "--version", chartField("version"), "--plain-http",
			"--namespace", namespace, "--create-namespace", "--wait", "--timeout", "6m")
		Expect(err).NotTo(HaveOccurred(), out)
		GinkgoWriter.Printf("helm install from oci:// --wait returned after %s\n", time.Since(begin).Round(time.Second))
		out, err = helm(ctx, "list", "--namespace", namespace)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^nhc\s.*deployed\s+node-healthcheck-` + chartField("version")))
		expectReleasedOperator(ctx, c)

		out, err = helm(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() ([]corev1.Pod, error) { return readyOperatorPodsErr(ctx) }).WithContext(ctx).WithTimeout(2 * time.Minute).Should(BeEmpty())
	})

	It("installs with kubectl apply -f install.yaml: the operator becomes ready and makes its own webhook certificate", func(ctx context.Context) {
		begin := time.Now()
		out, err := cluster.Kubectl("apply", "-f", filepath.Join(dir, releasefiles.InstallFile)).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Eventually(func(g Gomega) {
			pods, err := readyOperatorPodsErr(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(2))
			// The kubelet's pod sync plus the operator's backed-off wait for its mounted
			// certificate, as for helm install: up to about 3 minutes.
		}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(time.Second).Should(Succeed())
		GinkgoWriter.Printf("Both replicas Ready %s after kubectl apply\n", time.Since(begin).Round(time.Second))
		ns, err := cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
		expectReleasedOperator(ctx, c)
		vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, deployment+"-validating", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(vwc.Webhooks).NotTo(BeEmpty())
		Expect(vwc.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "the operator wrote its CA into the static manifest's webhook configuration")

		// A second apply keeps what the operator wrote: the certificate and the caBundle.
		out, err = cluster.Kubectl("apply", "-f", filepath.Join(dir, releasefiles.InstallFile)).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		secret, err := cs.CoreV1().Secrets(namespace).Get(ctx, webhookSecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(secret.Data).NotTo(BeEmpty())
		vwc, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, deployment+"-validating", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(vwc.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "the second apply kept the caBundle")
		expectWebhookRefuses(ctx, c)
	})
})

// expectReleasedOperator checks that two operator pods run the release's image (this machine's
// platform's, by its config digest, as the CRI names it) and that the webhook refuses an invalid
// NodeHealthCheck.
func expectReleasedOperator(ctx context.Context, c client.Client) {
	GinkgoHelper()
	config := imageID()
	pods := readyOperatorPods(ctx)
	Expect(pods).To(HaveLen(2))
	for _, p := range pods {
		Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		Expect(p.Status.ContainerStatuses[0].Image).To(Equal(imageRepository + ":" + chartField("appVersion")))
		Expect(p.Status.ContainerStatuses[0].ImageID).To(Equal(config))
	}
	expectWebhookRefuses(ctx, c)
}

// imageID is how the CRI names `make image`'s image of this machine's platform (crictl's IMAGE
// ID): its config's digest.
func imageID() string {
	GinkgoHelper()
	layout, err := testutil.ImageLayout()
	Expect(err).NotTo(HaveOccurred())
	idx, _, err := imagebuild.ReadLayout(layout)
	Expect(err).NotTo(HaveOccurred())
	img, err := imagebuild.PlatformImage(idx, v1.Platform{OS: goruntime.GOOS, Architecture: goruntime.GOARCH})
	Expect(err).NotTo(HaveOccurred())
	config, err := img.ConfigName()
	Expect(err).NotTo(HaveOccurred())
	return config.String()
}

// expectWebhookRefuses creates an invalid NodeHealthCheck that only the operator's validating
// webhook refuses (one unhealthy condition listed twice: no CEL rule, no lookup, so no remediator's
// CRD is needed) and expects the webhook's refusal.
func expectWebhookRefuses(ctx context.Context, c client.Client) {
	GinkgoHelper()
	bad := testutil.NewNHC("release-invalid")
	bad.Spec.UnhealthyConditions = append(bad.Spec.UnhealthyConditions, bad.Spec.UnhealthyConditions[0])
	// Dry runs: nothing is stored, so a try before the CA reached the API server leaves nothing.
	Eventually(func() error { return c.Create(ctx, bad.DeepCopy(), client.DryRunAll) }).WithContext(ctx).WithTimeout(time.Minute).Should(MatchError(And(ContainSubstring(`admission webhook "vnodehealthcheck.kb.io" denied the request`),
		ContainSubstring("spec.unhealthyConditions["), ContainSubstring("Duplicate value"))))
}

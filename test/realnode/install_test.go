package realnode_test

import (
	"context"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/realnode"
)

const (
	// namespace is where the chart is installed, labelled for the restricted Pod Security Standard.
	namespace = "node-healthcheck"
	// release is the Helm release.
	release = "nhc"
	// imageRepository is the chart's default image.repository (test/chart checks it is the
	// Makefile's IMAGE_REPOSITORY).
	imageRepository = "ghcr.io/medik8s/node-healthcheck"
	// podSelector selects the release's operator pods.
	podSelector = "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/name=node-healthcheck"
)

// The user's path: the image's OCI archive imported into the runtime under its full reference, the
// packaged chart installed with Helm into a namespace that enforces the restricted Pod Security
// Standard, with only the image values set (the image is there: no pull).
var _ = Describe("The packaged chart installed with helm on a real node", Ordered, func() {
	var (
		operatorPods []corev1.Pod
		installed    time.Time
	)

	BeforeAll(func(ctx context.Context) {
		archive, pkg, tag := imageArchive(), chartPackage(), chartField("appVersion")
		begin := time.Now()
		Expect(cluster.ImportImage(archive, imageRepository)).To(Succeed())
		GinkgoWriter.Printf("Imported %s as %s:%s in %s\n", archive, imageRepository, tag, time.Since(begin).Round(time.Millisecond))
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
		}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		begin = time.Now()
		out, err := helm(ctx, "install", release, pkg, "--namespace", namespace,
			"--set", "image.repository="+imageRepository, "--set", "image.tag="+tag, "--set", "image.pullPolicy=Never")
		Expect(err).NotTo(HaveOccurred(), out)
		installed = time.Now()
		GinkgoWriter.Printf("helm install took %s\n", installed.Sub(begin).Round(time.Millisecond))
	})

	It("runs two replicas, Running and Ready, of the imported image", func(ctx context.Context) {
		Eventually(func(g Gomega) {
			pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(2))
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				g.Expect(podReady(p)).To(BeTrue(), "pod %s is not Ready", p.Name)
			}
			operatorPods = pods.Items
			// The kubelet's pod sync (1 minute and up to half of it in jitter) plus the operator's
			// backed-off wait for its mounted certificate: up to about 3 minutes seen here.
		}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(time.Second).Should(Succeed())
		GinkgoWriter.Printf("Both replicas Ready %s after helm install (the cluster started in %s)\n", time.Since(installed).Round(time.Second), startTime.Round(time.Millisecond))

		// The CRI names an image by its config's digest (crictl's IMAGE ID): this platform's image's.
		config := imageID()
		d, err := cs.AppsV1().Deployments(namespace).Get(ctx, "nhc-node-healthcheck", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Status.ReadyReplicas).To(BeNumerically("==", 2))
		for _, p := range operatorPods {
			Expect(p.Spec.NodeName).To(Equal(realnode.NodeName))
			Expect(p.Status.PodIP).To(HavePrefix("10.244.0."))
			Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			st := p.Status.ContainerStatuses[0]
			GinkgoWriter.Printf("Pod %s: IP %s, image %s (%s), %d restarts\n", p.Name, p.Status.PodIP, st.Image, st.ImageID, st.RestartCount)
			Expect(st.Image).To(Equal(imageRepository + ":" + chartField("appVersion")))
			Expect(st.ImageID).To(Equal(config), "the pod runs the image of the archive")
		}
	})

	It("is in a namespace that refuses pods the restricted standard forbids", func(ctx context.Context) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "not-restricted"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: imageRepository + ":" + chartField("appVersion")}}},
		}
		_, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))
	})

	It("has the API server call the chart's webhooks through their Service", func(ctx context.Context) {
		// Both webhooks fail closed (failurePolicy Fail): a NodeHealthCheck is admitted only when the
		// API server reached them, at the Service's cluster IP that kube-proxy translates to a pod. The
		// validating webhook's warning about the template's kind, which no CRD rule can know, shows it
		// answered.
		warnings := &warningRecorder{}
		cfg := rest.CopyConfig(cluster.Config)
		cfg.WarningHandler = warnings
		scheme := runtime.NewScheme()
		Expect(remediationv1alpha1.AddToScheme(scheme)).To(Succeed())
		k8s, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		svc, err := cs.CoreV1().Services(namespace).Get(ctx, "nhc-node-healthcheck-webhook", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		nhc := testutil.NewNHC("realnode-webhook-probe")
		nhc.Spec.MinHealthy = nil
		Expect(k8s.Create(ctx, nhc, client.DryRunAll)).To(Succeed())
		Expect(nhc.Spec.MinHealthy).NotTo(BeNil(), "defaulted")
		Expect(warnings.list()).To(ContainElement(ContainSubstring("TestRemediationTemplate")))
		GinkgoWriter.Printf("Admitted through Service %s (%s), warnings: %v\n", svc.Name, svc.Spec.ClusterIP, warnings.list())
	})

	It("has the runtime enforce the chart's securityContext, as the node sees the containers", func() {
		Expect(operatorPods).To(HaveLen(2))
		for _, p := range operatorPods {
			proc, err := cluster.ContainerProcess(p.Status.ContainerStatuses[0].ContainerID)
			Expect(err).NotTo(HaveOccurred())
			By("pod " + p.Name)
			Expect(proc.UIDs).To(HaveEach(65532), "runAsUser: 65532")
			Expect(proc.GIDs).To(HaveEach(65532), "runAsGroup: 65532")
			Expect(proc.CapEff).To(MatchRegexp("^0+$"), "capabilities: drop ALL")
			Expect(proc.CapBnd).To(MatchRegexp("^0+$"), "capabilities: drop ALL")
			Expect(proc.NoNewPrivs).To(Equal("1"), "allowPrivilegeEscalation: false")
			Expect(proc.Seccomp).To(Equal("2"), "seccompProfile: RuntimeDefault")
			root, ok := proc.Mount("/")
			Expect(ok).To(BeTrue())
			Expect(root.ReadOnly()).To(BeTrue(), "readOnlyRootFilesystem: true; / is mounted %v", root.Options)
			cert, ok := proc.Mount("/tmp/k8s-webhook-server/serving-certs")
			Expect(ok).To(BeTrue(), "the webhook certificate volume")
			Expect(cert.ReadOnly()).To(BeTrue())
			var writable []string
			for _, m := range proc.Mounts {
				if !m.ReadOnly() {
					writable = append(writable, m.Path+" ("+m.FSType+")")
				}
			}
			GinkgoWriter.Printf("Pod %s: PID %d on the node, UIDs %v, writable mounts: %s\n", p.Name, proc.PID, proc.UIDs, strings.Join(writable, ", "))
		}
	})

	scenarios()
	helm4Scenario()
	valuesScenario()
})

// warningRecorder keeps the API server's warnings.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningRecorder) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.warnings...)
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

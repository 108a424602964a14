package realnode_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/realnode"
)

// The ports of the host-network install: free in the node's network namespace (the API server has
// 6443, the kubelet 10248 and 10250, kube-proxy 10249 and 10256, kube-controller-manager 10257,
// kube-scheduler 10259) and none of the chart's defaults.
const (
	hostWebhookPort = 19443
	hostMetricsPort = 19444
	hostProbePort   = 19081
)

// valuesScenario installs the packaged chart with the values of issue 35 point 7 that change the
// pods (hostNetwork with other ports, env and envFrom, an extra volume) and the NetworkPolicy, on the
// cluster the earlier scenarios left (the release uninstalled, the CRD kept; or, focused alone, the
// release installed: it is upgraded), checks them on the node, and uninstalls (a spec of its own:
// helm cannot run in a DeferCleanup, and a failed spec leaves the release to the suite's teardown).
func valuesScenario() {
	// restoreEnforce gives the namespace its Pod Security level back after the uninstall.
	restoreEnforce := func(context.Context) {}
	It("runs the manager on the node's network with other ports, its environment and an extra volume, behind a NetworkPolicy", func(ctx context.Context) {
		scheme := runtime.NewScheme()
		Expect(corev1.AddToScheme(scheme)).To(Succeed())
		Expect(remediationv1alpha1.AddToScheme(scheme)).To(Succeed())
		k, err := client.New(cluster.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{testutil.TestCRDDir()}, ErrorIfPathMissing: true})
		Expect(err).NotTo(HaveOccurred())

		// Host-network pods are refused by the baseline and restricted Pod Security standards: the
		// namespace must admit privileged pods, for this install only.
		ns, err := cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		enforce := ns.Labels["pod-security.kubernetes.io/enforce"]
		setEnforce := func(ctx context.Context, level string) {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":%q}}}`, level)
			Expect(k.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
		}
		setEnforce(ctx, "privileged")
		restoreEnforce = func(ctx context.Context) { setEnforce(ctx, enforce) }

		// envFrom's source and the extra volume's.
		Expect(k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "nhc-env"},
			Data: map[string]string{"NHC_FROM_CONFIGMAP": "yes"}})).To(Succeed())
		Expect(k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "nhc-extra"},
			Data: map[string]string{"note": "mounted"}})).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			for _, name := range []string{"nhc-env", "nhc-extra"} {
				Expect(client.IgnoreNotFound(k.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}))).To(Succeed())
			}
		})

		values, err := os.CreateTemp(GinkgoT().TempDir(), "values-*.yaml")
		Expect(err).NotTo(HaveOccurred())
		_, err = fmt.Fprintf(values, `image: {repository: %s, tag: %q, pullPolicy: Never}
replicaCount: 1
podDisruptionBudget: {enabled: false}
hostNetwork: true
webhooks: {port: %d}
metrics: {port: %d}
healthProbe: {port: %d}
env: [{name: GOGC, value: "50"}, {name: GOMEMLIMIT, value: 200MiB}]
envFrom: [{configMapRef: {name: nhc-env}}]
extraVolumes: [{name: extra, configMap: {name: nhc-extra}}]
extraVolumeMounts: [{name: extra, mountPath: /etc/nhc-extra, readOnly: true}]
networkPolicy: {enabled: true}
apiPriorityAndFairness: {enabled: true}
commonLabels: {team: platform}
`, imageRepository, chartField("appVersion"), hostWebhookPort, hostMetricsPort, hostProbePort)
		Expect(err).NotTo(HaveOccurred())
		Expect(values.Close()).To(Succeed())
		begin := time.Now()
		out, err := helm(ctx, "upgrade", "--install", release, chartPackage(), "--namespace", namespace, "--reset-values", "-f", values.Name(), "--wait", "--timeout", "6m")
		Expect(err).NotTo(HaveOccurred(), out)
		GinkgoWriter.Printf("helm upgrade --install --wait (hostNetwork) returned after %s\n", time.Since(begin).Round(time.Second))

		var pod corev1.Pod
		Eventually(func(g Gomega) {
			pods := readyOperatorPods(ctx)
			g.Expect(pods).To(HaveLen(1))
			pod = pods[0]
			g.Expect(pod.Spec.HostNetwork).To(BeTrue())
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "the host-network pod Ready: its probes answered on %d", hostProbePort)
		Expect(pod.Status.PodIP).To(Equal(realnode.NodeIP), "a host-network pod has the node's address")
		Expect(pod.Spec.DNSPolicy).To(Equal(corev1.DNSClusterFirstWithHostNet))
		Expect(pod.Labels).NotTo(HaveKey("team"), "commonLabels are the objects', not the pods'")

		By("the manager process's environment and mounts, as the node sees them")
		proc, err := cluster.ContainerProcess(pod.Status.ContainerStatuses[0].ContainerID)
		Expect(err).NotTo(HaveOccurred())
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", proc.PID))
		Expect(err).NotTo(HaveOccurred())
		env := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
		Expect(env).To(ContainElements("GOGC=50", "GOMEMLIMIT=200MiB", "NHC_FROM_CONFIGMAP=yes"))
		extra, ok := proc.Mount("/etc/nhc-extra")
		Expect(ok).To(BeTrue(), "the extra volume is mounted")
		Expect(extra.ReadOnly()).To(BeTrue())
		note, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/nhc-extra/note", proc.PID))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(note)).To(Equal("mounted"))
		GinkgoWriter.Printf("Manager PID %d on the node: GOGC, GOMEMLIMIT and NHC_FROM_CONFIGMAP in its environment, /etc/nhc-extra mounted\n", proc.PID)

		By("the webhook answers at the node's address, through the Service")
		Eventually(func(g Gomega) {
			eps, err := cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + webhookService})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(eps.Items).To(ContainElement(And(
				HaveField("Ports", ContainElement(HaveField("Port", HaveValue(BeNumerically("==", hostWebhookPort))))),
				HaveField("Endpoints", ContainElement(HaveField("Addresses", ContainElement(realnode.NodeIP)))))))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "the webhook Service's endpoint is the node's address and port %d", hostWebhookPort)
		bad := testutil.NewNHC("realnode-values-invalid")
		bad.Spec.RemediationTemplate = testutil.TestTemplateRef("realnode-template")
		bad.Spec.RemediationTemplate.Namespace = ""
		Expect(k.Create(ctx, bad)).To(MatchError(And(ContainSubstring(`admission webhook "vnodehealthcheck.kb.io" denied the request`),
			ContainSubstring("spec.remediationTemplate.namespace"))), "an invalid NodeHealthCheck refused by the webhook on port %d", hostWebhookPort)

		By("metrics on the node's port, verified as the chart's ServiceMonitor would")
		secret, err := cs.CoreV1().Secrets(namespace).Get(ctx, webhookSecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
		token := serviceAccountToken(ctx, "realnode-values-scraper", true)
		verified := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool,
			ServerName: webhookService + "." + namespace + ".svc", MinVersion: tls.VersionTLS12}}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(realnode.NodeIP, strconv.Itoa(hostMetricsPort))+"/metrics", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := verified.Do(req)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		probe, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(realnode.NodeIP, strconv.Itoa(hostProbePort)) + "/readyz")
		Expect(err).NotTo(HaveOccurred())
		_ = probe.Body.Close()
		Expect(probe.StatusCode).To(Equal(http.StatusOK))

		By("the NetworkPolicy and the FlowSchema applied")
		np, err := cs.NetworkingV1().NetworkPolicies(namespace).Get(ctx, deployment, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(np.Labels).To(HaveKeyWithValue("team", "platform"))
		fs, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, deployment, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(fs.Spec.Rules[0].Subjects[0].ServiceAccount).To(HaveValue(Equal(flowcontrolv1.ServiceAccountSubject{Name: deployment, Namespace: namespace})))
		// The node's bridge CNI enforces no NetworkPolicy, and host-network pods are outside every
		// policy anyway: the policy is accepted and applied, what it denies is not tested here.
		GinkgoWriter.Printf("NetworkPolicy %s applied (not enforced by the bridge CNI); FlowSchema %s (UID %s)\n", np.Name, fs.Name, fs.UID)
	})

	It("uninstalls the host-network release, leaving only the leader election Lease, to expire", func(ctx context.Context) {
		out, err := helm(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		expectNoPodsNorWebhooks(ctx)
		nodeLeases, err := cs.CoordinationV1().Leases("medik8s-leases").List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodeLeases.Items).To(BeEmpty())
		// On the host network a pod's hostname is the node's, and so is the start of the leader
		// election identity controller-runtime makes of it: the uninstall hook, which deletes the
		// Lease when this release's pods (<fullname>-...) held it, cannot tell it from another
		// operator's, and leaves it to expire (values.yaml, hostNetwork). Nothing else is left.
		hostname, err := os.Hostname()
		Expect(err).NotTo(HaveOccurred())
		if l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, leaderLease, metav1.GetOptions{}); err == nil {
			Expect(l.Spec.HolderIdentity).To(HaveValue(Or(BeEmpty(), HavePrefix(hostname+"_"))), "the leader election Lease left is the host-network manager's")
			GinkgoWriter.Printf("Leader election Lease left by the host-network release, holder %q\n", *l.Spec.HolderIdentity)
			Expect(cs.CoordinationV1().Leases(namespace).Delete(ctx, leaderLease, metav1.DeleteOptions{})).To(Succeed())
		}
		restoreEnforce(ctx)
	})
}

package realnode_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

const (
	// deployment, webhookService, metricsService and webhookSecret are the chart's names for release.
	deployment     = "nhc-node-healthcheck"
	webhookService = "nhc-node-healthcheck-webhook"
	metricsService = "nhc-node-healthcheck-metrics"
	webhookSecret  = "nhc-node-healthcheck-webhook-cert"
	// leaderLease is the chart's leaderElection.id, a Lease in the release's namespace.
	leaderLease = "e1f13584.medik8s.io"
	// nodeGrace is the cluster's node monitor grace period (realnode.Options): a kwok worker whose
	// heartbeats stop is Ready=Unknown about this long after its last one.
	nodeGrace = 20 * time.Second
	// remediationTimeout bounds a node failure's whole course: Unknown after nodeGrace, the
	// NodeHealthCheck's 2s, the remediator's reboot (3s), Ready again, the CR deleted; and up to the
	// chart's returningNodeGrace (60s) when another worker came back just before.
	remediationTimeout = 3 * time.Minute
	// statusTimeout bounds how long the status takes to show a change: the nhc controller batches
	// its writes (2s; 6s for counts alone during a burst).
	statusTimeout = 10 * time.Second
	// takeoverBound is how soon another manager must lead after the leader pod is deleted or its
	// container killed (the 20s). A deleted leader serves on for the manager's
	// --shutdown-delay (5s), stops and releases the Lease; the next retry (2s, up to 1.2x more in
	// jitter) of a candidate takes it: the standby, or the Deployment's new pod, which has started
	// meanwhile. A killed one's Lease (the chart's 12s) runs out, then a candidate's next retry takes
	// it. The candidates are the standby and the kubelet's
	// restart of the killed container (a new process with a new identity, in the same pod): both
	// have synced caches when they campaign (controller-runtime starts leader election after them),
	// so either leads at once, and which one wins is a race the test does not decide.
	takeoverBound = 20 * time.Second
)

// upgradeTag is the other version's tag (the image built and imported by the upgrade scenario).
var upgradeTag string

var (
	k8s        client.Client
	remediator *localcluster.Remediator
	// created records each TestRemediation CR the operator created (by UID) per node.
	created = &crLog{byNode: map[string]map[types.UID]bool{}}
)

// crLog records remediation CRs as they are created.
type crLog struct {
	mu     sync.Mutex
	byNode map[string]map[types.UID]bool
}

func (l *crLog) add(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	node := u.GetAnnotations()[remediationv1alpha1.NodeNameAnnotation]
	if node == "" {
		node = u.GetName()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byNode[node] == nil {
		l.byNode[node] = map[types.UID]bool{}
	}
	l.byNode[node][u.GetUID()] = true
}

// count returns how many CRs were created for the node so far.
func (l *crLog) count(node string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byNode[node])
}

// scenarios are the deployment scenarios on the installed chart; they run in the install's Ordered
// container, after its checks.
func scenarios() {
	var (
		group  string
		nhc    *remediationv1alpha1.NodeHealthCheck
		nodes  []string
		scrape func(ctx context.Context, podIP string) (int, string)
		// stop ends the CR recorder and the remediator after the last scenario.
		stop context.CancelFunc = func() {}
	)
	AfterAll(func() { stop() })

	It("runs the test remediator's world: kwok workers beside the real node, the CRDs and the rights", func(ctx context.Context) {
		scheme := runtime.NewScheme()
		Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
		Expect(remediationv1alpha1.AddToScheme(scheme)).To(Succeed())
		var err error
		k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{testutil.TestCRDDir()}, ErrorIfPathMissing: true})
		Expect(err).NotTo(HaveOccurred())
		// The test remediator's rights reach the operator through aggregation, as remediators' do.
		Expect(k8s.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "test-remediator", Labels: map[string]string{remediationv1alpha1.AggregateToExtRemediationLabel: "true"}},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediationtemplates"}, Verbs: []string{"get"}},
				{APIGroups: []string{"test.medik8s.io"}, Resources: []string{"testremediations"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			},
		})).To(Succeed())
		Expect(k8s.Create(ctx, testutil.TemplateObject("realnode-template", true))).To(Succeed())

		kwokDir, err := localcluster.KwokDir()
		Expect(err).NotTo(HaveOccurred())
		Expect(cluster.StartKwok(kwokDir, localcluster.KwokLabel+"="+localcluster.KwokLabelValue)).To(Succeed())
		group = "realnode-workers"
		for i := range 3 {
			name := fmt.Sprintf("kwok-worker-%d", i)
			// Tainted, as kwok's nodes should be: the operator's pods stay on the real node.
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{localcluster.KwokLabel: localcluster.KwokLabelValue,
					"kubernetes.io/hostname": name, testutil.GroupLabel: group}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
			}
			Expect(k8s.Create(ctx, n)).To(Succeed())
			nodes = append(nodes, name)
		}
		for _, n := range nodes {
			Eventually(func() (corev1.ConditionStatus, error) { return localcluster.Ready(ctx, k8s, n) }).
				WithContext(ctx).WithTimeout(time.Minute).Should(Equal(corev1.ConditionTrue), "kwok reports %s Ready", n)
		}

		// Every CR the operator creates, recorded as it appears.
		crCache, err := cache.New(cluster.Config, cache.Options{})
		Expect(err).NotTo(HaveOccurred())
		crs := &unstructured.Unstructured{}
		crs.SetAPIVersion("test.medik8s.io/v1alpha1")
		crs.SetKind("TestRemediation")
		inf, err := crCache.GetInformer(ctx, crs)
		Expect(err).NotTo(HaveOccurred())
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: created.add})
		Expect(err).NotTo(HaveOccurred())
		var cacheCtx context.Context
		cacheCtx, stop = context.WithCancel(context.Background())
		go func() { _ = crCache.Start(cacheCtx) }()
		Expect(crCache.WaitForCacheSync(ctx)).To(BeTrue())

		remediator = &localcluster.Remediator{Client: k8s, Namespace: testutil.TemplateNamespace, RebootDelay: 3 * time.Second, Log: GinkgoWriter.Printf}
		go remediator.Run(cacheCtx)

		token := serviceAccountToken(ctx, "realnode-metrics-reader", true)
		scrape = func(ctx context.Context, podIP string) (int, string) {
			return get(ctx, "https://"+net.JoinHostPort(podIP, "8443")+"/metrics", token)
		}
	})

	It("refuses an invalid NodeHealthCheck with its message and admits a valid one, through the chart's Service", func(ctx context.Context) {
		bad := testutil.NewNHC("realnode-invalid")
		bad.Spec.RemediationTemplate = testutil.TestTemplateRef("realnode-template")
		bad.Spec.RemediationTemplate.Namespace = ""
		err := k8s.Create(ctx, bad)
		Expect(err).To(MatchError(And(ContainSubstring(`admission webhook "vnodehealthcheck.kb.io" denied the request`),
			ContainSubstring("spec.remediationTemplate.namespace"))))

		nhc = testutil.NewNHC("realnode-workers")
		nhc.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{testutil.GroupLabel: group}}
		nhc.Spec.RemediationTemplate = testutil.TestTemplateRef("realnode-template")
		nhc.Spec.UnhealthyConditions = []remediationv1alpha1.UnhealthyCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Duration: metav1.Duration{Duration: 2 * time.Second}},
			{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Duration: metav1.Duration{Duration: 2 * time.Second}},
		}
		Expect(k8s.Create(ctx, nhc)).To(Succeed())
		stored := &remediationv1alpha1.NodeHealthCheck{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(nhc), stored)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(nhc), stored)).To(Succeed())
			g.Expect(stored.Status.ObservedNodes).To(HaveValue(Equal(3)))
			g.Expect(stored.Status.HealthyNodes).To(HaveValue(Equal(3)))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "the leader reports the kwok workers")
	})

	It("serves the webhook certificate the chart configured: the operator's own, for the Service, trusted through the caBundle", func(ctx context.Context) {
		svc, err := cs.CoreV1().Services(namespace).Get(ctx, webhookService, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		vwcs, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		Expect(err).NotTo(HaveOccurred())
		Expect(vwcs.Items).To(HaveLen(1))
		Expect(vwcs.Items[0].Webhooks).NotTo(BeEmpty())
		wh := vwcs.Items[0].Webhooks[0].ClientConfig
		Expect(wh.Service).NotTo(BeNil())
		Expect(wh.Service.Name).To(Equal(webhookService))
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(wh.CABundle)).To(BeTrue(), "the caBundle holds a CA")
		serverName := webhookService + "." + namespace + ".svc"
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", net.JoinHostPort(svc.Spec.ClusterIP, "443"),
			&tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
		Expect(err).NotTo(HaveOccurred(), "the Service's certificate verifies against the caBundle for %s", serverName)
		defer conn.Close()
		leaf := conn.ConnectionState().PeerCertificates[0]
		Expect(leaf.DNSNames).To(ContainElements(serverName, serverName+".cluster.local"))
		// selfManagedCertificate.validity: 8760h (cert-manager is not installed: certManager.enabled
		// auto falls back to the operator's own certificate).
		Expect(leaf.NotAfter.Sub(leaf.NotBefore)).To(BeNumerically("~", 8760*time.Hour, time.Hour))
		secret, err := cs.CoreV1().Secrets(namespace).Get(ctx, webhookSecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(secret.Data["tls.crt"])).To(ContainSubstring(strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})))), "the Secret's certificate is the one served")
		GinkgoWriter.Printf("Served %v, valid %s to %s, issued by %s\n", leaf.DNSNames, leaf.NotBefore, leaf.NotAfter, leaf.Issuer)
	})

	It("has a kwok worker's failure remediated by the running pods, shown by kubectl get nhc, and the CR removed when it comes back", func(ctx context.Context) {
		node := nodes[0]
		Expect(localcluster.SetHeartbeats(ctx, k8s, node, false)).To(Succeed())
		begin := time.Now()
		Eventually(testutil.NodeCRs(ctx, k8s, node, testutil.TestRemediationKind)).WithContext(ctx).WithTimeout(remediationTimeout).ShouldNot(BeEmpty())
		GinkgoWriter.Printf("CR for %s %s after its heartbeats stopped\n", node, time.Since(begin).Round(time.Second))
		// kubectl's own table, while the CR exists (the remediator brings the node back after 3s:
		// the CR stays until the operator sees it Ready and deletes it).
		Eventually(func(g Gomega) {
			out, err := cluster.Kubectl("get", "nhc", nhc.Name).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			g.Expect(lines).To(HaveLen(2), string(out))
			g.Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "PHASE", "OBSERVED", "HEALTHY", "REMEDIATING", "REASON", "AGE"}))
			g.Expect(strings.Fields(lines[1])[:5]).To(Equal([]string{nhc.Name, "Remediating", "3", "2", "1"}), string(out))
			GinkgoWriter.Printf("kubectl get nhc:\n%s\n", out)
		}).WithContext(ctx).WithTimeout(remediationTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
		Eventually(testutil.NodeCRs(ctx, k8s, node, testutil.TestRemediationKind)).WithContext(ctx).WithTimeout(remediationTimeout).Should(BeEmpty(), "the CR is removed once the node is back")
		Expect(localcluster.Ready(ctx, k8s, node)).To(Equal(corev1.ConditionTrue))
		Expect(created.count(node)).To(Equal(1))
		// The status follows within its batch (2s; 6s when only the counts change: issue 27).
		Eventually(func(g Gomega) {
			out, err := cluster.Kubectl("get", "nhc", nhc.Name).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			g.Expect(strings.Fields(strings.Split(string(out), "\n")[1])[:5]).To(Equal([]string{nhc.Name, "Enabled", "3", "3", "0"}), string(out))
		}).WithContext(ctx).WithTimeout(statusTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	// failover takes the leader away (gone), checks that another manager leads within bound (one in
	// another pod when podGone), and has a worker fail meanwhile: it is remediated exactly once, by
	// the new leader.
	failover := func(ctx context.Context, node string, bound time.Duration, podGone bool, gone func(leader corev1.Pod) time.Time) {
		leader, _ := leaderAndOther(ctx)
		lost := leaseHolder(ctx)
		Expect(lost).To(HavePrefix(leader.Name + "_"))
		// Every version of the Lease from now on, to see whether the lost leader released it.
		l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, leaderLease, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		w, err := cs.CoordinationV1().Leases(namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + leaderLease, ResourceVersion: l.ResourceVersion})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		var (
			holdersMu sync.Mutex
			holders   []string
		)
		go func() {
			for ev := range w.ResultChan() {
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					holdersMu.Lock()
					holders = append(holders, ptr.Deref(l.Spec.HolderIdentity, ""))
					holdersMu.Unlock()
				}
			}
		}()
		Expect(localcluster.SetHeartbeats(ctx, k8s, node, false)).To(Succeed())
		at := gone(leader)
		var other corev1.Pod
		Eventually(func(g Gomega) {
			other = corev1.Pod{}
			holder := leaseHolder(ctx)
			g.Expect(holder).NotTo(BeEmpty())
			g.Expect(holder).NotTo(Equal(lost), "the lost leader")
			if podGone {
				g.Expect(holder).NotTo(HavePrefix(leader.Name+"_"), "the deleted pod")
			}
			pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
			g.Expect(err).NotTo(HaveOccurred())
			for _, p := range pods.Items {
				if strings.HasPrefix(holder, p.Name+"_") {
					other = p
				}
			}
			g.Expect(other.Name).NotTo(BeEmpty(), "holder %s is a pod of the release", holder)
		}).WithContext(ctx).WithTimeout(bound-time.Since(at)).WithPolling(100*time.Millisecond).Should(Succeed(), "another manager leads within %s", bound)
		took := time.Since(at)
		seen := func() []string {
			holdersMu.Lock()
			defer holdersMu.Unlock()
			return append([]string(nil), holders...)
		}
		if podGone {
			// The watch delivers every version of the Lease: the released one before the new
			// holder's (which the poll above may have read first).
			Eventually(seen).WithTimeout(10*time.Second).Should(ContainElement(""), "the deleted leader released the Lease as it stopped (LeaderElectionReleaseOnCancel)")
		}
		GinkgoWriter.Printf("Lease holders since: %q\n", seen())
		switch {
		case other.Name == leader.Name:
			GinkgoWriter.Printf("The restarted container of %s leads %s after its process was killed\n", other.Name, took.Round(100*time.Millisecond))
		case other.CreationTimestamp.Time.After(at.Add(-time.Second)):
			GinkgoWriter.Printf("The Deployment's new pod %s leads %s after %s was gone\n", other.Name, took.Round(100*time.Millisecond), leader.Name)
		default:
			GinkgoWriter.Printf("The standby %s leads %s after %s was gone\n", other.Name, took.Round(100*time.Millisecond), leader.Name)
		}
		Eventually(testutil.NodeCRs(ctx, k8s, node, testutil.TestRemediationKind)).WithContext(ctx).WithTimeout(remediationTimeout).ShouldNot(BeEmpty())
		Eventually(testutil.NodeCRs(ctx, k8s, node, testutil.TestRemediationKind)).WithContext(ctx).WithTimeout(remediationTimeout).Should(BeEmpty())
		// Once: the new leader's remediation controller decided with the node back in view (its
		// decisions counter, scraped from the pod), and nothing more was created.
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(nhc), nhc)).To(Succeed())
			g.Expect(nhc.Status.HealthyNodes).To(HaveValue(Equal(3)))
		}).WithContext(ctx).WithTimeout(remediationTimeout).Should(Succeed())
		Eventually(func(g Gomega) {
			p, err := cs.CoreV1().Pods(namespace).Get(ctx, other.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			other = *p
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		testutil.DecidedAfter(time.Minute, func() { touch(ctx, nhc.Name) }, func() float64 { return decisions(ctx, scrape, other.Status.PodIP, nhc.Name) },
			"the new leader decided NodeHealthCheck %s after the node came back", nhc.Name)
		Consistently(func() int { return created.count(node) }).WithTimeout(3*time.Second).Should(Equal(1), "node %s remediated once", node)
		Eventually(func(g Gomega) { g.Expect(readyOperatorPods(ctx)).To(HaveLen(2)) }).WithContext(ctx).WithTimeout(3*time.Minute).Should(Succeed(), "two replicas again")
	}

	It("has another replica lead within 20s when the leader pod is deleted (the Lease released as it stops), and a node failing meanwhile remediated once", func(ctx context.Context) {
		failover(ctx, nodes[1], takeoverBound, true, func(leader corev1.Pod) time.Time {
			Expect(cs.CoreV1().Pods(namespace).Delete(ctx, leader.Name, metav1.DeleteOptions{})).To(Succeed())
			return time.Now()
		})
	})

	It("has another manager lead within 20s when the leader's container is killed (SIGKILL on the node), and a node failing meanwhile remediated once", func(ctx context.Context) {
		var killed corev1.Pod
		failover(ctx, nodes[2], takeoverBound, false, func(leader corev1.Pod) time.Time {
			killed = leader
			proc, err := cluster.ContainerProcess(leader.Status.ContainerStatuses[0].ContainerID)
			Expect(err).NotTo(HaveOccurred())
			Expect(syscall.Kill(proc.PID, syscall.SIGKILL)).To(Succeed())
			return time.Now()
		})
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, killed.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1), "the kubelet restarted the killed container")
	})

	It("serves metrics through the chart's Service to a ServiceAccount allowed to read them, and refuses clients without a token or the right", func(ctx context.Context) {
		svc, err := cs.CoreV1().Services(namespace).Get(ctx, metricsService, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		url := "https://" + net.JoinHostPort(svc.Spec.ClusterIP, "8443") + "/metrics"
		allowed := serviceAccountToken(ctx, "realnode-scraper", true)
		denied := serviceAccountToken(ctx, "realnode-nobody", false)
		code, body := get(ctx, url, allowed)
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("nodehealthcheck_"))
		code, _ = get(ctx, url, "")
		Expect(code).To(Equal(http.StatusUnauthorized))
		code, _ = get(ctx, url, denied)
		Expect(code).To(Equal(http.StatusForbidden))
	})

	It("rolls out another image version with helm upgrade: a client creating and updating NodeHealthChecks meanwhile sees no admission failure, and the PodDisruptionBudget holds", func(ctx context.Context) {
		tag := chartField("appVersion") + "-upgrade"
		archive := buildVersion(ctx, tag)
		upgradeTag = tag
		Expect(cluster.ImportImage(archive, imageRepository)).To(Succeed())

		loopCtx, stopLoop := context.WithCancel(ctx)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			failures []string
			requests int
			minReady = 2
		)
		wg.Add(2)
		go func() { // the client
			defer GinkgoRecover()
			defer wg.Done()
			for i := 0; loopCtx.Err() == nil; i++ {
				n := testutil.NewNHC(fmt.Sprintf("realnode-upgrade-%d", i))
				n.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{testutil.GroupLabel: "none"}}
				n.Spec.RemediationTemplate = testutil.TestTemplateRef("realnode-template")
				errs := []error{k8s.Create(loopCtx, n)}
				if errs[0] == nil {
					// The leader writes the new NodeHealthCheck's status meanwhile: an update from
					// the created object conflicts, as any client's would, and is retried on the
					// current one (conflicts come from storage, after admission).
					errs = append(errs, retry.RetryOnConflict(retry.DefaultRetry, func() error {
						if err := k8s.Get(loopCtx, client.ObjectKeyFromObject(n), n); err != nil {
							return err
						}
						mh := intstr.FromString("50%")
						n.Spec.MinHealthy = &mh
						return k8s.Update(loopCtx, n)
					}), k8s.Delete(loopCtx, n))
				}
				mu.Lock()
				for _, err := range errs {
					requests++
					if err != nil && loopCtx.Err() == nil {
						failures = append(failures, err.Error())
					}
				}
				mu.Unlock()
			}
		}()
		go func() { // the pods' readiness
			defer GinkgoRecover()
			defer wg.Done()
			for loopCtx.Err() == nil {
				if pods, err := readyOperatorPodsErr(loopCtx); err == nil {
					mu.Lock()
					minReady = min(minReady, len(pods))
					mu.Unlock()
				}
				select {
				case <-loopCtx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()

		begin := time.Now()
		out, err := helm(ctx, "upgrade", release, chartPackage(), "--namespace", namespace, "--reuse-values", "--set", "image.tag="+tag, "--wait", "--timeout", "5m")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			pods := readyOperatorPods(ctx)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Status.ContainerStatuses[0].Image).To(Equal(imageRepository + ":" + tag))
			}
			all, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(all.Items).To(HaveLen(2), "the old pods are gone")
		}).WithContext(ctx).WithTimeout(5 * time.Minute).Should(Succeed())
		rollout := time.Since(begin)
		// A few more requests against the new pods alone.
		Eventually(func() int { mu.Lock(); defer mu.Unlock(); return requests }).WithContext(ctx).Should(BeNumerically(">", 30))
		stopLoop()
		wg.Wait()
		GinkgoWriter.Printf("Rolled out %s in %s; the client made %d requests meanwhile; fewest Ready replicas %d\n", tag, rollout.Round(time.Second), requests, minReady)
		Expect(failures).To(BeEmpty(), "admission failures during the rolling update")
		Expect(minReady).To(BeNumerically(">=", 1), "the PodDisruptionBudget's minAvailable")

		// The budget itself: with both Ready one eviction is allowed, and a second while the first
		// one's replacement is not Ready is refused.
		pdb, err := cs.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, deployment, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(1))
		Eventually(func(g Gomega) {
			pdb, err := cs.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, deployment, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pdb.Status.DisruptionsAllowed).To(Equal(int32(1)))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		pods := readyOperatorPods(ctx)
		Expect(pods).To(HaveLen(2))
		Expect(evict(ctx, pods[0].Name)).To(Succeed())
		err = evict(ctx, pods[1].Name)
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "the second eviction is refused: %v", err)
		Expect(err.Error()).To(ContainSubstring("disruption budget"))
		Eventually(func(g Gomega) { g.Expect(readyOperatorPods(ctx)).To(HaveLen(2)) }).WithContext(ctx).WithTimeout(3*time.Minute).Should(Succeed(), "two replicas again")
	})

	It("passes helm test as the install notes say to run it, running its pod", func(ctx context.Context) {
		notes, err := helm(ctx, "get", "notes", release, "--namespace", namespace)
		Expect(err).NotTo(HaveOccurred(), notes)
		m := regexp.MustCompile(`(?m)^\s*helm (test .*)$`).FindStringSubmatch(notes)
		Expect(m).NotTo(BeNil(), "the notes say how to run helm test:\n%s", notes)
		GinkgoWriter.Printf("The notes say: helm %s\n", m[1])
		out, err := helm(ctx, append(strings.Fields(m[1]), "--timeout", "3m")...)
		if err != nil {
			// A failed test's pod stays, with the self-test's report of each check.
			logs, _ := cluster.Kubectl("logs", "-n", namespace, deployment+"-self-test").CombinedOutput()
			Fail(fmt.Sprintf("helm %s: %v\n%s\nthe self-test's log:\n%s", m[1], err, out, logs))
		}
		Expect(out).To(MatchRegexp(`TEST SUITE:\s+nhc-node-healthcheck-self-test`))
		Expect(out).To(MatchRegexp(`Phase:\s+Succeeded`))
		Expect(out).NotTo(MatchRegexp(`Phase:\s+Failed`))
		GinkgoWriter.Printf("%s\n", out)
	})

	It("leaves no pods, webhook configurations, Leases or remediation CRs behind on helm uninstall, and keeps the CRD (crds.keep)", func(ctx context.Context) {
		// A remediation running at the uninstall: the remediator holds its CR.
		remediator.Hold("realnode-template", true)
		DeferCleanup(func() { remediator.Hold("realnode-template", false) })
		Expect(localcluster.SetHeartbeats(ctx, k8s, nodes[0], false)).To(Succeed())
		Eventually(testutil.NodeCRs(ctx, k8s, nodes[0], testutil.TestRemediationKind)).WithContext(ctx).WithTimeout(remediationTimeout).ShouldNot(BeEmpty())
		// While the operator runs, its webhook keeps the NodeHealthCheck of a running remediation, as
		// its status lists it (written at once for a new start, yet after the CR's create).
		Eventually(func(g Gomega) {
			stored := &remediationv1alpha1.NodeHealthCheck{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(nhc), stored)).To(Succeed())
			g.Expect(stored.Status.RemediatingNodes).To(HaveValue(Equal(1)))
		}).WithContext(ctx).WithTimeout(statusTimeout).Should(Succeed())
		err := k8s.Delete(ctx, nhc)
		Expect(err).To(MatchError(And(ContainSubstring(`admission webhook "vnodehealthcheck.kb.io" denied the request`), ContainSubstring("remediation is running for node(s) "+nodes[0]))))

		// What the uninstall must not leave: the leader's Lease and the running remediation's node Lease.
		Expect(leaseHolder(ctx)).NotTo(BeEmpty())
		nl, err := cs.CoordinationV1().Leases("medik8s-leases").Get(ctx, nodelease.Name(nodes[0]), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ptr.Deref(nl.Spec.HolderIdentity, "")).To(Equal(nodelease.Holder(nhc.Name)))

		begin := time.Now()
		out, err := helm(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		GinkgoWriter.Printf("helm uninstall --wait returned after %s\n", time.Since(begin).Round(100*time.Millisecond))
		expectUninstalled(ctx)
		// The user's NodeHealthCheck stays too, with its CR; deleted now (the CRD's rules admit it),
		// it takes its CRs with it: they are owned by it, and nothing of the operator holds them.
		Expect(k8s.Delete(ctx, nhc)).To(Succeed())
		Eventually(testutil.NodeCRs(ctx, k8s, nodes[0], testutil.TestRemediationKind)).WithContext(ctx).WithTimeout(time.Minute).Should(BeEmpty(), "the CRs of the deleted NodeHealthCheck")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(nhc), &remediationv1alpha1.NodeHealthCheck{}))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(BeTrue(), "no finalizer of the gone operator holds the NodeHealthCheck")
	})
}

// helm4Scenario installs, upgrades and uninstalls the chart with Helm 4: server-side apply and its
// kstatus-based wait (--wait=watcher), on the cluster the Helm 3 release has left.
func helm4Scenario() {
	It("installs, upgrades and uninstalls with Helm 4: server-side apply, kstatus wait", func(ctx context.Context) {
		version, err := helm4(ctx, "version", "--short")
		Expect(err).NotTo(HaveOccurred(), version)
		Expect(version).To(HavePrefix("v4."))
		begin := time.Now()
		out, err := helm4(ctx, "install", release, chartPackage(), "--namespace", namespace, "--server-side=true", "--wait=watcher", "--timeout", "6m",
			"--set", "image.repository="+imageRepository, "--set", "image.tag="+chartField("appVersion"), "--set", "image.pullPolicy=Never")
		Expect(err).NotTo(HaveOccurred(), out)
		GinkgoWriter.Printf("helm4 install --wait=watcher returned after %s\n", time.Since(begin).Round(time.Second))
		// kstatus waited for the Deployment to be Current: both replicas Ready when it returned.
		Expect(readyOperatorPods(ctx)).To(HaveLen(2))
		d, err := cs.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.ManagedFields).To(ContainElement(And(HaveField("Manager", "helm"), HaveField("Operation", metav1.ManagedFieldsOperationApply))),
			"the Deployment was server-side applied by helm")

		Expect(upgradeTag).NotTo(BeEmpty(), "the upgrade scenario imported another version")
		out, err = helm4(ctx, "upgrade", release, chartPackage(), "--namespace", namespace, "--server-side=true", "--wait=watcher", "--timeout", "6m",
			"--reuse-values", "--set", "image.tag="+upgradeTag)
		Expect(err).NotTo(HaveOccurred(), out)
		pods := readyOperatorPods(ctx)
		Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			Expect(p.Status.ContainerStatuses[0].Image).To(Equal(imageRepository + ":" + upgradeTag))
		}
		// The server-side apply left the aggregation controller's rules alone: the test
		// remediator's two rules, aggregated into the role Helm 4 created.
		agg, err := cs.RbacV1().ClusterRoles().Get(ctx, deployment+"-ext-remediation", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(agg.Rules).To(HaveLen(2), "the aggregated rules after the server-side upgrade")
		out, err = helm4(ctx, "history", release, "--namespace", namespace)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^2\s.*deployed`))

		out, err = helm4(ctx, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
		Expect(err).NotTo(HaveOccurred(), out)
		expectUninstalled(ctx)
	})
}

// expectUninstalled checks, after an uninstall returned, that it left no pods, webhook
// configurations or Leases (the chart's post-delete hook, leases.deleteOnUninstall, deleted the
// leader election Lease and the node Leases in leases.namespace), and kept the CRD (crds.keep).
func expectUninstalled(ctx context.Context) {
	GinkgoHelper()
	expectNoPodsNorWebhooks(ctx)
	expectNoLeases(ctx)
	_, err := cs.Discovery().ServerResourcesForGroupVersion(remediationv1alpha1.GroupVersion.String())
	Expect(err).NotTo(HaveOccurred(), "crds.keep: the NodeHealthCheck CRD stays")
}

// expectNoPodsNorWebhooks checks, after an uninstall returned, that no pod is left in the release's
// namespace and no webhook configuration in the cluster.
func expectNoPodsNorWebhooks(ctx context.Context) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
	vwcs, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(vwcs.Items).To(BeEmpty())
	mwcs, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(mwcs.Items).To(BeEmpty())
}

// expectNoLeases checks, after an uninstall returned, that no Lease is left in the release's
// namespace (the leader election Lease) or in leases.namespace (node Leases): the chart's post-delete
// hook ran before helm uninstall returned.
func expectNoLeases(ctx context.Context) {
	GinkgoHelper()
	for _, ns := range []string{namespace, "medik8s-leases"} {
		leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		var left []string
		for _, l := range leases.Items {
			left = append(left, fmt.Sprintf("%s/%s (holder %q, renewed %v)", ns, l.Name, ptr.Deref(l.Spec.HolderIdentity, ""), l.Spec.RenewTime))
		}
		Expect(left).To(BeEmpty(), "Leases left after the uninstall")
	}
}

// leaderAndOther returns the leading operator pod and the other one (both Ready).
func leaderAndOther(ctx context.Context) (corev1.Pod, corev1.Pod) {
	GinkgoHelper()
	var leader, other corev1.Pod
	Eventually(func(g Gomega) {
		pods := readyOperatorPods(ctx)
		g.Expect(pods).To(HaveLen(2))
		holder := leaseHolder(ctx)
		for _, p := range pods {
			if strings.HasPrefix(holder, p.Name+"_") {
				leader = p
			} else {
				other = p
			}
		}
		g.Expect(leader.Name).NotTo(BeEmpty(), "holder %q is one of the pods", holder)
		g.Expect(other.Name).NotTo(BeEmpty())
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	return leader, other
}

// leaseHolder returns the leader election Lease's holder ("" when there is none).
func leaseHolder(ctx context.Context) string {
	l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, leaderLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func readyOperatorPodsErr(ctx context.Context) ([]corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
	if err != nil {
		return nil, err
	}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(p) {
			ready = append(ready, p)
		}
	}
	return ready, nil
}

// readyOperatorPods returns the operator's pods that are Ready and not terminating.
func readyOperatorPods(ctx context.Context) []corev1.Pod {
	GinkgoHelper()
	pods, err := readyOperatorPodsErr(ctx)
	Expect(err).NotTo(HaveOccurred())
	return pods
}

// touch annotates the NodeHealthCheck, so that the controllers decide it again.
func touch(ctx context.Context, name string) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"realnode-touch":%q}}}`, time.Now().Format(time.RFC3339Nano))
	Expect(k8s.Patch(ctx, &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// decisions scrapes the remediation controller's decisions of the NodeHealthCheck from a pod.
func decisions(ctx context.Context, scrape func(context.Context, string) (int, string), podIP, nhc string) float64 {
	code, body := scrape(ctx, podIP)
	if code != http.StatusOK {
		return 0
	}
	m := regexp.MustCompile(`(?m)^` + remediation.MetricDecisions + `\{nhc="` + regexp.QuoteMeta(nhc) + `"\} (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	Expect(err).NotTo(HaveOccurred())
	return v
}

func evict(ctx context.Context, pod string) error {
	return cs.PolicyV1().Evictions(namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: namespace}})
}

// serviceAccountToken creates a ServiceAccount in the default namespace, bound to a role that may
// read /metrics if mayRead, and returns a token of it.
func serviceAccountToken(ctx context.Context, name string, mayRead bool) string {
	GinkgoHelper()
	_, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	if mayRead {
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// metricsClient skips verification: the metrics certificate is the manager's self-signed one.
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed metrics certificate
}}

// get fetches url with the bearer token (none if empty) and returns the status and body; 0 when
// the request failed.
func get(ctx context.Context, url, token string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// buildVersion builds the image again as another version (the manager stamped with it, this
// machine's platform) with `make image`'s tools, and returns its OCI archive.
func buildVersion(ctx context.Context, version string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", bin, "./cmd/manager")
	build.Dir = testutil.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goruntime.GOARCH)
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	archive := filepath.Join(dir, "image.oci.tar")
	ib := exec.CommandContext(ctx, "go", "run", "./cmd/imagebuild", "build", "--out", filepath.Join(dir, "layout"), "--tarball", archive,
		"--version", version, "--revision", strings.Repeat("0", 40), "--created", "0", "--binary", "linux/"+goruntime.GOARCH+"="+bin)
	ib.Dir = testutil.RepoRoot()
	out, err = ib.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	return archive
}

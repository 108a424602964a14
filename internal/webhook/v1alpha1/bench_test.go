package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/openshift"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	webhookv1alpha1 "github.com/medik8s/node-healthcheck/internal/webhook/v1alpha1"
)

// The admission benchmark (issue 15): the validating webhook's handler, wired as cmd/manager wires
// it (webhookv1alpha1.NewValidator on a manager configured with controller.ConfigureManager), on a
// real API server holding the NodeHealthCheck CRD, remediation templates, NodeHealthChecks and Nodes,
// all in the manager's cache. Admission requests are handed to the handler in process; every request
// the manager's clients send to the API server is counted, and after the cache has synced and each
// request has been handled once (which starts the template informers) the handler must send none.
// `make bench` runs BenchmarkValidatingWebhook; TestAdmissionMakesNoUncachedCalls is its smoke run in
// `make test`.

// admissionScale is how many objects an admission fixture holds.
type admissionScale struct {
	nodes, nhcs int
	// openShift installs OpenShift's Infrastructure kind and Infrastructure/cluster (HighlyAvailable);
	// without it the cluster is plain Kubernetes and does not serve the kind.
	openShift bool
}

// apiCounter counts the requests a rest.Config's clients send, but for watches (informers keep
// theirs open; they are not calls on the admission path).
type apiCounter struct{ testutil.RequestCounter }

// reset returns the calls since the last reset as "<method> <path>", and forgets them.
func (c *apiCounter) reset() []string {
	var calls []string
	for _, r := range c.Take(func(r testutil.Request) bool { return !r.Watch }) {
		calls = append(calls, r.Method+" "+r.Path)
	}
	return calls
}

// admissionFixture is a started control plane and manager with the validating webhook's handler.
type admissionFixture struct {
	handler admission.Handler
	counter *apiCounter
	// seed writes to the API server around the manager (not counted).
	seed client.Client
	// infra is Infrastructure/cluster on "OpenShift", nil on plain Kubernetes.
	infra *unstructured.Unstructured
	// requests by kind of request: create, update (while remediating), delete.
	requests map[string][]benchRequest
}

// benchRequest is an admission request and whether the webhook must allow it.
type benchRequest struct {
	req     admission.Request
	allowed bool
}

const benchNamespace = testutil.TemplateNamespace

// startAdmissionFixture starts a control plane with the objects of scale and a manager whose cache
// holds them, and returns the production validating handler on that manager. tb fails on any error;
// everything stops when tb ends.
func startAdmissionFixture(tb testing.TB, scale admissionScale) *admissionFixture {
	tb.Helper()
	if err := testutil.CheckAssets(); err != nil {
		tb.Fatal(err)
	}
	s := runtime.NewScheme()
	must(tb, clientgoscheme.AddToScheme(s))
	must(tb, remediationv1alpha1.AddToScheme(s))

	env := testutil.NewEnvironment(nil, false)
	if scale.openShift {
		env.CRDInstallOptions.Paths = append(env.CRDInstallOptions.Paths, testutil.Path("test", "crds", "openshift", "infrastructures.yaml"))
	}
	cfg, err := env.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)

	// Seeding uses its own, faster client: 5,000 creates at the default 5 QPS would take 17 minutes.
	seedCfg := rest.CopyConfig(cfg)
	seedCfg.QPS, seedCfg.Burst = 1000, 2000
	seed, err := client.New(seedCfg, client.Options{Scheme: s})
	must(tb, err)
	templates := seedTemplates(ctx, tb, seed)
	var infra *unstructured.Unstructured
	if scale.openShift {
		infra = &unstructured.Unstructured{}
		infra.SetGroupVersionKind(openshift.Infrastructure)
		infra.SetName(openshift.InfrastructureName)
		must(tb, seed.Create(ctx, infra))
		must(tb, unstructured.SetNestedField(infra.Object, "HighlyAvailable", "status", "controlPlaneTopology"))
		must(tb, seed.Status().Update(ctx, infra))
	}
	seedNodes(ctx, tb, seed, scale.nodes)
	nhcs := make([]*remediationv1alpha1.NodeHealthCheck, scale.nhcs)
	for i := range nhcs {
		nhcs[i] = benchNHC(i, templates)
		must(tb, seed.Create(ctx, nhcs[i]))
	}

	// The manager as cmd/manager builds it, on a config whose requests are counted.
	counter := &apiCounter{}
	mgrCfg := rest.CopyConfig(cfg)
	mgrCfg.WrapTransport = counter.Wrap
	opts := ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	controller.ConfigureManager(&opts)
	mgr, err := ctrl.NewManager(mgrCfg, opts)
	must(tb, err)
	handler := webhookv1alpha1.ValidatingWebhook(mgr.GetScheme(), webhookv1alpha1.NewValidator(mgr))
	// The informers the controllers start: the webhook shares the cache with them.
	for _, obj := range []client.Object{&corev1.Node{}, &remediationv1alpha1.NodeHealthCheck{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			tb.Fatal(err)
		}
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-mgrDone; err != nil {
			tb.Error(err)
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		tb.Fatal("the manager's cache did not sync")
	}
	nodes := &corev1.NodeList{}
	must(tb, mgr.GetCache().List(ctx, nodes))
	if len(nodes.Items) != scale.nodes {
		tb.Fatalf("the cache holds %d nodes, want %d", len(nodes.Items), scale.nodes)
	}

	f := &admissionFixture{handler: handler, counter: counter, seed: seed, infra: infra, requests: benchRequests(tb, nhcs, templates)}
	// Warm up: the first request of each kind starts the template kind's metadata informer and asks
	// once whether the operator may list and watch the kind; neither happens again.
	for _, reqs := range f.requests {
		for _, r := range reqs {
			f.handle(ctx, tb, r)
		}
	}
	counter.reset()
	return f
}

// handle hands r to the webhook and fails tb when the answer is not the expected one.
func (f *admissionFixture) handle(ctx context.Context, tb testing.TB, r benchRequest) {
	resp := f.handler.Handle(ctx, r.req)
	if resp.Allowed != r.allowed {
		tb.Fatalf("%s %s: allowed %v, want %v: %v", r.req.Operation, r.req.Name, resp.Allowed, r.allowed, resp.Result)
	}
}

// benchTemplates are the templates the NodeHealthChecks reference.
type benchTemplates struct {
	// multi are TestRemediationTemplates annotated for several steps of one kind.
	multi []string
	// single is a SelfNodeRemediationTemplate, cluster is a ClusterTestRemediationTemplate.
	single, cluster string
}

func seedTemplates(ctx context.Context, tb testing.TB, c client.Client) benchTemplates {
	t := benchTemplates{multi: []string{"multi-a", "multi-b", "multi-c"}, single: "snr", cluster: "cluster-wide"}
	create := func(apiVersion, kind, namespace, name string, annotations map[string]string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(namespace)
		u.SetName(name)
		u.SetAnnotations(annotations)
		must(tb, unstructured.SetNestedMap(u.Object, map[string]any{"spec": map[string]any{}}, "spec", "template"))
		must(tb, c.Create(ctx, u))
	}
	for _, name := range t.multi {
		create("test.medik8s.io/v1alpha1", "TestRemediationTemplate", benchNamespace, name,
			map[string]string{remediationv1alpha1.MultipleTemplatesSupportAnnotation: "true"})
	}
	create("self-node-remediation.medik8s.io/v1alpha1", "SelfNodeRemediationTemplate", benchNamespace, t.single, nil)
	create("test.medik8s.io/v1alpha1", "ClusterTestRemediationTemplate", "", t.cluster, nil)
	return t
}

// seedNodes creates n worker Nodes, ready, in groups of 100 (the selector's label), eight at a time.
func seedNodes(ctx context.Context, tb testing.TB, c client.Client, n int) {
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil {
					return
				}
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
					Name:   fmt.Sprintf("worker-%05d", i),
					Labels: map[string]string{"bench.medik8s.io/group": fmt.Sprintf("g%02d", i/100)},
				}}
				if err := c.Create(ctx, node); err != nil {
					failed.Store(&err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		tb.Fatalf("creating nodes: %v", *err)
	}
}

// benchNHC returns NodeHealthCheck i: every third has one cluster-scoped template, the others escalate
// through the three annotated TestRemediationTemplates (one kind in three steps: the annotation is
// looked up for each) and a SelfNodeRemediationTemplate.
func benchNHC(i int, t benchTemplates) *remediationv1alpha1.NodeHealthCheck {
	nhc := testutil.NewNHC(fmt.Sprintf("nhc-%02d", i))
	nhc.Spec.Selector.MatchLabels = map[string]string{"bench.medik8s.io/group": fmt.Sprintf("g%02d", i%50)}
	if i%3 == 0 {
		nhc.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: "test.medik8s.io/v1alpha1", Kind: "ClusterTestRemediationTemplate", Name: t.cluster}
		return nhc
	}
	nhc.Spec.RemediationTemplate = nil
	for j, name := range t.multi {
		nhc.Spec.EscalatingRemediations = append(nhc.Spec.EscalatingRemediations, testutil.Step(name, j, 5*time.Minute))
	}
	nhc.Spec.EscalatingRemediations = append(nhc.Spec.EscalatingRemediations, remediationv1alpha1.EscalatingRemediation{
		RemediationTemplate: corev1.ObjectReference{APIVersion: "self-node-remediation.medik8s.io/v1alpha1", Kind: "SelfNodeRemediationTemplate", Namespace: benchNamespace, Name: t.single},
		Order:               len(t.multi),
		Timeout:             metav1.Duration{Duration: 10 * time.Minute},
	})
	return nhc
}

// remediating returns a copy of nhc whose status lists two nodes with running remediations.
func remediating(nhc *remediationv1alpha1.NodeHealthCheck) *remediationv1alpha1.NodeHealthCheck {
	out := nhc.DeepCopy()
	started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, node := range []string{"worker-00001", "worker-00002"} {
		out.Status.UnhealthyNodes = append(out.Status.UnhealthyNodes, remediationv1alpha1.UnhealthyNode{
			Name: node,
			Remediations: []remediationv1alpha1.Remediation{{
				Resource: corev1.ObjectReference{APIVersion: "test.medik8s.io/v1alpha1", Kind: "TestRemediation", Namespace: benchNamespace, Name: node},
				Started:  started,
			}},
		})
	}
	return out
}

// benchRequests returns, for each NodeHealthCheck, a create (of a copy under a new name), two updates
// while it remediates (a pause request, allowed; a selector change, refused) and two deletes
// (refused while remediating, allowed once not).
func benchRequests(tb testing.TB, nhcs []*remediationv1alpha1.NodeHealthCheck, t benchTemplates) map[string][]benchRequest {
	tb.Helper()
	raw := func(nhc *remediationv1alpha1.NodeHealthCheck) runtime.RawExtension {
		if nhc == nil {
			return runtime.RawExtension{}
		}
		nhc = nhc.DeepCopy()
		nhc.APIVersion, nhc.Kind = remediationv1alpha1.GroupVersion.String(), "NodeHealthCheck"
		data, err := json.Marshal(nhc)
		must(tb, err)
		return runtime.RawExtension{Raw: data}
	}
	request := func(op admissionv1.Operation, name string, newObj, oldObj *remediationv1alpha1.NodeHealthCheck) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID:       "bench",
			Kind:      metav1.GroupVersionKind{Group: remediationv1alpha1.GroupVersion.Group, Version: remediationv1alpha1.GroupVersion.Version, Kind: "NodeHealthCheck"},
			Resource:  metav1.GroupVersionResource{Group: remediationv1alpha1.GroupVersion.Group, Version: remediationv1alpha1.GroupVersion.Version, Resource: "nodehealthchecks"},
			Name:      name,
			Operation: op,
			Object:    raw(newObj),
			OldObject: raw(oldObj),
		}}
	}
	out := map[string][]benchRequest{}
	for i, nhc := range nhcs {
		fresh := benchNHC(i, t)
		fresh.Name += "-new"
		out["create"] = append(out["create"], benchRequest{request(admissionv1.Create, fresh.Name, fresh, nil), true})

		old := remediating(nhc)
		paused := old.DeepCopy()
		paused.Spec.PauseRequests = []string{"maintenance"}
		moved := old.DeepCopy()
		moved.Spec.Selector.MatchLabels = map[string]string{"bench.medik8s.io/group": "elsewhere"}
		out["update"] = append(out["update"],
			benchRequest{request(admissionv1.Update, nhc.Name, paused, old), true},
			benchRequest{request(admissionv1.Update, nhc.Name, moved, old), false})

		out["delete"] = append(out["delete"],
			benchRequest{request(admissionv1.Delete, nhc.Name, nil, old), false},
			benchRequest{request(admissionv1.Delete, nhc.Name, nil, nhc), true})
	}
	return out
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkValidatingWebhook measures the validating webhook's handler with 50 NodeHealthChecks and
// 5,000 Nodes in the cache, per kind of request, on plain Kubernetes and on OpenShift (which serves
// the Infrastructure kind the topology rule reads). Besides ns/op and allocations it reports the
// median and 99th percentile latency (p50-ns, p99-ns) and the API requests the handler sent per
// request (api-calls/op).
func BenchmarkValidatingWebhook(b *testing.B) {
	logf.SetLogger(logr.Discard()) // the manager's logs are not what is measured
	for _, cluster := range []struct {
		name      string
		openShift bool
	}{{"kubernetes", false}, {"openshift", true}} {
		b.Run(cluster.name, func(b *testing.B) {
			f := startAdmissionFixture(b, admissionScale{nodes: 5000, nhcs: 50, openShift: cluster.openShift})
			ctx := context.Background()
			for _, kind := range []string{"create", "update", "delete"} {
				b.Run(kind, func(b *testing.B) {
					reqs := f.requests[kind]
					f.counter.reset()
					var latencies []time.Duration
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						r := reqs[i%len(reqs)]
						i++
						start := time.Now()
						f.handle(ctx, b, r)
						latencies = append(latencies, time.Since(start))
					}
					calls := f.counter.reset()
					slices.Sort(latencies)
					b.ReportMetric(float64(percentile(latencies, 50).Nanoseconds()), "p50-ns")
					b.ReportMetric(float64(percentile(latencies, 99).Nanoseconds()), "p99-ns")
					b.ReportMetric(float64(len(calls))/float64(len(latencies)), "api-calls/op")
					if len(calls) > 0 {
						b.Logf("%d API requests for %d admission requests, first: %s", len(calls), len(latencies), calls[0])
					}
				})
			}
		})
	}
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

// TestAdmissionMakesNoUncachedCalls is the admission benchmark's smoke run: the same fixture with few
// objects. Every kind of request, handled again after the warm-up, sends nothing to the API server,
// on OpenShift too: the topology rule reads Infrastructure/cluster from the cache.
func TestAdmissionMakesNoUncachedCalls(t *testing.T) {
	for _, cluster := range []struct {
		name      string
		openShift bool
	}{{"kubernetes", false}, {"openshift", true}} {
		t.Run(cluster.name, func(t *testing.T) {
			f := startAdmissionFixture(t, admissionScale{nodes: 20, nhcs: 3, openShift: cluster.openShift})
			ctx := context.Background()
			for _, kind := range []string{"create", "update", "delete"} {
				handled := 0
				for range 3 {
					for _, r := range f.requests[kind] {
						f.handle(ctx, t, r)
						handled++
					}
				}
				if calls := f.counter.reset(); len(calls) > 0 {
					t.Errorf("%s: the webhook sent %d requests to the API server for %d admission requests, want none (all through the cache):\n%s",
						kind, len(calls), handled, strings.Join(calls, "\n"))
				}
			}
			if !cluster.openShift {
				return
			}
			// The topology rule did read Infrastructure/cluster, from the cache: once the cluster
			// reports DualReplica every create is refused, still without a request.
			must(t, unstructured.SetNestedField(f.infra.Object, webhookv1alpha1.ControlPlaneTopologyDualReplica, "status", "controlPlaneTopology"))
			must(t, f.seed.Status().Update(ctx, f.infra))
			create := f.requests["create"][0]
			deadline := time.Now().Add(30 * time.Second)
			for f.handler.Handle(ctx, create.req).Allowed {
				if time.Now().After(deadline) {
					t.Fatal("creates are still admitted 30s after Infrastructure/cluster reported DualReplica")
				}
				time.Sleep(50 * time.Millisecond)
			}
			f.counter.reset()
			for _, r := range f.requests["create"] {
				f.handle(ctx, t, benchRequest{req: r.req, allowed: false})
			}
			if calls := f.counter.reset(); len(calls) > 0 {
				t.Errorf("DualReplica: the webhook sent %d requests to the API server, want none:\n%s", len(calls), strings.Join(calls, "\n"))
			}
		})
	}
}

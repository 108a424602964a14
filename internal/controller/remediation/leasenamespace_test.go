package remediation_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/controller/remediation"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// In a mass failure on a cluster without the lease namespace, every start that runs at once finds
// it missing: the scale benchmark's outage created it 10 times (9 AlreadyExists).
var _ = Describe("The lease namespace", func() {
	It("is created once when many starts find it missing at once, and never once it exists", func(ctx SpecContext) {
		const starts = 8
		ns := e.Unique("leases")
		isNamespaceCreate := func(r testutil.Request) bool { return r.Method == http.MethodPost && r.Path == "/api/v1/namespaces" }
		isLeaseCreate := func(r testutil.Request) bool {
			return r.Method == http.MethodPost && r.Path == "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases"
		}
		// Every start's lease create is refused before any namespace create reaches the API server:
		// the namespace creates wait until all starts found it missing (or 10s, and the count fails).
		var missing atomic.Int32
		allMissing := make(chan struct{})
		counter := &testutil.RequestCounter{}
		cfg := rest.CopyConfig(e.Env.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return counter.Wrap(roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				r := testutil.Request{Method: req.Method, Path: req.URL.Path}
				if isNamespaceCreate(r) {
					select {
					case <-allMissing:
					case <-time.After(10 * time.Second):
					}
				}
				resp, err := rt.RoundTrip(req)
				if err == nil && isLeaseCreate(r) && resp.StatusCode == http.StatusNotFound && missing.Add(1) == starts {
					close(allMissing)
				}
				return resp, err
			}))
		})
		c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
		Expect(err).NotTo(HaveOccurred())
		r := &remediation.Reconciler{Client: c, LeaseNamespace: ns}
		lease := func(i int) *coordinationv1.Lease {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nodelease.Name(fmt.Sprintf("node-%d", i))}}
		}

		mark := counter.Mark()
		var wg sync.WaitGroup
		errs := make([]error, starts)
		for i := range starts {
			wg.Go(func() { errs[i] = r.CreateInLeaseNamespace(ctx, lease(i)) })
		}
		wg.Wait()
		for _, err := range errs {
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(missing.Load()).To(BeEquivalentTo(starts), "every start found the namespace missing")
		Expect(counter.Since(mark, isNamespaceCreate)).To(HaveLen(1), "the namespace is created once")
		Expect(counter.Since(mark, isLeaseCreate)).To(HaveLen(2*starts), "each start created its lease again, once")
		leases := &coordinationv1.LeaseList{}
		Expect(e.K8s.List(ctx, leases, client.InNamespace(ns))).To(Succeed())
		Expect(leases.Items).To(HaveLen(starts))

		By("once it exists, a start writes its lease and nothing else")
		mark = counter.Mark()
		Expect(r.CreateInLeaseNamespace(ctx, lease(starts))).To(Succeed())
		Expect(counter.Since(mark, func(testutil.Request) bool { return true })).To(ConsistOf(
			testutil.Request{Method: http.MethodPost, Path: "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases"}))
	})
})

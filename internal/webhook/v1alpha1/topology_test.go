package v1alpha1_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/openshift"
	"github.com/medik8s/node-healthcheck/internal/testutil"
	webhookv1alpha1 "github.com/medik8s/node-healthcheck/internal/webhook/v1alpha1"
)

// setTopology creates OpenShift's Infrastructure/cluster on the webhook's control plane with the
// given status.controlPlaneTopology ("" leaves the status empty) and deletes it when the spec ends;
// each returns once the webhook sees the change.
func setTopology(ctx context.Context, topology string) *unstructured.Unstructured {
	infra := &unstructured.Unstructured{}
	infra.SetGroupVersionKind(openshift.Infrastructure)
	infra.SetName("cluster")
	Expect(webhookClient.Create(ctx, infra)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(webhookClient.Delete(ctx, infra))).To(Succeed())
		Eventually(func() error {
			return webhookClient.Get(ctx, client.ObjectKeyFromObject(infra), infra.DeepCopy())
		}).WithContext(ctx).Should(Satisfy(apierrors.IsNotFound))
		awaitWebhookTopology(ctx, "")
	})
	if topology != "" {
		changeTopology(ctx, infra, topology)
	}
	return infra
}

// changeTopology writes status.controlPlaneTopology through the status subresource and returns once
// the webhook sees it.
func changeTopology(ctx context.Context, infra *unstructured.Unstructured, topology string) {
	Expect(unstructured.SetNestedField(infra.Object, topology, "status", "controlPlaneTopology")).To(Succeed())
	Expect(webhookClient.Status().Update(ctx, infra)).To(Succeed())
	awaitWebhookTopology(ctx, topology)
}

// awaitWebhookTopology waits until the webhook, which reads Infrastructure/cluster from its cache,
// judges by topology: a dry-run create is refused on DualReplica and admitted on any other.
func awaitWebhookTopology(ctx context.Context, topology string) {
	GinkgoHelper()
	probe := testutil.NewNHC(uniqueName("probe"))
	create := func() error { return webhookClient.Create(ctx, probe.DeepCopy(), client.DryRunAll) }
	if topology == webhookv1alpha1.ControlPlaneTopologyDualReplica {
		Eventually(create).WithContext(ctx).Should(MatchError(ContainSubstring("status.controlPlaneTopology DualReplica")))
	} else {
		Eventually(create).WithContext(ctx).Should(Succeed())
	}
}

var _ = Describe("Control-plane topology (webhook)", func() {
	It("admits a NodeHealthCheck when there is no Infrastructure/cluster", func(ctx SpecContext) {
		infra := &unstructured.Unstructured{}
		infra.SetGroupVersionKind(openshift.Infrastructure)
		Expect(webhookClient.Get(ctx, client.ObjectKey{Name: "cluster"}, infra)).To(Satisfy(apierrors.IsNotFound))

		nhc := testutil.NewNHC(uniqueName("nhc"))
		Expect(webhookClient.Create(ctx, nhc)).To(Succeed())
		nhc.Spec.PauseRequests = []string{"maintenance"}
		Expect(webhookClient.Update(ctx, nhc)).To(Succeed())
		Expect(webhookClient.Delete(ctx, nhc)).To(Succeed())
	})

	DescribeTable("admits a NodeHealthCheck on a supported topology",
		func(ctx SpecContext, topology string) {
			setTopology(ctx, topology)
			nhc := testutil.NewNHC(uniqueName("nhc"))
			Expect(webhookClient.Create(ctx, nhc)).To(Succeed())
			nhc.Spec.PauseRequests = []string{"maintenance"}
			Expect(webhookClient.Update(ctx, nhc)).To(Succeed())
			Expect(webhookClient.Delete(ctx, nhc)).To(Succeed())
		},
		Entry("HighlyAvailable", "HighlyAvailable"),
		Entry("External (hosted control plane)", "External"),
		Entry("SingleReplica", "SingleReplica"),
		Entry("no status yet", ""),
	)

	Context("on DualReplica", func() {
		var infra *unstructured.Unstructured
		var existing *remediationv1alpha1.NodeHealthCheck

		BeforeEach(func(ctx SpecContext) {
			// A NodeHealthCheck admitted while the cluster reported a supported topology.
			infra = setTopology(ctx, "HighlyAvailable")
			existing = testutil.NewNHC(uniqueName("nhc"))
			Expect(webhookClient.Create(ctx, existing)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				Expect(client.IgnoreNotFound(webhookClient.Delete(ctx, existing))).To(Succeed())
			})
			changeTopology(ctx, infra, webhookv1alpha1.ControlPlaneTopologyDualReplica)
		})

		expectRefused := func(err error) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			Expect(err.Error()).To(And(
				ContainSubstring("DualReplica"),
				ContainSubstring("NodeHealthCheck is not supported on this cluster"),
				ContainSubstring("Infrastructure/cluster reports status.controlPlaneTopology DualReplica")))
		}

		It("refuses to create a NodeHealthCheck", func(ctx SpecContext) {
			nhc := testutil.NewNHC(uniqueName("nhc"))
			expectRefused(webhookClient.Create(ctx, nhc))
		})

		It("refuses to create a NodeHealthCheck even with an invalid spec, naming only the topology", func(ctx SpecContext) {
			nhc := testutil.NewNHC(uniqueName("nhc"))
			nhc.Spec.MinHealthy = intOrStr("200%")
			err := webhookClient.Create(ctx, nhc)
			expectRefused(err)
			Expect(causeFields(err)).To(BeEmpty())
		})

		It("refuses to update a NodeHealthCheck created before the topology changed", func(ctx SpecContext) {
			existing.Spec.PauseRequests = []string{"maintenance"}
			expectRefused(webhookClient.Update(ctx, existing))
		})

		It("allows deleting a NodeHealthCheck", func(ctx SpecContext) {
			Expect(webhookClient.Delete(ctx, existing)).To(Succeed())
			Expect(webhookClient.Get(ctx, client.ObjectKeyFromObject(existing), existing)).To(Satisfy(apierrors.IsNotFound))
		})

		It("lets the deletion of a NodeHealthCheck with a finalizer complete", func(ctx SpecContext) {
			changeTopology(ctx, infra, "HighlyAvailable")
			existing.Finalizers = []string{"example.com/keep"}
			Expect(webhookClient.Update(ctx, existing)).To(Succeed())
			changeTopology(ctx, infra, webhookv1alpha1.ControlPlaneTopologyDualReplica)

			Expect(webhookClient.Delete(ctx, existing)).To(Succeed())
			Expect(webhookClient.Get(ctx, client.ObjectKeyFromObject(existing), existing)).To(Succeed())
			Expect(existing.DeletionTimestamp).NotTo(BeNil())
			existing.Finalizers = nil
			Expect(webhookClient.Update(ctx, existing)).To(Succeed(), "removing the finalizer of a NodeHealthCheck being deleted")
			Expect(webhookClient.Get(ctx, client.ObjectKeyFromObject(existing), existing)).To(Satisfy(apierrors.IsNotFound))
		})

		It("admits NodeHealthChecks again once the cluster reports another topology", func(ctx SpecContext) {
			changeTopology(ctx, infra, "HighlyAvailable")
			nhc := testutil.NewNHC(uniqueName("nhc"))
			Expect(webhookClient.Create(ctx, nhc)).To(Succeed())
			Expect(webhookClient.Delete(ctx, nhc)).To(Succeed())
		})
	})
})

// stubReader answers every read with err, or else with an Infrastructure whose status is status.
type stubReader struct {
	status map[string]any
	err    error
}

func (r stubReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if r.err != nil {
		return r.err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return errors.New("stubReader reads only unstructured objects")
	}
	if r.status != nil {
		u.Object["status"] = r.status
	}
	return nil
}

func (r stubReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("stubReader does not list")
}

// TestTopologyRule checks the topology rule for reads a real API server cannot easily produce: a
// cluster that does not serve the Infrastructure kind, and failing reads.
func TestTopologyRule(t *testing.T) {
	infraGR := schema.GroupResource{Group: "config.openshift.io", Resource: "infrastructures"}
	for _, tc := range []struct {
		name   string
		reader stubReader
		// refused is the substrings of the refusal of create and update; nil means both are admitted.
		refused []string
		// check classifies the refusal.
		check func(error) bool
	}{
		{name: "not OpenShift: the Infrastructure kind is not served", reader: stubReader{err: &meta.NoKindMatchError{
			GroupKind: openshift.Infrastructure.GroupKind(), SearchedVersions: []string{openshift.Infrastructure.Version}}}},
		{name: "no Infrastructure/cluster", reader: stubReader{err: apierrors.NewNotFound(infraGR, "cluster")}},
		{name: "no status", reader: stubReader{}},
		{name: "HighlyAvailable", reader: stubReader{status: map[string]any{"controlPlaneTopology": "HighlyAvailable"}}},
		{name: "DualReplica", reader: stubReader{status: map[string]any{"controlPlaneTopology": webhookv1alpha1.ControlPlaneTopologyDualReplica}},
			refused: []string{"NodeHealthCheck is not supported on this cluster: Infrastructure/cluster reports status.controlPlaneTopology DualReplica " +
				"(two-node OpenShift with fencing), whose nodes are fenced by the cluster itself"},
			check: apierrors.IsForbidden},
		{name: "read forbidden by RBAC", reader: stubReader{err: apierrors.NewForbidden(infraGR, "cluster", errors.New("no rule"))},
			refused: []string{"topology could not be read", "retry", "Infrastructure/cluster", "no rule"}, check: apierrors.IsInternalError},
		{name: "API server unavailable", reader: stubReader{err: errors.New("connection refused")},
			refused: []string{"topology could not be read", "retry", "connection refused"}, check: apierrors.IsInternalError},
		{name: "malformed status", reader: stubReader{status: map[string]any{"controlPlaneTopology": 2}},
			refused: []string{"topology could not be read", "retry", "status.controlPlaneTopology"}, check: apierrors.IsInternalError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &webhookv1alpha1.Validator{Topology: &webhookv1alpha1.InfrastructureTopologyReader{Reader: tc.reader}}
			oldNHC := testutil.NewNHC("nhc")
			newNHC := oldNHC.DeepCopy()
			newNHC.Spec.PauseRequests = []string{"maintenance"}

			_, createErr := v.ValidateCreate(context.Background(), oldNHC)
			_, updateErr := v.ValidateUpdate(context.Background(), oldNHC, newNHC)
			for op, err := range map[string]error{"create": createErr, "update": updateErr} {
				switch {
				case tc.refused == nil && err != nil:
					t.Errorf("%s: want admitted, got %v", op, err)
				case tc.refused != nil && err == nil:
					t.Errorf("%s: want refused, got admitted", op)
				case tc.refused != nil:
					if !tc.check(err) {
						t.Errorf("%s: wrong kind of refusal: %#v", op, err)
					}
					for _, s := range tc.refused {
						if !strings.Contains(err.Error(), s) {
							t.Errorf("%s: refusal %q does not say %q", op, err, s)
						}
					}
				}
			}

			if _, err := v.ValidateDelete(context.Background(), oldNHC); err != nil {
				t.Errorf("delete: want allowed whatever the topology, got %v", err)
			}
			// Removing the last finalizer of an object being deleted.
			withFinalizer := oldNHC.DeepCopy()
			now := metav1.Now()
			withFinalizer.DeletionTimestamp, withFinalizer.Finalizers = &now, []string{"example.com/keep"}
			deleting := withFinalizer.DeepCopy()
			deleting.Finalizers = nil
			if _, err := v.ValidateUpdate(context.Background(), withFinalizer, deleting); err != nil {
				t.Errorf("update of an object being deleted: want allowed whatever the topology, got %v", err)
			}
		})
	}
}

// countingReader counts reads and answers them with err.
type countingReader struct {
	stubReader
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.stubReader.Get(ctx, key, obj, opts...)
}

// TestTopologyReaderRemembersAKindNotServed checks that on a cluster that does not serve the
// Infrastructure kind the reader asks once a minute, not on every request: the manager's RESTMapper
// sends a discovery request for each such read. Every other answer is read again each time.
func TestTopologyReaderRemembersAKindNotServed(t *testing.T) {
	notServed := &meta.NoKindMatchError{GroupKind: openshift.Infrastructure.GroupKind(), SearchedVersions: []string{openshift.Infrastructure.Version}}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reader := &countingReader{stubReader: stubReader{err: notServed}}
	r := &webhookv1alpha1.InfrastructureTopologyReader{Reader: reader, Clock: clk}
	read := func(wantGets int) {
		t.Helper()
		topology, err := r.ControlPlaneTopology(context.Background())
		if topology != "" || err != nil {
			t.Fatalf("got %q, %v; want \"\", no error", topology, err)
		}
		if reader.gets != wantGets {
			t.Fatalf("%d reads, want %d", reader.gets, wantGets)
		}
	}
	read(1)
	read(1)
	clk.SetTime(clk.Now().Add(59 * time.Second))
	read(1)
	clk.SetTime(clk.Now().Add(time.Second))
	read(2) // a minute after the answer: asked again

	// Once the kind is served, every read goes to the reader.
	clk.SetTime(clk.Now().Add(time.Minute))
	reader.err = nil
	reader.status = map[string]any{"controlPlaneTopology": webhookv1alpha1.ControlPlaneTopologyDualReplica}
	for want := 3; want <= 4; want++ {
		if topology, err := r.ControlPlaneTopology(context.Background()); topology != webhookv1alpha1.ControlPlaneTopologyDualReplica || err != nil {
			t.Fatalf("got %q, %v; want %s", topology, err, webhookv1alpha1.ControlPlaneTopologyDualReplica)
		}
		if reader.gets != want {
			t.Fatalf("%d reads, want %d", reader.gets, want)
		}
	}
}

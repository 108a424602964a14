package decodeguard_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller"
	"github.com/medik8s/node-healthcheck/internal/controller/decodeguard"
	"github.com/medik8s/node-healthcheck/internal/controller/watch"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// The production manager (controller.ConfigureManager and controller.SetupWithManager) on an API
// server whose NodeHealthCheck CRD keeps only its structure, so it stores what the Go type cannot
// hold; one such NodeHealthCheck exists before the manager starts.
var (
	mgr ctrl.Manager
	e   = testutil.ControllerSuite(testutil.SuiteOptions{
		EnvOptions: testutil.EnvOptions{
			NHCCRD: structuralCRD(),
			BeforeStart: func(ctx context.Context, k8s client.Client) {
				Expect(k8s.Create(ctx, undecodable(testutil.NewNHC(brokenAtStart), int64(99999999999), "spec", "minHealthy"))).To(Succeed())
			},
		},
		Configure: controller.ConfigureManager,
		Setup: func(m ctrl.Manager, clock *clocktesting.FakeClock) error {
			mgr = m
			return controller.SetupWithManager(m, controller.Options{Clock: clock,
				ConditionChanges: watch.NewConditionChanges(clock, watch.TrustEveryConditionTime)}) // fixtures backdate conditions
		},
		EventuallyTimeout: 20 * time.Second,
	})
)

// brokenAtStart cannot be decoded (spec.minHealthy overflows int32) and is stored before the
// manager's caches first list.
const brokenAtStart = "broken-at-start"

func TestDecodeGuard(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "decodeguard suite")
}

// structuralCRD is the generated NodeHealthCheck CRD reduced to its structure.
func structuralCRD() *apiextensionsv1.CustomResourceDefinition {
	crd, err := testutil.LoadNHCCRD()
	if err != nil {
		panic(err)
	}
	return testutil.StructuralOnly(crd)
}

// undecodable returns the NodeHealthCheck as an unstructured object with the value at the path,
// which its Go type cannot hold.
func undecodable(nhc *remediationv1alpha1.NodeHealthCheck, value any, path ...string) *unstructured.Unstructured {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nhc)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(remediationv1alpha1.GroupVersion.String())
	u.SetKind("NodeHealthCheck")
	Expect(unstructured.SetNestedField(u.Object, value, path...)).To(Succeed())
	return u
}

// registry is the manager's record of undecodable NodeHealthChecks.
func registry() *decodeguard.Registry {
	r := decodeguard.RegistryOf(mgr.GetCache())
	Expect(r).NotTo(BeNil())
	return r
}

// undecodableGauge returns a function reading the metric's series for the NodeHealthCheck (-1: no
// series), for Eventually.
func undecodableGauge(name string) func() float64 {
	return func() float64 {
		m := testutil.Series(decodeguard.MetricUndecodable, map[string]string{"nhc": name})
		if m == nil {
			return -1
		}
		return m.GetGauge().GetValue()
	}
}

// cached returns a function telling whether the manager's cache holds the NodeHealthCheck.
func cached(ctx context.Context, name string) func() bool {
	return func() bool {
		err := mgr.GetCache().Get(ctx, client.ObjectKey{Name: name}, &remediationv1alpha1.NodeHealthCheck{})
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		return err == nil
	}
}

package explain_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/explain"
	"github.com/medik8s/node-healthcheck/internal/opsettings"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// What kubectl nhc explain decides beside the running operator, and what it answers a user who may
// not read everything, is specified in the operator suite
// (internal/controller/remediation/operator_explain_test.go): those specs need the controllers'
// CRs and leases. Reading the settings the operator publishes needs only an API server.

// TestFindSettings reads the lease namespace and returning-node grace the operator publishes from a
// control plane of its own, and says when it cannot: no ConfigMap, one not filled yet, two.
func TestFindSettings(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k8s, err := client.New(testutil.StartControlPlane(t), client.Options{Scheme: testutil.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = explain.FindSettings(ctx, k8s)
	g.Expect(err).To(MatchError(ContainSubstring("no operator publishes its settings")))

	settings := opsettings.Settings{LeaseNamespace: "leases-elsewhere", ReturningNodeGrace: 20 * time.Second, MaxClockSkew: 5 * time.Second, Version: "1.2.3"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings", Labels: map[string]string{opsettings.Label: "true"}}}
	g.Expect(k8s.Create(ctx, cm)).To(Succeed())
	_, err = explain.FindSettings(ctx, k8s)
	g.Expect(err).To(MatchError(ContainSubstring("has not published its settings")), "created by the chart, not filled yet")
	cm.Data = settings.Data()
	g.Expect(k8s.Update(ctx, cm)).To(Succeed())
	g.Expect(explain.FindSettings(ctx, k8s)).To(Equal(explain.Published{Settings: settings, ConfigMap: "default/" + cm.Name}))

	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other-settings", Labels: map[string]string{opsettings.Label: "true"}}, Data: settings.Data()}
	g.Expect(k8s.Create(ctx, other)).To(Succeed())
	_, err = explain.FindSettings(ctx, k8s)
	g.Expect(err).To(MatchError(ContainSubstring("more than one operator publishes its settings")))
}

package localcluster

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// The controllers a cluster runs for namespaces and service accounts: a new namespace gets its
// default ServiceAccount, and a deleted one goes away with its contents.
func TestNamespaceAndServiceAccountControllers(t *testing.T) {
	_, cs := startSimulated(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scratch"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("scratch").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the default ServiceAccount in a new namespace", func() bool {
		_, err := cs.CoreV1().ServiceAccounts("scratch").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	if err := cs.CoreV1().Namespaces().Delete(ctx, "scratch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted namespace to be gone", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "scratch", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// eventually waits up to a minute until cond holds, looking every 200ms.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waited a minute for %s: %v", what, err)
	}
}

// startSimulated starts a local cluster with node simulation, stopped when the test ends, and
// returns it with an admin clientset.
func startSimulated(t *testing.T) (*Cluster, kubernetes.Interface) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	c, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := c.StartNodeSimulation(os.Stderr); err != nil {
		t.Fatal(err)
	}
	return c, kubernetes.NewForConfigOrDie(c.Config)
}

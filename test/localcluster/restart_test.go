package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RestartAPIServer keeps the address, the certificates and the data: clients configured before the
// restart (admin and ServiceAccount tokens alike) work after it, with every object still there.
func TestRestartAPIServer(t *testing.T) {
	c, cs := startSimulated(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "restart"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saConfig, err := ServiceAccountKubeconfig(c.Config, t.TempDir(), "default", "restart")
	if err != nil {
		t.Fatal(err)
	}
	// A watch is open, as the operator's are.
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	unavailable, err := c.RestartAPIServer(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the API server was unavailable for %s", unavailable.Round(100*time.Millisecond))
	if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "restart", metav1.GetOptions{}); err != nil {
		t.Errorf("the admin client after the restart: %v", err)
	}
	if err := runKubectl(saConfig, "auth", "whoami"); err != nil {
		t.Errorf("a ServiceAccount token from before the restart: %v", err)
	}
}

func runKubectl(kubeconfig string, args ...string) error {
	cmd := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...) //nolint:gosec // test
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

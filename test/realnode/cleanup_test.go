package realnode_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/realnode"
)

// TestKilledStarterLeavesNothing starts a cluster with `make cluster`'s command, runs a pod on it and
// kills the command with SIGKILL: its watchdog must still remove everything (processes, the pod's
// container and mounts, the interfaces, the cgroups).
func TestKilledStarterLeavesNothing(t *testing.T) {
	if os.Getenv(enableEnv) == "" {
		t.Skipf("runs with %s=1 (make test-realnode)", enableEnv)
	}
	missing := absentHostDirs()
	bin := filepath.Join(t.TempDir(), "cluster")
	build := exec.Command("go", "build", "-o", bin, "./test/realnode/cluster")
	build.Dir = testutil.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the cluster command: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	up := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			t.Log(s.Text())
			if strings.Contains(s.Text(), "The cluster is up") {
				close(up)
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(3 * time.Minute):
		t.Fatal("the cluster did not start within 3 minutes")
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(realnode.DefaultDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: realnode.PauseImage, ImagePullPolicy: corev1.PullNever,
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "pause", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			t.Logf("Pod running at %s", p.Status.PodIP)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the pod is not running: %v %v", err, p.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	begin := time.Now()
	// The watchdog holds the cluster's lock until it is done.
	lock, err := os.Open(filepath.Join(realnode.DefaultDir, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	for syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Since(begin) > 2*time.Minute {
			t.Fatal("the watchdog did not finish within 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	log, _ := os.ReadFile(filepath.Join(realnode.DefaultDir, "logs", "cleanup.log"))
	t.Logf("The watchdog cleaned up in %s:\n%s", time.Since(begin).Round(time.Millisecond), log)
	if !strings.HasSuffix(strings.TrimSpace(string(log)), "Clean") {
		t.Error("the watchdog's cleanup failed")
	}
	if left := realnode.Leftovers(realnode.DefaultDir); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	for _, d := range missing {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("left behind: %s, which the cluster created", d)
		}
	}
}

// Command demo shows the operator at work on a local control plane: it starts etcd and
// kube-apiserver, runs the real manager binary with its webhooks, applies valid and invalid
// NodeHealthChecks with kubectl, and shuts everything down. Run it with `make demo`.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

func main() {
	manager := flag.String("manager", "bin/manager", "manager binary")
	kubectl := flag.String("kubectl", "kubectl", "kubectl binary")
	flag.Parse()
	if err := run(*manager, *kubectl); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n\033[1m==> %s\033[0m\n", fmt.Sprintf(format, args...))
}

func run(managerBinary, kubectlBinary string) error {
	start := time.Now()
	step("Starting a local control plane (etcd + kube-apiserver %s)", "from bin/k8s")
	cluster, err := localcluster.Start()
	if err != nil {
		return err
	}
	defer func() {
		step("Stopping the control plane")
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
		}
		fmt.Printf("Demo finished in %s.\n", time.Since(start).Round(time.Second))
	}()

	logPath := filepath.Join(testutil.RepoRoot(), "bin", "demo-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()

	step("Starting the operator (%s) out of cluster, with leader election and its admission webhooks", managerBinary)
	m, err := cluster.StartManager(localcluster.ManagerOptions{Binary: managerBinary, Output: logFile})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		return fmt.Errorf("%w (see %s)", err, logPath)
	}
	fmt.Printf("Ready (probes at %s, logs in %s).\n", m.ProbeAddr, logPath)
	defer func() {
		step("Stopping the operator with SIGTERM")
		if err := m.Stop(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		} else {
			fmt.Println("The operator released its leader lease and exited cleanly.")
		}
	}()

	// kq runs kubectl quietly; k also prints what it said.
	kq := func(args ...string) (string, error) {
		cmd := exec.Command(kubectlBinary, append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...) //nolint:gosec // demo
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	k := func(args ...string) (string, error) {
		out, err := kq(args...)
		fmt.Print(indent(out))
		return out, err
	}
	samples := testutil.Path("config", "samples")
	demoDir := testutil.Path("test", "demo")

	step("Installing the remediators' templates (SelfNodeRemediationTemplate, Metal3RemediationTemplate)")
	if _, err := k("apply", "-f", filepath.Join(demoDir, "templates.yaml")); err != nil {
		return err
	}

	step("Applying a NodeHealthCheck for workers (config/samples/nhc-worker.yaml, no unhealthyConditions given)")
	if _, err := k("apply", "-f", filepath.Join(samples, "nhc-worker.yaml")); err != nil {
		return err
	}
	step("The defaulting webhook filled in the unhealthy conditions")
	if _, err := k("get", "nhc", "nhc-worker", "-o", "jsonpath={range .spec.unhealthyConditions[*]}{.type}={.status} for {.duration}{\"\\n\"}{end}"); err != nil {
		return err
	}

	step("Applying an escalating NodeHealthCheck (reboot, then reprovision)")
	if _, err := k("apply", "-f", filepath.Join(samples, "nhc-escalating.yaml")); err != nil {
		return err
	}

	step("Applying an invalid NodeHealthCheck: the API refuses it and names every problem")
	out, err := k("apply", "-f", filepath.Join(demoDir, "invalid-nhc.yaml"))
	if err == nil || !strings.Contains(out, "spec.maxUnhealthy") {
		return fmt.Errorf("the invalid NodeHealthCheck was not refused as expected")
	}

	step("Changing a template kind to one that is namespaced, without a namespace: only the webhook can tell")
	out, err = k("patch", "nhc", "nhc-worker", "--type=json", "-p", `[{"op":"remove","path":"/spec/remediationTemplate/namespace"}]`)
	if err == nil || !strings.Contains(out, "namespace") {
		return fmt.Errorf("the webhook did not refuse the missing namespace")
	}

	step("kubectl get nhc")
	if _, err := k("get", "nhc"); err != nil {
		return err
	}
	step("kubectl explain nhc.spec.healthyDelay (the API documents itself)")
	if _, err := k("explain", "nhc.spec.healthyDelay"); err != nil {
		return err
	}
	return remediate(k, kq, demoDir)
}

// remediate shows a node failing, its remediation CR appearing, and the CR going away when the node
// recovers.
func remediate(k, kq func(...string) (string, error), demoDir string) error {
	step("Creating three simulated worker nodes, all Ready")
	if _, err := k("apply", "-f", filepath.Join(demoDir, "nodes.yaml")); err != nil {
		return err
	}
	for _, n := range []string{"worker-1", "worker-2", "worker-3"} {
		if err := setReady(kq, n, "True"); err != nil {
			return err
		}
	}
	step("Applying a NodeHealthCheck for them: unhealthy after Ready is False or Unknown for 10s")
	if _, err := k("apply", "-f", filepath.Join(demoDir, "demo-nhc.yaml")); err != nil {
		return err
	}
	if err := waitFor(kq, []string{"get", "nhc", "nhc-demo-workers", "-o", "jsonpath={.status.phase}/{.status.healthyNodes}"}, "Enabled/3"); err != nil {
		return err
	}
	if _, err := k("get", "nhc", "nhc-demo-workers"); err != nil {
		return err
	}

	step("worker-2 stops reporting: Ready=Unknown")
	if err := setReady(kq, "worker-2", "Unknown"); err != nil {
		return err
	}
	fmt.Println("    Waiting for the 10s duration to pass ...")
	if err := waitFor(kq, []string{"get", "selfnoderemediations", "-A", "-o", "name"}, "worker-2"); err != nil {
		return err
	}
	step("The operator created a SelfNodeRemediation for worker-2 from the template")
	if _, err := k("get", "selfnoderemediations", "-A", "-o", "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,STRATEGY:.spec.remediationStrategy,OWNER:.metadata.ownerReferences[0].name"); err != nil {
		return err
	}
	if err := waitFor(kq, []string{"get", "nhc", "nhc-demo-workers", "-o", "jsonpath={.status.unhealthyNodes[0].remediations[0].resource.kind}"}, "SelfNodeRemediation"); err != nil {
		return err
	}
	if _, err := k("get", "nhc", "nhc-demo-workers"); err != nil {
		return err
	}

	step("The remediator brings worker-2 back: Ready=True")
	if err := setReady(kq, "worker-2", "True"); err != nil {
		return err
	}
	if err := waitFor(kq, []string{"get", "selfnoderemediations", "-A", "-o", "name"}, ""); err != nil {
		return err
	}
	if err := waitFor(kq, []string{"get", "nhc", "nhc-demo-workers", "-o", "jsonpath={.status.phase}/{.status.healthyNodes}"}, "Enabled/3"); err != nil {
		return err
	}
	step("The CR is gone and the NodeHealthCheck is back to Enabled")
	if _, err := k("get", "nhc", "nhc-demo-workers"); err != nil {
		return err
	}
	step("What happened, as events")
	_, err := k("get", "events", "-A", "--field-selector", "involvedObject.name=nhc-demo-workers", "--sort-by=.metadata.creationTimestamp",
		"-o", "custom-columns=REASON:.reason,MESSAGE:.message")
	return err
}

// setReady sets a node's Ready condition, changed now, as a kubelet or the node lifecycle controller
// would.
func setReady(kq func(...string) (string, error), node, status string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":"Demo","message":"set by the demo","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`, status, now, now)
	_, err := kq("patch", "node", node, "--subresource=status", "--type=merge", "-p", patch)
	return err
}

// waitFor runs kubectl until its output contains want (or, for an empty want, is empty).
func waitFor(kq func(...string) (string, error), args []string, want string) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := kq(args...)
		out = strings.TrimSpace(out)
		if err == nil && ((want == "" && out == "") || (want != "" && strings.Contains(out, want))) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubectl %s: waited 90s for %q, last output %q", strings.Join(args, " "), want, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

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

	k := func(args ...string) (string, error) {
		cmd := exec.Command(kubectlBinary, append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...) //nolint:gosec // demo
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		fmt.Print(indent(out.String()))
		return out.String(), err
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
	return nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

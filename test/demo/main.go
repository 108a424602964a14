// Command demo shows the operator at work on a local control plane: it starts etcd, kube-apiserver,
// kube-controller-manager and kwok (simulated nodes with real heartbeats), runs the real manager
// binary with its webhooks, applies valid and invalid NodeHealthChecks with kubectl, lets a worker
// hang and shows the remediation, and shuts everything down (or, with -keep, keeps the cluster
// running to explore). Run it with `make demo` (or `make demo DEMO_ARGS=-keep`).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/testutil"
	"github.com/medik8s/node-healthcheck/test/localcluster"
)

func main() {
	manager := flag.String("manager", "bin/manager", "manager binary")
	kubectl := flag.String("kubectl", "kubectl", "kubectl binary")
	flag.StringVar(&kubectlNHC, "kubectl-nhc", "bin/kubectl-nhc", "the kubectl nhc plugin binary (make build); empty: skip that step")
	flag.BoolVar(&keep, "keep", false, "keep the cluster and the operator running at the end, until Ctrl-C, to explore with kubectl")
	flag.Parse()
	if err := run(*manager, *kubectl); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

// keep keeps the cluster running at the end.
var keep bool

// kubectlNHC is the kubectl nhc plugin.
var kubectlNHC string

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

	simPath := filepath.Join(testutil.RepoRoot(), "bin", "demo-simulation.log")
	simLog, err := os.Create(simPath)
	if err != nil {
		return err
	}
	defer simLog.Close()
	step("Starting simulated nodes: kwok (heartbeats) and kube-controller-manager (node lifecycle, %s grace period)", localcluster.NodeGracePeriod)
	if err := cluster.StartNodeSimulation(simLog); err != nil {
		return err
	}
	remediatorCtx, stopRemediator := context.WithCancel(context.Background())
	defer stopRemediator()
	go (&localcluster.Remediator{Client: mustClient(cluster), Namespace: "openshift-workload-availability",
		APIVersion: "self-node-remediation.medik8s.io/v1alpha1", Kind: "SelfNodeRemediation", RebootDelay: 5 * time.Second,
		Log: func(format string, args ...any) { fmt.Printf("    "+format, args...) }}).Run(remediatorCtx)

	step("Installing the Helm chart charts/node-healthcheck: the CRD, least-privilege RBAC, the webhook configurations (no cert-manager here: the operator makes its own certificate)")
	if _, err := cluster.InstallChart(map[string]any{"certManager": map[string]any{"enabled": false}}); err != nil {
		return err
	}

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

	step("Installing what the remediators would: their templates, and their permissions for the operator (aggregated into the chart's role)")
	if _, err := k("apply", "-f", filepath.Join(demoDir, "templates.yaml")); err != nil {
		return err
	}
	if err := waitFor(kq, []string{"get", "clusterrole", "nhc-node-healthcheck-ext-remediation", "-o", "jsonpath={.rules[*].resources}"}, "metal3remediations"); err != nil {
		return err
	}

	logPath := filepath.Join(testutil.RepoRoot(), "bin", "demo-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()

	step("Starting the operator (%s) out of cluster with the chart's arguments, as the chart's ServiceAccount", managerBinary)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := cluster.StartReady(ctx, localcluster.ManagerOptions{Binary: managerBinary, Output: logFile})
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, logPath)
	}
	fmt.Printf("Ready (probes at %s, logs in %s). It made its webhook CA and certificate, wrote the CA into the webhook configurations, and serves admission through the chart's Service.\n", m.ProbeAddr, logPath)
	defer func() {
		step("Stopping the operator with SIGTERM")
		if err := m.Stop(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		} else {
			fmt.Println("The operator released its leader lease and exited cleanly.")
		}
	}()

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
	if err := remediate(cluster, k, kq, demoDir, samples); err != nil {
		return err
	}
	if keep {
		step("The cluster keeps running; press Ctrl-C to stop it")
		fmt.Printf("    export KUBECONFIG=%s\n    kubectl get nhc,nodes\n    kubectl label node worker-3 %s-   # make another worker hang\n",
			cluster.Kubeconfig, localcluster.KwokLabel)
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt)
		<-stop
	}
	return nil
}

// remediate shows a node that really fails: its heartbeats stop, the node lifecycle controller marks
// it Unknown, the operator creates a remediation CR, the (test) remediator reboots the node, and the
// operator removes the CR once the node is back.
func remediate(cluster *localcluster.Cluster, k, kq func(...string) (string, error), demoDir, samples string) error {
	step("Creating five simulated worker nodes; kwok heartbeats them like kubelets")
	if _, err := k("apply", "-f", filepath.Join(demoDir, "nodes.yaml")); err != nil {
		return err
	}
	if err := waitFor(kq, []string{"get", "nodes", "-l", "demo.medik8s.io/pool=workers", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{end}`}, "TrueTrueTrueTrueTrue"); err != nil {
		return err
	}
	if _, err := k("get", "nodes", "-l", "demo.medik8s.io/pool=workers"); err != nil {
		return err
	}
	// The samples select every worker, so they would overlap the demo's own NodeHealthCheck: shown
	// once, here, then they go, and the rest is one NodeHealthCheck's story.
	demoNHC := filepath.Join(demoDir, "demo-nhc.yaml")
	step("The two samples select every worker, these five too: a server-side dry run of the demo's NodeHealthCheck shows the webhook's warning")
	out, err := k("apply", "--dry-run=server", "-f", demoNHC)
	if err != nil {
		return err
	}
	if strings.Count(out, "Warning: spec.selector: NodeHealthCheck") != 2 {
		return fmt.Errorf("the dry run did not warn of the two samples' overlap")
	}
	fmt.Println("    A node that several NodeHealthChecks select is remediated by one at a time: the first to take its")
	fmt.Println("    node lease; the others hold back meanwhile (docs/compatibility.md, \"Overlapping selectors\").")
	step("Deleting the samples: one NodeHealthCheck per node from here on")
	if _, err := k("delete", "-f", filepath.Join(samples, "nhc-worker.yaml"), "-f", filepath.Join(samples, "nhc-escalating.yaml"), "--wait"); err != nil {
		return err
	}
	step("Applying a NodeHealthCheck for them: unhealthy after Ready is False or Unknown for 10s")
	out, err = k("apply", "-f", demoNHC)
	if err != nil {
		return err
	}
	if strings.Contains(out, "Warning:") {
		return fmt.Errorf("the demo's NodeHealthCheck still overlaps another one")
	}
	if err := waitFor(kq, []string{"get", "nhc", "nhc-demo-workers", "-o", "jsonpath={.status.phase}/{.status.healthyNodes}"}, "Enabled/5"); err != nil {
		return err
	}
	if _, err := k("get", "nhc", "nhc-demo-workers"); err != nil {
		return err
	}

	begin := time.Now()
	at := func() string { return fmt.Sprintf("[+%2ds]", int(time.Since(begin).Seconds())) }
	step("worker-2's machine hangs: its heartbeats stop (kubectl label node worker-2 type-)")
	if _, err := k("label", "node", "worker-2", localcluster.KwokLabel+"-"); err != nil {
		return err
	}
	fmt.Printf("    Waiting for the node lifecycle controller (grace period %s) ...\n", localcluster.NodeGracePeriod)
	if err := waitFor(kq, []string{"get", "node", "worker-2", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`}, "Unknown"); err != nil {
		return err
	}
	step("%s worker-2 is Ready=Unknown", at())
	if _, err := k("get", "nodes", "-l", "demo.medik8s.io/pool=workers"); err != nil {
		return err
	}
	fmt.Println("    Waiting for the NodeHealthCheck's 10s duration ...")
	if err := waitFor(kq, []string{"get", "selfnoderemediations", "-A", "-o", "name"}, "worker-2"); err != nil {
		return err
	}
	step("%s The operator created a SelfNodeRemediation for worker-2 from the template", at())
	if _, err := k("get", "selfnoderemediations", "-A", "-o", "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,STRATEGY:.spec.remediationStrategy,OWNER:.metadata.ownerReferences[0].name"); err != nil {
		return err
	}
	if _, err := k("get", "nhc", "nhc-demo-workers"); err != nil {
		return err
	}
	if kubectlNHC != "" {
		step("kubectl nhc explain node worker-2 (why, decided with the operator's own code)")
		cmd := exec.Command(kubectlNHC, "explain", "node", "worker-2", "--kubeconfig", cluster.Kubeconfig) //nolint:gosec // demo
		out, err := cmd.CombinedOutput()
		fmt.Print(indent(string(out)))
		if err != nil {
			return fmt.Errorf("kubectl nhc explain: %w", err)
		}
		if n := strings.Count(string(out), "\nNodeHealthCheck "); n != 1 || strings.Contains(string(out), "overlap:") {
			return fmt.Errorf("kubectl nhc explain told of %d NodeHealthChecks (overlap lines: %t), want the demo's alone", n, strings.Contains(string(out), "overlap:"))
		}
	}
	fmt.Println("    The (simulated) remediator reboots worker-2 ...")
	if err := waitFor(kq, []string{"get", "node", "worker-2", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`}, "True"); err != nil {
		return err
	}
	step("%s worker-2 is back: Ready=True", at())
	if err := waitFor(kq, []string{"get", "selfnoderemediations", "-A", "-o", "name"}, ""); err != nil {
		return err
	}
	if err := waitFor(kq, []string{"get", "nhc", "nhc-demo-workers", "-o", "jsonpath={.status.phase}/{.status.healthyNodes}"}, "Enabled/5"); err != nil {
		return err
	}
	step("%s The operator removed the SelfNodeRemediation; the NodeHealthCheck is Enabled again", at())
	if _, err := k("get", "nhc", "nhc-demo-workers"); err != nil {
		return err
	}
	if _, err := k("get", "nodes", "-l", "demo.medik8s.io/pool=workers"); err != nil {
		return err
	}
	step("What happened, as events")
	_, err = k("get", "events", "-A", "--field-selector", "involvedObject.name=nhc-demo-workers", "--sort-by=.metadata.creationTimestamp",
		"-o", "custom-columns=REASON:.reason,MESSAGE:.message")
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

// mustClient returns a client for the cluster (the demo's remediator acts through it).
func mustClient(c *localcluster.Cluster) client.Client {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	k, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	return k
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/explain"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// result is one run of the plugin.
type result struct {
	code           int
	stdout, stderr string
}

func runPlugin(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// TestCommandLine runs the plugin's command line without a cluster: help, version, completion and
// every wrong command line, as kubectl answers them (exit code, what goes where).
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // substrings
		stderr []string // substrings; nil: stderr is empty
	}{
		{name: "--help exits 0 with the usage on stdout", args: []string{"--help"},
			stdout: []string{"kubectl nhc [command]", "explain", "request", "version", "completion", "--as-group", "--kubeconfig", "--context", "--server", "--token", "--namespace"}},
		{name: "-h", args: []string{"-h"}, stdout: []string{"kubectl nhc [command]"}},
		{name: "no command prints the usage, as kubectl does", args: nil, stdout: []string{"kubectl nhc [command]"}},
		{name: "help explain node", args: []string{"help", "explain", "node"}, stdout: []string{"kubectl nhc explain node <name> [flags]", "--output", "--lease-namespace", "--returning-node-grace", "--as string"}},
		{name: "explain node --help", args: []string{"explain", "node", "--help"}, stdout: []string{"kubectl nhc explain node <name> [flags]", "json or yaml"}},
		{name: "request node --help", args: []string{"request", "node", "--help"}, stdout: []string{"kubectl nhc request node <name> [flags]", "--dry-run", `"none", "client", or "server"`}},
		{name: "version", args: []string{"version"}, stdout: []string{"kubectl-nhc " + pluginVersion() + "\n"}},
		{name: "--version", args: []string{"--version"}, stdout: []string{"kubectl-nhc " + pluginVersion() + "\n"}},
		{name: "completion bash", args: []string{"completion", "bash"}, stdout: []string{"bash completion", "__complete"}},
		{name: "completion zsh", args: []string{"completion", "zsh"}, stdout: []string{"compdef"}},
		{name: "completion of commands", args: []string{"__complete", "explain", ""}, stdout: []string{"node\t", "nhc\t"}, stderr: []string{"Completion ended with directive"}},
		{name: "completion of request's flags", args: []string{"__complete", "request", "node", "--dry"}, stdout: []string{"--dry-run"}, stderr: []string{"Completion ended with directive"}},
		{name: "unknown command", args: []string{"describe", "node", "x"}, code: 1,
			stderr: []string{`error: unknown command "describe" for "kubectl nhc"`, "See 'kubectl nhc --help' for usage."}},
		{name: "unknown kind to explain", args: []string{"explain", "pod", "x"}, code: 1,
			stderr: []string{`unknown command "pod" for "kubectl nhc explain"`, "See 'kubectl nhc explain --help' for usage."}},
		{name: "no name", args: []string{"explain", "node"}, code: 1, stderr: []string{"wants one name, got 0", "See 'kubectl nhc explain node --help'"}},
		{name: "two names", args: []string{"explain", "node", "a", "b"}, code: 1, stderr: []string{"wants one name, got 2"}},
		{name: "request of an nhc", args: []string{"request", "nhc", "x"}, code: 1, stderr: []string{`unknown command "nhc"`}},
		{name: "unknown flag", args: []string{"explain", "node", "x", "--no-such-flag"}, code: 1, stderr: []string{"unknown flag: --no-such-flag", "See 'kubectl nhc explain node --help'"}},
		{name: "unknown output format", args: []string{"explain", "node", "x", "-o", "table"}, code: 1, stderr: []string{`unknown output format "table"`}},
		{name: "unknown dry-run", args: []string{"request", "node", "x", "--dry-run=maybe"}, code: 1, stderr: []string{`invalid dry-run value "maybe"`}},
		{name: "a kubeconfig that does not exist fails at loading, after the command line was accepted",
			args: []string{"explain", "node", "--kubeconfig=/does/not/exist", "worker-1"}, code: 1, stderr: []string{"loading the kubeconfig", "/does/not/exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
				}
			}
			if tc.stderr == nil && r.stderr != "" {
				t.Errorf("stderr %q, want none", r.stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
		})
	}
}

// TestVersionIsStamped: `make build`'s -ldflags -X main.version reaches `version`.
func TestVersionIsStamped(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = "1.2.3"
	if r := runPlugin("version"); r.stdout != "kubectl-nhc 1.2.3\n" {
		t.Errorf("got %q", r.stdout)
	}
}

// TestConfigFlags: every kubectl connection flag reaches the client's rest.Config (the flags the
// API server test cannot show: a token, a per-request timeout, TLS settings, -n).
func TestConfigFlags(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	for _, f := range []string{"ca.crt", "c.crt", "c.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["one"] = &clientcmdapi.Cluster{Server: "https://one.example:6443"}
	cfg.Clusters["two"] = &clientcmdapi.Cluster{Server: "https://two.example:6443"}
	cfg.AuthInfos["alice"] = &clientcmdapi.AuthInfo{Token: "alice-token"}
	cfg.AuthInfos["bob"] = &clientcmdapi.AuthInfo{Token: "bob-token"}
	cfg.Contexts["one"] = &clientcmdapi.Context{Cluster: "one", AuthInfo: "alice", Namespace: "ns-one"}
	cfg.Contexts["two"] = &clientcmdapi.Context{Cluster: "two", AuthInfo: "bob"}
	cfg.CurrentContext = "one"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		check func(*rest.Config) bool
		// namespace is the namespace the flags select ("" to not check).
		namespace string
	}{
		{nil, func(c *rest.Config) bool {
			return c.Host == "https://one.example:6443" && c.BearerToken == "alice-token" && c.Timeout == 30*time.Second && c.Impersonate.UserName == ""
		}, "ns-one"},
		{[]string{"--context=two"}, func(c *rest.Config) bool { return c.Host == "https://two.example:6443" && c.BearerToken == "bob-token" }, "default"},
		{[]string{"--cluster=two"}, func(c *rest.Config) bool {
			return c.Host == "https://two.example:6443" && c.BearerToken == "alice-token"
		}, ""},
		{[]string{"--user=bob"}, func(c *rest.Config) bool { return c.Host == "https://one.example:6443" && c.BearerToken == "bob-token" }, ""},
		{[]string{"--server=https://elsewhere:1234"}, func(c *rest.Config) bool { return c.Host == "https://elsewhere:1234" }, ""},
		{[]string{"-s", "https://elsewhere:1234"}, func(c *rest.Config) bool { return c.Host == "https://elsewhere:1234" }, ""},
		{[]string{"--token=t0ken"}, func(c *rest.Config) bool { return c.BearerToken == "t0ken" }, ""},
		{[]string{"--as=carol", "--as-group=g1", "--as-group=g2", "--as-uid=42", "--as-user-extra=scope=a"}, func(c *rest.Config) bool {
			return c.Impersonate.UserName == "carol" && strings.Join(c.Impersonate.Groups, ",") == "g1,g2" && c.Impersonate.UID == "42" &&
				strings.Join(c.Impersonate.Extra["scope"], ",") == "a"
		}, ""},
		{[]string{"--request-timeout=5s"}, func(c *rest.Config) bool { return c.Timeout == 5*time.Second }, ""},
		{[]string{"--request-timeout=0"}, func(c *rest.Config) bool { return c.Timeout == 0 }, ""},
		{[]string{"--insecure-skip-tls-verify"}, func(c *rest.Config) bool { return c.Insecure }, ""},
		{[]string{"--tls-server-name=api.example"}, func(c *rest.Config) bool { return c.ServerName == "api.example" }, ""},
		{[]string{"--certificate-authority=" + filepath.Join(dir, "ca.crt"), "--client-certificate=" + filepath.Join(dir, "c.crt"), "--client-key=" + filepath.Join(dir, "c.key")}, func(c *rest.Config) bool {
			return c.CAFile == filepath.Join(dir, "ca.crt") && c.CertFile == filepath.Join(dir, "c.crt") && c.KeyFile == filepath.Join(dir, "c.key")
		}, ""},
		{[]string{"--proxy-url=http://proxy:3128"}, func(c *rest.Config) bool { return c.Proxy != nil }, ""},
		{[]string{"--disable-compression"}, func(c *rest.Config) bool { return c.DisableCompression }, ""},
		{[]string{"-n", "ns-flag"}, func(*rest.Config) bool { return true }, "ns-flag"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			p := newPlugin()
			cmd, args, err := p.command().Find(append([]string{"explain", "node", "x", "--kubeconfig=" + kubeconfig}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.ParseFlags(args); err != nil {
				t.Fatal(err)
			}
			c, err := p.config.ToRESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("rest.Config %+v", c)
			}
			if tc.namespace != "" {
				if ns, _, err := p.config.ToRawKubeConfigLoader().Namespace(); err != nil || ns != tc.namespace {
					t.Errorf("namespace %q (%v), want %q", ns, err, tc.namespace)
				}
			}
		})
	}
}

// TestAgainstAnAPIServer runs the plugin against a real API server with RBAC: impersonation, the
// kubeconfig's context and --server reach the requests (they change the answer), -o json|yaml
// gives the decision the text gives, and request's --dry-run writes nothing.
func TestAgainstAnAPIServer(t *testing.T) {
	cfg := testutil.StartControlPlane(t)
	ctx := context.Background()
	admin, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	create := func(obj client.Object) {
		t.Helper()
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// Three workers, one of them Ready=False for an hour: the NodeHealthCheck starts its
	// remediation now (2 of 3 healthy, 2 required).
	for name, ready := range map[string]corev1.ConditionStatus{"worker-1": corev1.ConditionFalse, "worker-2": corev1.ConditionTrue, "worker-3": corev1.ConditionTrue} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		create(n)
		since := metav1.NewTime(time.Now().Add(-time.Hour))
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: since, LastHeartbeatTime: since, Reason: "Test"}}
		if err := admin.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	template := &unstructured.Unstructured{}
	template.SetAPIVersion("test.medik8s.io/v1alpha1")
	template.SetKind("TestRemediationTemplate")
	template.SetNamespace(testutil.TemplateNamespace)
	template.SetName("test-template")
	if err := unstructured.SetNestedMap(template.Object, map[string]any{"spec": map[string]any{"strategy": "reboot"}}, "spec", "template"); err != nil {
		t.Fatal(err)
	}
	create(template)
	create(testutil.NewNHC("nhc-workers"))
	// Group nhc-readers may read NodeHealthChecks and Nodes, and nothing else.
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nhc-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{remediationv1alpha1.GroupVersion.Group}, Resources: []string{"nodehealthchecks"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
	}})
	create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nhc-readers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nhc-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "nhc-readers"}}})

	// The kubeconfig: context "admin" (current) reaches the API server; context "elsewhere" has the
	// same credentials and CA but a server where nothing listens.
	kubeconfig := filepath.Join(t.TempDir(), "config")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.Clusters["elsewhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "elsewhere", AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	requested := func() bool {
		n := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: "worker-1"}, n); err != nil {
			t.Fatal(err)
		}
		_, ok := n.Annotations[remediationv1alpha1.RemediationRequestAnnotation]
		return ok
	}
	// decisionLine is the text answer's decision line for worker-1.
	var decisionLine string

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
		// check checks the output further, and the cluster after the run.
		check func(t *testing.T, r result)
	}{
		{name: "text", args: []string{"explain", "node", "worker-1"},
			stdout: []string{"NodeHealthCheck nhc-workers", "health: unhealthy since", "decision: starts a remediation now"},
			check: func(t *testing.T, r result) {
				for line := range strings.SplitSeq(r.stdout, "\n") {
					if s, ok := strings.CutPrefix(line, "  decision: "); ok {
						decisionLine = s
					}
				}
			}},
		{name: "--as a user without rights", args: []string{"explain", "nhc", "nhc-workers", "--as=alice"}, code: 1,
			stderr: []string{`User "alice" cannot list resource "nodehealthchecks"`}},
		{name: "--as a user, --as-group a group that may read NodeHealthChecks and Nodes only", args: []string{"explain", "nhc", "nhc-workers", "--as=alice", "--as-group=nhc-readers"},
			stdout: []string{"NodeHealthCheck nhc-workers", "Partial answer: you may not read"}},
		{name: "--as-group alone is refused, as by kubectl", args: []string{"explain", "nhc", "nhc-workers", "--as-group=nhc-readers"}, code: 1,
			stderr: []string{"without impersonating a user"}},
		{name: "--context", args: []string{"explain", "nhc", "nhc-workers", "--context=elsewhere"}, code: 1,
			stderr: []string{"127.0.0.1:1"}},
		{name: "--server overrides the context's", args: []string{"explain", "nhc", "nhc-workers", "--context=elsewhere", "--server=" + cfg.Host},
			stdout: []string{"NodeHealthCheck nhc-workers"}},
		{name: "completion of node names", args: []string{"__complete", "request", "node", ""},
			stdout: []string{"worker-1\n", "worker-2\n", "worker-3\n", "\n:4\n"}}, // 4: no file completion
		{name: "completion of NodeHealthCheck names", args: []string{"__complete", "explain", "nhc", ""},
			stdout: []string{"nhc-workers\n", "\n:4\n"}},
		{name: "completion of node names as a user who may not list them", args: []string{"__complete", "request", "node", "--as=alice", ""},
			stdout: []string{":1\n"}, // 1: an error
			check: func(t *testing.T, r result) {
				if strings.Contains(r.stdout, "worker-1") {
					t.Errorf("stdout %q", r.stdout)
				}
			}},
		{name: "-o json", args: []string{"explain", "node", "worker-1", "-o", "json"},
			check: func(t *testing.T, r result) {
				var x explain.NodeExplanation
				if err := json.Unmarshal([]byte(r.stdout), &x); err != nil {
					t.Fatalf("%v:\n%s", err, r.stdout)
				}
				checkNodeExplanation(t, x, decisionLine)
			}},
		{name: "-o yaml", args: []string{"explain", "node", "worker-1", "--output=yaml"},
			check: func(t *testing.T, r result) {
				var x explain.NodeExplanation
				if err := yaml.UnmarshalStrict([]byte(r.stdout), &x); err != nil {
					t.Fatalf("%v:\n%s", err, r.stdout)
				}
				checkNodeExplanation(t, x, decisionLine)
			}},
		{name: "explain nhc -o json", args: []string{"explain", "nhc", "nhc-workers", "-o", "json"},
			check: func(t *testing.T, r result) {
				var x explain.NodeHealthCheckExplanation
				if err := json.Unmarshal([]byte(r.stdout), &x); err != nil {
					t.Fatalf("%v:\n%s", err, r.stdout)
				}
				if x.APIVersion != explain.APIVersion || x.Kind != explain.NodeHealthCheckExplanationKind || x.Name != "nhc-workers" ||
					x.Budget.Healthy != 2 || x.Budget.Observed != 3 || x.Budget.MinHealthy != 2 ||
					len(x.Nodes) != 1 || x.Nodes[0].Name != "worker-1" || x.Nodes[0].Action != "StartRemediation" {
					t.Errorf("got %+v", x)
				}
			}},
		{name: "request --dry-run=client writes nothing, and needs no right to", args: []string{"request", "node", "worker-1", "--dry-run=client", "--as=alice", "--as-group=nhc-readers"},
			stdout: []string{"Requested the remediation of node worker-1 at", "(dry run)", `the merge patch: {"metadata":{"annotations":{"remediation.medik8s.io/request-remediation":`},
			check: func(t *testing.T, _ result) {
				if requested() {
					t.Error("the node was annotated")
				}
			}},
		{name: "bare --dry-run is client", args: []string{"request", "node", "worker-1", "--dry-run", "--as=alice", "--as-group=nhc-readers"},
			stdout: []string{"(dry run)"}},
		{name: "request --dry-run=server sends the patch: a user who may not patch nodes is refused", args: []string{"request", "node", "worker-1", "--dry-run=server", "--as=alice", "--as-group=nhc-readers"}, code: 1,
			stderr: []string{`cannot patch resource "nodes"`}},
		{name: "request --dry-run=server writes nothing", args: []string{"request", "node", "worker-1", "--dry-run=server"},
			stdout: []string{"(server dry run)", "NodeHealthCheck nhc-workers selects it but ignores requests"},
			check: func(t *testing.T, _ result) {
				if requested() {
					t.Error("the node was annotated")
				}
			}},
		{name: "request writes", args: []string{"request", "node", "worker-1"},
			stdout: []string{"Requested the remediation of node worker-1 at"},
			check: func(t *testing.T, r result) {
				if !requested() {
					t.Error("the node was not annotated")
				}
				if strings.Contains(r.stdout, "dry run") {
					t.Errorf("stdout %q", r.stdout)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--kubeconfig="+kubeconfig, "--request-timeout=10s")
			if tc.args[0] == "__complete" {
				// The word to complete comes last.
				last := len(tc.args) - 1
				args = append(append(slices.Clone(tc.args[:last]), "--kubeconfig="+kubeconfig, "--request-timeout=10s"), tc.args[last])
			}
			r := runPlugin(args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// checkNodeExplanation checks explain node worker-1's data against the text's decision.
func checkNodeExplanation(t *testing.T, x explain.NodeExplanation, decisionLine string) {
	t.Helper()
	if x.APIVersion != explain.APIVersion || x.Kind != explain.NodeExplanationKind || x.Node.Name != "worker-1" || !x.Node.Exists {
		t.Errorf("got %+v", x)
	}
	if len(x.NodeHealthChecks) != 1 {
		t.Fatalf("nodeHealthChecks %+v, want nhc-workers", x.NodeHealthChecks)
	}
	v := x.NodeHealthChecks[0]
	if v.Name != "nhc-workers" || !v.Selects || v.Health == nil || v.Health.State != "Unhealthy" || v.Health.UnhealthySince == nil ||
		v.Decision == nil || v.Decision.Action != "StartRemediation" || v.Decision.Summary != decisionLine || decisionLine == "" {
		t.Errorf("got %+v, health %+v, decision %+v; the text's decision %q", v, v.Health, v.Decision, decisionLine)
	}
	if x.Settings == nil || !strings.Contains(x.Settings.From, "the defaults") {
		t.Errorf("settings %+v", x.Settings)
	}
}

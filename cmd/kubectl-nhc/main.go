// Command kubectl-nhc is a kubectl plugin for NodeHealthChecks (install it with go install
// github.com/medik8s/node-healthcheck/cmd/kubectl-nhc@latest; kubectl finds it on the PATH):
//
//	kubectl nhc explain node <name>   why a node is (not) being remediated, by every NodeHealthCheck,
//	                                  and how its last remediations ended
//	kubectl nhc explain nhc <name>    a NodeHealthCheck's budget, nodes, blockers, remediations and outcomes
//	kubectl nhc request node <name>   ask for a node's remediation now (spec.allowRemediationRequests)
//
// It reads the live cluster only, and decides with the operator's own code (internal/explain).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/explain"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/lease"
)

const usage = `Usage:
  kubectl nhc explain node <name> [flags]   why a node is (not) being remediated, and how its last remediations ended
  kubectl nhc explain nhc <name> [flags]    a NodeHealthCheck's nodes, blockers, remediations and outcomes
  kubectl nhc request node <name> [flags]   ask for a node's remediation now (where a NodeHealthCheck
                                            that selects it sets spec.allowRemediationRequests)

Flags:
`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kubectl-nhc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
	kubeContext := fs.String("context", "", "The kubeconfig context to use.")
	leaseNamespace := fs.String("lease-namespace", lease.DefaultNamespace, "The operator's --lease-namespace (default: as the operator publishes it, else "+lease.DefaultNamespace+").")
	returnGrace := fs.Duration("returning-node-grace", health.DefaultReturnGrace, "The operator's --returning-node-grace (default: as the operator publishes it, else "+health.DefaultReturnGrace.String()+").")
	timeout := fs.Duration("request-timeout", 30*time.Second, "How long to wait for the API server.")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }

	// Flags may come before or after the words.
	var words []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return err
		}
		args = fs.Args()
		if len(args) > 0 {
			words, args = append(words, args[0]), args[1:]
		}
	}
	explaining := len(words) == 3 && words[0] == "explain" && (words[1] == "node" || words[1] == "nhc" || words[1] == "nodehealthcheck")
	requesting := len(words) == 3 && words[0] == "request" && words[1] == "node"
	if !explaining && !requesting {
		fs.Usage()
		return errors.New("want: explain node <name>, explain nhc <name> or request node <name>")
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kubeContext}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := remediationv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if requesting {
		return explain.Request(ctx, c, words[2], time.Now(), stdout)
	}
	o := explain.Options{LeaseNamespace: *leaseNamespace, ReturnGrace: *returnGrace, RemovalHold: health.DefaultRemovalHold}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.SettingsFrom = settingsFrom(ctx, c, &o, set["lease-namespace"], set["returning-node-grace"])
	if words[1] == "node" {
		return explain.Node(ctx, c, words[2], o, stdout)
	}
	return explain.NHC(ctx, c, words[2], o, stdout)
}

// settingsFrom fills the settings the flags did not set from those the operator publishes, and says
// where they came from; where it cannot find them, the defaults stand and it says why.
func settingsFrom(ctx context.Context, c client.Client, o *explain.Options, namespaceSet, graceSet bool) string {
	if namespaceSet && graceSet {
		return "from the flags"
	}
	published, err := explain.FindSettings(ctx, c)
	if err != nil {
		return "the defaults, as the operator's published settings are not known: " + err.Error()
	}
	if !namespaceSet {
		o.LeaseNamespace = published.LeaseNamespace
	}
	if !graceSet {
		o.ReturnGrace = published.ReturningNodeGrace
	}
	o.RemovalHold = published.RemovalHold
	from := "as the operator (version " + published.Version + ") publishes them in ConfigMap " + published.ConfigMap
	if namespaceSet || graceSet {
		from += ", but for the flag given"
	}
	return from
}

// Command kubectl-nhc is a kubectl plugin for NodeHealthChecks (install it with go install
// github.com/medik8s/node-healthcheck/cmd/kubectl-nhc@latest; kubectl finds it on the PATH):
//
//	kubectl nhc explain node <name>   why a node is (not) being remediated, by every NodeHealthCheck,
//	                                  and how its last remediations ended
//	kubectl nhc explain nhc <name>    a NodeHealthCheck's budget, nodes, blockers, remediations and outcomes
//	kubectl nhc request node <name>   ask for a node's remediation now (spec.allowRemediationRequests)
//	kubectl nhc version               the plugin's version
//	kubectl nhc completion <shell>    a shell completion script
//
// It takes kubectl's connection flags (genericclioptions.ConfigFlags: --kubeconfig, --context,
// --server, --token, --as, --as-group, -n, ...), explain takes -o json|yaml, request takes
// --dry-run=none|client|server (docs/kubectl-nhc.md). It reads the live cluster only, and decides
// with the operator's own code (internal/explain).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/explain"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/lease"
)

// defaultRequestTimeout is --request-timeout's default: kubectl's is 0 (wait for ever), but a plugin
// that makes a few dozen reads should not hang on an API server that does not answer.
const defaultRequestTimeout = "30s"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the plugin with the arguments and returns its exit code: 0, or 1 after printing the
// error (and, for a wrong command line, where to find the usage) to stderr, as kubectl does.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newPlugin().command()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "error:", err)
	if errors.As(err, new(usageError)) {
		fmt.Fprintf(stderr, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return 1
}

// usageError is a wrong command line: an unknown command or flag, or the wrong arguments.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// plugin holds the flags.
type plugin struct {
	config *genericclioptions.ConfigFlags
	// explain's flags.
	output         string
	leaseNamespace string
	returnGrace    time.Duration
	// request's.
	dryRun string
}

func newPlugin() *plugin {
	config := genericclioptions.NewConfigFlags(true)
	*config.Timeout = defaultRequestTimeout
	return &plugin{config: config}
}

// command builds the command tree: kubectl's connection flags on every command, help, completion
// (cobra's), version, explain and request.
func (p *plugin) command() *cobra.Command {
	root := &cobra.Command{
		Use:   "nhc",
		Short: "Explain and request NodeHealthCheck remediations",
		Long: "kubectl nhc explains why a node is (not) being remediated, with the operator's own decision code, " +
			"and asks for a node's remediation.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nhc"},
		Version:       pluginVersion(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noUnknownCommand,
		RunE:          helpOrUnknown,
	}
	root.SetVersionTemplate("kubectl-nhc {{.Version}}\n")
	// Declared here so that cobra gives it no -v, which kubectl keeps for its log level.
	root.Flags().Bool("version", false, "Print the plugin's version and exit (as kubectl nhc version).")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	p.config.AddFlags(root.PersistentFlags())

	explainCmd := &cobra.Command{Use: "explain", Short: "Explain a node's or a NodeHealthCheck's remediation, as the operator decides it", Args: noUnknownCommand, RunE: helpOrUnknown}
	explainCmd.PersistentFlags().StringVarP(&p.output, "output", "o", "",
		"Output format: empty for text, or json or yaml (apiVersion "+explain.APIVersion+", documented in docs/kubectl-nhc.md).")
	explainCmd.PersistentFlags().StringVar(&p.leaseNamespace, "lease-namespace", lease.DefaultNamespace,
		"The operator's --lease-namespace. Unset: as the operator publishes it, else the default.")
	explainCmd.PersistentFlags().DurationVar(&p.returnGrace, "returning-node-grace", health.DefaultReturnGrace,
		"The operator's --returning-node-grace. Unset: as the operator publishes it, else the default.")
	explainCmd.AddCommand(
		&cobra.Command{Use: "node <name>", Short: "Why a node is (not) being remediated, by every NodeHealthCheck, and how its last remediations ended",
			Args: oneName, ValidArgsFunction: p.complete(&corev1NodeList), RunE: p.explain},
		&cobra.Command{Use: "nhc <name>", Aliases: []string{"nodehealthcheck"}, Short: "A NodeHealthCheck's budget, nodes, blockers, remediations and outcomes",
			Args: oneName, ValidArgsFunction: p.complete(&nhcList), RunE: p.explain},
	)

	requestCmd := &cobra.Command{Use: "request", Short: "Ask for a remediation", Args: noUnknownCommand, RunE: helpOrUnknown}
	requestNode := &cobra.Command{Use: "node <name>", Short: "Ask for a node's remediation now (where a NodeHealthCheck that selects it sets spec.allowRemediationRequests)",
		Args: oneName, ValidArgsFunction: p.complete(&corev1NodeList), RunE: p.request}
	requestNode.Flags().StringVar(&p.dryRun, "dry-run", explain.DryRunNone,
		`Must be "none", "client", or "server". If client strategy, only print the patch that would be sent, without sending it. If server strategy, submit a server-side request without persisting the annotation.`)
	requestNode.Flags().Lookup("dry-run").NoOptDefVal = explain.DryRunClient
	requestCmd.AddCommand(requestNode)

	versionCmd := &cobra.Command{Use: "version", Short: "Print the plugin's version", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kubectl-nhc %s\n", pluginVersion())
			return err
		}}
	root.AddCommand(explainCmd, requestCmd, versionCmd)
	return root
}

// noUnknownCommand refuses the arguments of a command that only groups others: they name no
// command it has.
func noUnknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
	}
	return nil
}

// helpOrUnknown prints a group's help (kubectl does so for `kubectl config`, with exit code 0).
func helpOrUnknown(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// oneName wants exactly one name.
func oneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError{fmt.Errorf("%q wants one name, got %d arguments", cmd.CommandPath(), len(args))}
	}
	return nil
}

// client builds a client from kubectl's flags, for the operator's and Kubernetes' kinds.
func (p *plugin) client() (client.Client, error) {
	cfg, err := p.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := remediationv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	return c, nil
}

func (p *plugin) explain(cmd *cobra.Command, args []string) error {
	switch p.output {
	case explain.OutputText, explain.OutputJSON, explain.OutputYAML:
	default:
		return usageError{fmt.Errorf("unknown output format %q: want json or yaml, or none for text", p.output)}
	}
	c, err := p.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	o := explain.Options{LeaseNamespace: p.leaseNamespace, ReturnGrace: p.returnGrace, RemovalHold: health.DefaultRemovalHold, Output: p.output}
	set := func(name string) bool { return cmd.Flags().Changed(name) }
	o.SettingsFrom = settingsFrom(ctx, c, &o, set("lease-namespace"), set("returning-node-grace"))
	if cmd.Name() == "node" {
		return explain.Node(ctx, c, args[0], o, cmd.OutOrStdout())
	}
	return explain.NHC(ctx, c, args[0], o, cmd.OutOrStdout())
}

func (p *plugin) request(cmd *cobra.Command, args []string) error {
	switch p.dryRun {
	case explain.DryRunNone, explain.DryRunClient, explain.DryRunServer:
	default:
		return usageError{fmt.Errorf(`invalid dry-run value %q: must be "none", "client", or "server"`, p.dryRun)}
	}
	c, err := p.client()
	if err != nil {
		return err
	}
	return explain.RequestWith(cmd.Context(), c, args[0], explain.RequestOptions{DryRun: p.dryRun}, cmd.OutOrStdout())
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

// The lists a name's completion reads.
var (
	corev1NodeList = namesOf{list: func() client.ObjectList { return &corev1.NodeList{} }}
	nhcList        = namesOf{list: func() client.ObjectList { return &remediationv1alpha1.NodeHealthCheckList{} }}
)

// namesOf lists the names of one kind.
type namesOf struct{ list func() client.ObjectList }

// complete completes the one name a command takes from the cluster (kubectl runs it through
// kubectl_complete-nhc, see docs/kubectl-nhc.md).
func (p *plugin) complete(kind *namesOf) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := p.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list := kind.list()
		if err := c.List(cmd.Context(), list); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok {
				names = append(names, obj.GetName())
			}
			return nil
		})
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

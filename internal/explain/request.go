package explain

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// The dry-run modes of RequestOptions.DryRun: kubectl's --dry-run values, with kubectl's meaning.
const (
	// DryRunNone writes the request (the default, "" too).
	DryRunNone = "none"
	// DryRunClient prints the patch that would be sent and sends nothing.
	DryRunClient = "client"
	// DryRunServer sends the patch with dryRun=All: the API server checks and admits it, and
	// writes nothing.
	DryRunServer = "server"
)

// RequestOptions are kubectl nhc request's options.
type RequestOptions struct {
	// Now is the time of the request (zero: now).
	Now time.Time
	// DryRun is DryRunNone (or ""), DryRunClient or DryRunServer.
	DryRun string
}

// Request asks for the node's remediation at now (kubectl nhc request node <name>): it sets the
// node's remediation.medik8s.io/request-remediation annotation to now, as kubectl annotate would,
// and says which NodeHealthChecks select the node and whether they take requests.
func Request(ctx context.Context, c client.Client, name string, now time.Time, w io.Writer) error {
	return RequestWith(ctx, c, name, RequestOptions{Now: now}, w)
}

// RequestWith is Request with options: with o.DryRun it writes nothing, as kubectl annotate
// --dry-run would not.
func RequestWith(ctx context.Context, c client.Client, name string, o RequestOptions, w io.Writer) error {
	var dryRun []client.PatchOption
	suffix := ""
	switch o.DryRun {
	case "", DryRunNone:
	case DryRunClient:
		suffix = " (dry run)"
	case DryRunServer:
		suffix, dryRun = " (server dry run)", []client.PatchOption{client.DryRunAll}
	default:
		return fmt.Errorf("invalid dry-run value %q: want %s, %s or %s", o.DryRun, DryRunNone, DryRunClient, DryRunServer)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return fmt.Errorf("getting node %s: %w", name, err)
	}
	value := o.Now.UTC().Format(time.RFC3339)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, remediationv1alpha1.RemediationRequestAnnotation, value)
	if o.DryRun != DryRunClient {
		if err := c.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch), dryRun...); err != nil {
			return fmt.Errorf("annotating node %s: %w", name, err)
		}
	}
	fmt.Fprintf(w, "Requested the remediation of node %s at %s (annotation %s).%s\n", name, value, remediationv1alpha1.RemediationRequestAnnotation, suffix)
	if suffix != "" {
		fmt.Fprintf(w, "Nothing was written; the merge patch: %s\n", patch)
	}
	list := &remediationv1alpha1.NodeHealthCheckList{}
	if err := c.List(ctx, list); err != nil {
		fmt.Fprintf(w, "Which NodeHealthChecks select it is not known: %v\n", err)
		return nil
	}
	selecting := 0
	for i := range list.Items {
		nhc := &list.Items[i]
		if !selects(nhc, node) {
			continue
		}
		selecting++
		if nhc.Spec.AllowRemediationRequests {
			fmt.Fprintf(w, "NodeHealthCheck %s selects it and takes requests: it counts the node as unhealthy until a remediation answers the request.\n", nhc.Name)
		} else {
			fmt.Fprintf(w, "NodeHealthCheck %s selects it but ignores requests: spec.allowRemediationRequests is not set.\n", nhc.Name)
		}
	}
	if selecting == 0 {
		fmt.Fprintln(w, "No NodeHealthCheck selects it: nothing acts on the request.")
	}
	fmt.Fprintf(w, "See kubectl nhc explain node %s.\n", name)
	return nil
}

// selects reports whether the NodeHealthCheck's selector selects the node (a selector that does not
// parse selects nothing, as in the operator).
func selects(nhc *remediationv1alpha1.NodeHealthCheck, node *corev1.Node) bool {
	sel, err := metav1.LabelSelectorAsSelector(&nhc.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(node.Labels))
}

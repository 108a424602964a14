// Package explain answers "why was this node (not) remediated?" from the live cluster, with the
// operator's own decision code: it gathers each NodeHealthCheck's snapshot with targets.Gatherer
// (reading the API server directly instead of a cache) and decides with health.Decide, so it cannot
// disagree with the operator about the same state. What only the operator's process knows (the
// upgrade gate's signals, a conflicting MachineHealthCheck) is taken from what the operator
// reports in status. kubectl nhc explain (cmd/kubectl-nhc) prints it.
//
// Files: explain.go answers for a node and for a NodeHealthCheck; gather.go reads the cluster the
// way the operator does (Gather); print.go prints a snapshot's decision, its own verdicts, never
// judged again; report.go gives the same answer as data (NodeExplanation,
// NodeHealthCheckExplanation: kubectl nhc explain -o json|yaml, docs/kubectl-nhc.md); partial.go
// notes what the user may not read; request.go asks for a remediation.
package explain

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/outcome"
)

// Node explains every NodeHealthCheck's view of the node to w, with how its last remediations
// ended (also for a node that no longer exists, or that a NodeHealthCheck no longer selects), as
// text or, with o.Output, as a NodeExplanation.
// Kinds the user may not read but NodeHealthChecks and Nodes are taken as absent, and the answer
// says so (partial).
func Node(ctx context.Context, userClient client.Client, name string, o Options, w io.Writer) error {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	c := &partial{Client: userClient}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); apierrors.IsNotFound(err) {
		return goneNode(ctx, c, name, err, o, w)
	} else if err != nil {
		return fmt.Errorf("getting node %s: %w", name, err)
	}
	checks, err := Gather(ctx, c, o)
	if err != nil {
		return err
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.LeaseNamespace, Name: nodelease.Name(name)}, lease); apierrors.IsNotFound(err) {
		lease = nil
	} else if err != nil {
		return fmt.Errorf("getting the node's lease: %w", err)
	}

	etcd := etcdVerdict(ctx, c, checks, node)
	if o.Output != OutputText {
		return write(w, o.Output, nodeExplanation(c, checks, node, lease, etcd, o))
	}

	p := &printer{w: w}
	p.line(0, "Node %s", name)
	for _, cond := range node.Status.Conditions {
		p.line(1, "%s=%s since %s", cond.Type, cond.Status, stamp(cond.LastTransitionTime.Time))
	}
	var selecting, others []string
	for _, ch := range checks {
		s := ch.Snapshot
		if _, ok := s.SelectedNode(name); !ok {
			if len(s.CRs[name]) == 0 {
				if len(outcome.Of(s.Stored.Status.RemediationOutcomes, name)) > 0 {
					p.line(0, "")
					p.line(0, "NodeHealthCheck %s: does not select the node", s.Stored.Name)
					explainOutcomes(p, s, name)
					continue
				}
				others = append(others, s.Stored.Name)
				continue
			}
		}
		selecting = append(selecting, s.Stored.Name)
		p.line(0, "")
		explainNode(p, s, node, lease, etcd, o)
	}
	p.line(0, "")
	if len(selecting) == 0 {
		p.line(0, "No NodeHealthCheck selects node %s.", name)
	}
	if len(others) > 0 {
		p.line(0, "Not selected by: %s", strings.Join(others, ", "))
	}
	forbiddenNote(p, c)
	settingsNote(p, o)
	return p.err
}

// goneNode answers for a node that does not exist: how its last remediations ended, as each
// NodeHealthCheck recorded them, or notFound when none did.
func goneNode(ctx context.Context, c *partial, name string, notFound error, o Options, w io.Writer) error {
	checks, err := Gather(ctx, c, o)
	if err != nil {
		return err
	}
	if o.Output != OutputText {
		x := goneNodeExplanation(c, checks, name, o)
		if len(x.NodeHealthChecks) == 0 {
			return fmt.Errorf("getting node %s: %w", name, notFound)
		}
		return write(w, o.Output, x)
	}
	p := &printer{w: w}
	found := false
	for _, ch := range checks {
		s := ch.Snapshot
		if len(outcome.Of(s.Stored.Status.RemediationOutcomes, name)) == 0 {
			continue
		}
		if !found {
			p.line(0, "Node %s does not exist", name)
		}
		found = true
		p.line(0, "")
		p.line(0, "NodeHealthCheck %s", s.Stored.Name)
		explainOutcomes(p, s, name)
	}
	if !found {
		return fmt.Errorf("getting node %s: %w", name, notFound)
	}
	forbiddenNote(p, c)
	return p.err
}

// NHC summarises one NodeHealthCheck to w: its budget, every node it lists or holds back, and why,
// as text or, with o.Output, as a NodeHealthCheckExplanation.
// Kinds the user may not read but NodeHealthChecks and Nodes are taken as absent, and the answer
// says so (partial).
func NHC(ctx context.Context, userClient client.Client, name string, o Options, w io.Writer) error {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	c := &partial{Client: userClient}
	checks, err := Gather(ctx, c, o)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(checks, func(ch Check) bool { return ch.Snapshot.Stored.Name == name })
	if i < 0 {
		return fmt.Errorf("NodeHealthCheck %s not found", name)
	}
	s := checks[i].Snapshot
	if o.Output != OutputText {
		return write(w, o.Output, nhcExplanation(s, c, o))
	}
	d := s.Decision
	p := &printer{w: w}
	p.line(0, "NodeHealthCheck %s%s", name, modeNote(s))
	sel, _ := metav1.LabelSelectorAsSelector(&s.NHC.Spec.Selector)
	p.line(1, "selector: %s", selectorText(sel))
	p.line(1, "budget: %d of %d selected nodes healthy, %d required (%s)", d.Healthy, d.Observed, d.MinHealthy, budgetSpec(s.NHC))
	if s.Problem != nil {
		p.line(1, "disabled (%s): %s", s.Problem.Reason, s.Problem.Message)
	}
	for _, b := range s.Input.Blockers {
		p.line(1, "blocker: %s: %s", b.Reason, b.Message)
	}
	for _, ov := range s.Overlaps {
		p.line(1, "overlap: NodeHealthCheck %s selects %d of the same nodes", ov.NHC, ov.Nodes)
	}
	if !d.Next.IsZero() {
		p.line(1, "next decision change: %s", stamp(d.Next))
	}
	if len(d.Nodes) == 0 && len(s.Orphans) == 0 {
		p.line(1, "every selected node is healthy")
	}
	for _, nd := range d.Nodes {
		switch nd.Action {
		case health.Skip:
			p.line(1, "node %s: held back (%s): %s", nd.Name, nd.SkipReason, nd.SkipMessage)
		case health.Wait:
			p.line(1, "node %s: %s; unhealthy at %s", nd.Name, nd.Health.Reason, stamp(nd.Health.Next))
		default:
			p.line(1, "node %s: %s (%s)", nd.Name, actionText(nd.Action, s.DryRun()), nd.Health.Reason)
		}
		if !nd.Health.Requested.IsZero() {
			p.line(2, "remediation requested at %s", stamp(nd.Health.Requested))
		}
		explainCRs(&printer{w: w, indent: 1}, s, nd.Name)
	}
	for _, refused := range s.RefusedInputs() {
		if refused.Annotation == remediationv1alpha1.RemediationRequestAnnotation {
			p.line(1, "node %s: remediation request %s ignored: %s", refused.Node, refused.Value, refused.Why)
		} else {
			p.line(1, "node %s: annotation %s=%s %s and is ignored", refused.Node, refused.Annotation, refused.Value, refused.Why)
		}
	}
	for _, orphan := range s.Orphans {
		p.line(1, "node %s: no longer selected; its CRs are removed", orphan)
	}
	if counts := outcomeCounts(s.Stored.Status.RemediationOutcomes); counts != "" {
		p.line(1, "recorded outcomes (the last %d of each of %d node(s); kubectl nhc explain node <name> shows them): %s",
			remediationv1alpha1.MaxOutcomesPerNode, len(s.Stored.Status.RemediationOutcomes), counts)
	}
	for _, c := range s.Stored.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			p.line(1, "reported condition %s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if st := s.Stored.Status; st.ObservedNodes != nil && st.HealthyNodes != nil && (*st.ObservedNodes != d.Observed || *st.HealthyNodes != d.Healthy) {
		p.line(1, "note: the operator last reported %d of %d healthy (at %s); this decision is newer", *st.HealthyNodes, *st.ObservedNodes, lastUpdate(st))
	}
	forbiddenNote(p, c)
	settingsNote(p, o)
	return p.err
}

package targets

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/outcome"
)

// unselectedListed reads the nodes that the stored status lists with remediation CRs and the
// NodeHealthCheck does not select, as the cache holds them (nil: the node does not exist): how
// their remediations end depends on whether they still exist and since when (internal/outcome).
// The selected nodes are read anyway. Nodes come from the node store where it can tell, otherwise
// through Reader.
func (g *Gatherer) unselectedListed(ctx context.Context, stored *remediationv1alpha1.NodeHealthCheck, selected []*corev1.Node) (map[string]*corev1.Node, error) {
	isSelected := map[string]bool{}
	for _, n := range selected {
		isSelected[n.Name] = true
	}
	var out map[string]*corev1.Node
	for _, u := range stored.Status.UnhealthyNodes {
		if len(u.Remediations) == 0 || isSelected[u.Name] {
			continue
		}
		if out == nil {
			out = map[string]*corev1.Node{}
		}
		if g.Nodes != nil {
			if n, exists, known := g.Nodes.Node(u.Name); known {
				if exists {
					out[u.Name] = n
				} else {
					out[u.Name] = nil
				}
				continue
			}
		}
		n := &corev1.Node{}
		switch err := g.Reader.Get(ctx, client.ObjectKey{Name: u.Name}, n); {
		case apierrors.IsNotFound(err):
			out[u.Name] = nil
		case err != nil:
			return nil, fmt.Errorf("getting node %s: %w", u.Name, err)
		default:
			out[u.Name] = n
		}
	}
	return out, nil
}

// OutcomeNode returns what the outcome of the named node's remediation depends on, as the snapshot
// shows the node: whether it exists and since when, whether it is selected, and whether it is
// simply healthy (selected, with no decision to make: no unhealthy condition matches and no CR is
// left). It knows the selected nodes and those the stored status lists with CRs; any other node
// counts as gone.
func (s *Snapshot) OutcomeNode(name string) outcome.Node {
	if n, ok := s.SelectedNode(name); ok {
		_, decided := s.Node(name)
		return outcome.Node{Exists: true, Created: n.CreationTimestamp.Time, Selected: true, Healthy: !decided}
	}
	if n := s.unselected[name]; n != nil {
		return outcome.Node{Exists: true, Created: n.CreationTimestamp.Time}
	}
	return outcome.Node{}
}

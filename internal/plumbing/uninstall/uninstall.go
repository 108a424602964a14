package uninstall

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/lease"
)

// Options say where the uninstalled release's Leases are.
type Options struct {
	// LeaderElectionNamespace and LeaderElectionID name the leader election Lease.
	LeaderElectionNamespace, LeaderElectionID string
	// LeaderPrefix starts the holder identity of each of the release's managers: their pods' names
	// ("<deployment>-"), which the manager's identity starts with ("<pod>_<uuid>").
	LeaderPrefix string
	// LeaseNamespace holds the node Leases (--lease-namespace).
	LeaseNamespace string
	// Release is the release's identity (the managers' --release-identity), which labels the node
	// Leases its managers created (lease.ReleaseLabel).
	Release string
}

// Plan is what to delete.
type Plan struct {
	// Leader is set when the leader election Lease is the release's to delete.
	Leader bool
	// NodeLeases are the release's node Leases held by NodeHealthChecks, by name.
	NodeLeases []string
	// Kept says why a Lease is left, one line each.
	Kept []string
}

// Decide says which Leases the uninstalled release leaves and may delete. The leader election Lease
// is the release's when one of its managers holds it or no one does. While another holder leads
// through it (the public operator, which uses the same Lease name, installed in the same namespace)
// that operator is running and renews the node Leases of NodeHealthChecks: nothing is deleted. Else
// the node Leases held by a NodeHealthCheck ("NodeHealthCheck-<name>") and labelled with the
// release's identity (lease.ReleaseLabel) are deleted: with the release gone no one renews or
// releases them, and a running remediation's Lease would keep other medik8s operators off the node
// until it expires. The lease namespace is shared: a NodeHealthCheck's Lease labelled by another
// release, or by none (the public operator's, or one an earlier version of this operator created
// and never renewed since), may be renewed by an operator still running, and is left (to expire, if
// no one renews it). Other holders' node Leases are left.
func Decide(leader *coordinationv1.Lease, nodeLeases []coordinationv1.Lease, leaderPrefix, release string, now time.Time) Plan {
	var p Plan
	if leader != nil {
		holder := lease.HolderOf(leader)
		switch {
		case holder == "" || strings.HasPrefix(holder, leaderPrefix):
			p.Leader = true
		case !expired(leader, now):
			p.Kept = append(p.Kept, fmt.Sprintf("Lease %s/%s: %s leads through it, and renews the node Leases of NodeHealthChecks", leader.Namespace, leader.Name, holder))
			for _, l := range nodeLeases {
				if lease.IsNodeHealthCheckHolder(lease.HolderOf(&l)) {
					p.Kept = append(p.Kept, fmt.Sprintf("Lease %s/%s: held by %s, while %s leads", l.Namespace, l.Name, lease.HolderOf(&l), holder))
				}
			}
			return p
		default:
			p.Kept = append(p.Kept, fmt.Sprintf("Lease %s/%s: held by %s, not this release's managers", leader.Namespace, leader.Name, holder))
		}
	}
	for _, l := range nodeLeases {
		holder := lease.HolderOf(&l)
		if !lease.IsNodeHealthCheckHolder(holder) {
			continue
		}
		switch owner := lease.ReleaseOf(&l); {
		case release != "" && owner == release:
			p.NodeLeases = append(p.NodeLeases, l.Name)
		case owner == "":
			p.Kept = append(p.Kept, fmt.Sprintf("Lease %s/%s: held by %s without the label %s (the public operator's, or an earlier version's): left to expire", l.Namespace, l.Name, holder, lease.ReleaseLabel))
		default:
			p.Kept = append(p.Kept, fmt.Sprintf("Lease %s/%s: held by %s for release %s", l.Namespace, l.Name, holder, owner))
		}
	}
	return p
}

// expired reports whether a leader election Lease has run out: no renewal within its duration.
func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return !now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// Run gathers the Leases, decides and deletes, printing each step to out. A Lease that changed
// since it was read (someone writes it: not a Lease left behind) or is gone already is not an
// error; each delete is conditional on the version decided on.
func Run(ctx context.Context, c client.Client, o Options, now time.Time, out io.Writer) error {
	var leader *coordinationv1.Lease
	l := &coordinationv1.Lease{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: o.LeaderElectionNamespace, Name: o.LeaderElectionID}, l); {
	case err == nil:
		leader = l
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting the leader election Lease %s/%s: %w", o.LeaderElectionNamespace, o.LeaderElectionID, err)
	}
	nodeLeases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, nodeLeases, client.InNamespace(o.LeaseNamespace)); err != nil {
		return fmt.Errorf("listing the node Leases in %s: %w", o.LeaseNamespace, err)
	}
	p := Decide(leader, nodeLeases.Items, o.LeaderPrefix, o.Release, now)
	for _, k := range p.Kept {
		fmt.Fprintf(out, "Kept %s\n", k)
	}
	var doomed []*coordinationv1.Lease
	if p.Leader {
		doomed = append(doomed, leader)
	}
	for i := range nodeLeases.Items {
		for _, name := range p.NodeLeases {
			if nodeLeases.Items[i].Name == name {
				doomed = append(doomed, &nodeLeases.Items[i])
			}
		}
	}
	for _, l := range doomed {
		err := c.Delete(ctx, l, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
		switch {
		case err == nil:
			fmt.Fprintf(out, "Deleted Lease %s/%s (holder %q)\n", l.Namespace, l.Name, lease.HolderOf(l))
		case apierrors.IsNotFound(err):
			fmt.Fprintf(out, "Lease %s/%s is gone already\n", l.Namespace, l.Name)
		case apierrors.IsConflict(err):
			fmt.Fprintf(out, "Kept Lease %s/%s: it changed since it was read, someone writes it\n", l.Namespace, l.Name)
		default:
			return fmt.Errorf("deleting Lease %s/%s: %w", l.Namespace, l.Name, err)
		}
	}
	return nil
}

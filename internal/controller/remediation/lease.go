package remediation

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// DefaultLeaseNamespace is where node leases live unless configured otherwise; other operators that
// touch nodes (maintenance, upgrades) coordinate through the same leases.
const DefaultLeaseNamespace = "medik8s-leases"

const (
	// singleTemplateLeaseStep is the step duration a lease assumes for a single remediationTemplate,
	// which has no timeout.
	singleTemplateLeaseStep = 10 * time.Minute
	// leaseBuffer is added to the step duration so the lease outlives the step it covers.
	leaseBuffer = time.Minute
	// leaseOverdueFactor: a remediation holding its lease for this many lease durations is timed out.
	leaseOverdueFactor = 3
)

// leaseName is the name of a node's lease.
func leaseName(node string) string { return "node-" + node }

// leaseHolder is this NodeHealthCheck's holder identity.
func leaseHolder(nhc *remediationv1alpha1.NodeHealthCheck) string {
	return "NodeHealthCheck-" + nhc.Name
}

// leaseDuration is the lease duration for a step: its timeout (or 10 minutes for a single
// template) plus a minute.
func leaseDuration(stepTimeout time.Duration) time.Duration {
	if stepTimeout <= 0 {
		stepTimeout = singleTemplateLeaseStep
	}
	return stepTimeout + leaseBuffer
}

// leaseResult says whether the node's lease is ours.
type leaseResult struct {
	held bool
	// otherHolder and expires describe a valid lease of someone else.
	otherHolder string
	expires     time.Time
	// overdue is true when we have held the lease for more than leaseOverdueFactor durations.
	overdue bool
	// renewAt is when to renew our lease.
	renewAt time.Time
}

// takeLease acquires or renews the node's lease for this NodeHealthCheck with the step's duration.
// stepStart is when the covered step started: the lease's acquireTime, from which it becomes overdue.
func (r *Reconciler) takeLease(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, duration time.Duration, stepStart, now time.Time) (leaseResult, error) {
	holder := leaseHolder(nhc)
	seconds := int32(duration / time.Second)
	lease := &coordinationv1.Lease{}
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: r.leaseNamespace(), Name: leaseName(node)}, lease)
	switch {
	case apierrors.IsNotFound(err):
		n := &corev1.Node{}
		if err := r.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return leaseResult{}, fmt.Errorf("getting node %s for its lease: %w", node, err)
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.leaseNamespace(), Name: leaseName(node),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds,
				AcquireTime: &metav1.MicroTime{Time: stepStart}, RenewTime: &metav1.MicroTime{Time: now}},
		}
		if err := r.createInLeaseNamespace(ctx, lease); err != nil {
			return leaseResult{}, err
		}
		return leaseResult{held: true, renewAt: now.Add(duration / 3)}, nil
	case err != nil:
		return leaseResult{}, fmt.Errorf("getting lease of node %s: %w", node, err)
	}

	current := ""
	if lease.Spec.HolderIdentity != nil {
		current = *lease.Spec.HolderIdentity
	}
	var renewed, acquired time.Time
	if lease.Spec.RenewTime != nil {
		renewed = lease.Spec.RenewTime.Time
	}
	if lease.Spec.AcquireTime != nil {
		acquired = lease.Spec.AcquireTime.Time
	}
	var held time.Duration
	if lease.Spec.LeaseDurationSeconds != nil {
		held = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	expires := renewed.Add(held)
	if current != holder && current != "" && now.Before(expires) {
		return leaseResult{otherHolder: current, expires: expires}, nil
	}

	// Ours (or free, or expired): renew when a third of the duration has passed, or the step changed.
	res := leaseResult{held: true, renewAt: now.Add(duration / 3)}
	stepChanged := current == holder && !acquired.Equal(stepStart) && stepStart.After(acquired)
	if current == holder && !stepChanged && now.Before(renewed.Add(duration/3)) && held == duration {
		res.renewAt = renewed.Add(duration / 3)
		res.overdue = now.After(acquired.Add(leaseOverdueFactor * duration))
		return res, nil
	}
	if current != holder || stepChanged {
		acquired = stepStart
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, &seconds
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &metav1.MicroTime{Time: acquired}, &metav1.MicroTime{Time: now}
	if err := r.Update(ctx, lease); err != nil {
		return leaseResult{}, fmt.Errorf("renewing lease of node %s: %w", node, err)
	}
	res.overdue = now.After(acquired.Add(leaseOverdueFactor * duration))
	return res, nil
}

// releaseLease deletes the node's lease if this NodeHealthCheck holds it.
func (r *Reconciler) releaseLease(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string) error {
	lease := &coordinationv1.Lease{}
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: r.leaseNamespace(), Name: leaseName(node)}, lease)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting lease of node %s: %w", node, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != leaseHolder(nhc) {
		return nil
	}
	if err := r.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing lease of node %s: %w", node, err)
	}
	return nil
}

// createInLeaseNamespace creates the lease, and the lease namespace first if it is missing.
func (r *Reconciler) createInLeaseNamespace(ctx context.Context, lease *coordinationv1.Lease) error {
	err := r.Create(ctx, lease)
	if apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.leaseNamespace()}}
		if err := r.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating lease namespace %s: %w", ns.Name, err)
		}
		err = r.Create(ctx, lease)
	}
	if err != nil {
		return fmt.Errorf("creating lease %s/%s: %w", lease.Namespace, lease.Name, err)
	}
	return nil
}

func (r *Reconciler) leaseNamespace() string {
	if r.LeaseNamespace == "" {
		return DefaultLeaseNamespace
	}
	return r.LeaseNamespace
}

func (r *Reconciler) reader() client.Reader {
	if r.APIReader == nil {
		return r.Client
	}
	return r.APIReader
}

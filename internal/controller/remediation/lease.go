package remediation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	nodelease "github.com/medik8s/node-healthcheck/internal/lease"
	"github.com/medik8s/node-healthcheck/internal/targets"
)

func leaseHolder(nhc *remediationv1alpha1.NodeHealthCheck) string { return nodelease.Holder(nhc.Name) }

// leaseResult says whether the node's lease is ours.
type leaseResult struct {
	held bool
	// otherHolder and expires describe a lease of someone else (expires zero: no expiry known);
	// retryAt is when to look again.
	otherHolder string
	expires     time.Time
	retryAt     time.Time
	// renewAt is when to renew our lease.
	renewAt time.Time
}

// takeLease acquires or renews the node's lease (as read: nil when there is none) for this
// NodeHealthCheck with the step's duration. stepStart is when the covered step started: the lease's
// acquireTime, from which it becomes overdue.
func (r *Reconciler) takeLease(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, lease *coordinationv1.Lease,
	duration time.Duration, stepStart, now time.Time) (leaseResult, error) {
	holder := leaseHolder(nhc)
	seconds := nodelease.Seconds(duration)
	if lease == nil {
		n := &corev1.Node{}
		if err := r.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return leaseResult{}, fmt.Errorf("getting node %s for its lease: %w", node, err)
		}
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.leaseNamespace(), Name: nodelease.Name(node), Labels: r.releaseLabels(nil),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds,
				AcquireTime: &metav1.MicroTime{Time: stepStart}, RenewTime: &metav1.MicroTime{Time: now}},
		}
		if err := r.createInLeaseNamespace(ctx, lease); err != nil {
			return leaseResult{}, err
		}
		r.leaseShown(ctx, lease)
		return leaseResult{held: true, renewAt: now.Add(duration / 3)}, nil
	}
	if other, expires := nodelease.ForeignHold(lease, holder, now); other {
		retryAt := expires
		if retryAt.IsZero() {
			retryAt = now.Add(nodelease.Recheck)
		}
		return leaseResult{otherHolder: *lease.Spec.HolderIdentity, expires: expires, retryAt: retryAt}, nil
	}
	// Ours (or free, or expired): renew when a third of the duration has passed, or the step changed.
	renewal := nodelease.Renew(lease, holder, duration, stepStart, now)
	res := leaseResult{held: true, renewAt: renewal.RenewAt}
	if !renewal.Write {
		return res, nil
	}
	lease = lease.DeepCopy()
	lease.Labels = r.releaseLabels(lease.Labels)
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, &seconds
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &metav1.MicroTime{Time: renewal.AcquireTime}, &metav1.MicroTime{Time: now}
	if err := r.Update(ctx, lease); err != nil {
		return leaseResult{}, fmt.Errorf("renewing lease of node %s: %w", node, err)
	}
	r.leaseShown(ctx, lease)
	return res, nil
}

// releaseLabels returns a lease's labels with this release's identity (lease.ReleaseLabel) added when
// it has none (a lease an earlier version created is labelled at its next renewal). A lease another
// release labelled keeps its label: an uninstall may leave a lease to expire, but never deletes one
// another release may be renewing. Unchanged without a Release.
func (r *Reconciler) releaseLabels(labels map[string]string) map[string]string {
	if _, labelled := labels[nodelease.ReleaseLabel]; r.Release == "" || labelled {
		return labels
	}
	out := make(map[string]string, len(labels)+1)
	maps.Copy(out, labels)
	out[nodelease.ReleaseLabel] = r.Release
	return out
}

// holdLease is takeLease on the lease as read, and, when that view was stale (the write conflicted,
// the lease the view lacked exists, or the lease it showed is gone), once more on the lease read
// around the cache.
func (r *Reconciler) holdLease(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, lease *coordinationv1.Lease,
	duration time.Duration, stepStart, now time.Time) (leaseResult, error) {
	res, err := r.takeLease(ctx, nhc, node, lease, duration, stepStart, now)
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && (lease == nil || !apierrors.IsNotFound(err)) {
		return res, err
	}
	if lease, err = r.getLease(ctx, node, true); err != nil {
		return leaseResult{}, err
	}
	return r.takeLease(ctx, nhc, node, lease, duration, stepStart, now)
}

// leaseCacheWait bounds how long a write of a lease waits for the lease cache to show it; the cache
// sees the operator's own writes within milliseconds.
const leaseCacheWait = 2 * time.Second

// leaseShown waits in the background until the lease cache shows the lease as written (awaitLease).
// Until then, every read of the lease through the
// cache (getLease: a renewal, a release, the next start's look) waits for it, so no decision of this
// process acts on the lease cache behind its own write, while the start goes on to create its CR and
// the reconcile ends without waiting. The decisions' own reading of leases (targets: holds) looks
// only for other holders' leases: a lag behind our write shows at worst a lease another holder
// released, which holds a decision back, never lets one act. The wait outlives the reconcile
// (its context's cancellation is not its own), bounded by leaseCacheWait. (Until issue 36 the start
// waited for the cache before creating its CR: at 25,000 nodes the 1% failure's starts, 32 at a
// time, each waited for a watch round trip of the loaded API server there.)
func (r *Reconciler) leaseShown(ctx context.Context, lease *coordinationv1.Lease) {
	done := make(chan struct{})
	key := client.ObjectKeyFromObject(lease)
	r.leaseWrites.Store(key, done)
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(done)
		defer r.leaseWrites.CompareAndDelete(key, done)
		r.awaitLease(ctx, lease, false)
	}()
}

// awaitLease waits until the lease cache shows the lease as written (or gone, when deleted): for a
// write in the background (leaseShown), so that a renewal is not repeated and a lease just taken is
// found when the node recovers at once; for a delete in the reconcile, so that its next decision
// does not see the lease as still held. Where the cache lags longer, the next write conflicts and
// re-reads the lease around the cache (holdLease, deleteLease).
func (r *Reconciler) awaitLease(ctx context.Context, lease *coordinationv1.Lease, deleted bool) {
	seen := &coordinationv1.Lease{}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, leaseCacheWait, true, func(ctx context.Context) (bool, error) {
		err := r.Leases.Get(ctx, client.ObjectKeyFromObject(lease), seen)
		if deleted {
			return apierrors.IsNotFound(err) || (err == nil && seen.UID != lease.UID), nil
		}
		return err == nil && seen.UID == lease.UID && seen.ResourceVersion == lease.ResourceVersion, nil
	})
}

// release releases the node's lease (releaseLease) when its remediation ended, as far as the
// snapshot can tell: while a CR of a kind that cannot be read now may run on the node
// (Snapshot.LeaseUnknown), the lease is kept. Unknown is not free: a lease released under a
// remediation that still runs lets node maintenance, or another NodeHealthCheck, act on a node
// mid-fence. The lease is remembered as one that may be left (leftLeases), so releaseLeftLeases
// releases it once the kind can be read again and no CR is seen on the node.
func (r *Reconciler) release(ctx context.Context, snap *targets.Snapshot, node string) error {
	if why := snap.LeaseUnknown(node); why != "" {
		ctrl.LoggerFrom(ctx).V(1).Info("Keeping the node's lease: its remediation state is unknown", "node", node, "why", why)
		r.leftLeases.Store(string(snap.Stored.UID)+"/"+node, node)
		return nil
	}
	return r.releaseLease(ctx, snap.Stored, node)
}

// releaseLease deletes the node's lease if this NodeHealthCheck holds it. A release that fails is
// remembered and retried by releaseLeftLeases once the node has no CR left.
func (r *Reconciler) releaseLease(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string) error {
	key := string(nhc.UID) + "/" + node
	err := r.deleteLease(ctx, nhc, node)
	if err != nil {
		r.leftLeases.Store(key, node)
	} else {
		r.leftLeases.Delete(key)
	}
	return err
}

// deleteLease deletes the node's lease, as the lease cache shows it, if this NodeHealthCheck holds
// it; when the cache was behind (the delete conflicted), it decides again on the lease read around
// the cache.
func (r *Reconciler) deleteLease(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string) error {
	err := r.deleteLeaseAsRead(ctx, nhc, node, false)
	if apierrors.IsConflict(err) {
		err = r.deleteLeaseAsRead(ctx, nhc, node, true)
	}
	return err
}

func (r *Reconciler) deleteLeaseAsRead(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, node string, fresh bool) error {
	lease, err := r.getLease(ctx, node, fresh)
	if err != nil || lease == nil {
		return err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != leaseHolder(nhc) {
		return nil
	}
	if err := r.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing lease of node %s: %w", node, err)
	}
	r.awaitLease(ctx, lease, true)
	return nil
}

// releaseLeftLeases releases the leases this NodeHealthCheck may still hold for nodes whose
// remediation ended: those whose release failed, and, on the first reconcile of each
// NodeHealthCheck in this process, every lease it holds (a previous leader may have stopped between
// deleting a node's CRs and releasing its lease). busy tells the nodes whose lease is in use, or may
// be: a node whose remediation cannot be seen now (Snapshot.LeaseUnknown) is busy, and its lease
// stays remembered until it can be.
func (r *Reconciler) releaseLeftLeases(ctx context.Context, nhc *remediationv1alpha1.NodeHealthCheck, busy func(node string) bool) error {
	if _, swept := r.sweptLeases.LoadOrStore(nhc.UID, true); !swept {
		leases := &coordinationv1.LeaseList{}
		if err := r.Leases.List(ctx, leases, client.InNamespace(r.leaseNamespace())); err != nil {
			r.sweptLeases.Delete(nhc.UID)
			return fmt.Errorf("listing node leases: %w", err)
		}
		for _, l := range leases.Items {
			if ptr.Deref(l.Spec.HolderIdentity, "") != leaseHolder(nhc) || len(l.OwnerReferences) == 0 || l.OwnerReferences[0].Kind != "Node" {
				continue
			}
			r.leftLeases.Store(string(nhc.UID)+"/"+l.OwnerReferences[0].Name, l.OwnerReferences[0].Name)
		}
	}
	prefix := string(nhc.UID) + "/"
	var errs []error
	r.leftLeases.Range(func(k, v any) bool {
		if node := v.(string); strings.HasPrefix(k.(string), prefix) && !busy(node) {
			errs = append(errs, r.releaseLease(ctx, nhc, node))
		}
		return true
	})
	return errors.Join(errs...)
}

// createInLeaseNamespace creates the lease, and the lease namespace first if it is missing. The
// namespace is created once however many starts find it missing at once (a mass failure on a
// cluster where it does not exist yet): a start whose lease create was refused before another
// start created the namespace only creates its lease again. Where the namespace exists, nothing
// but the lease is written.
func (r *Reconciler) createInLeaseNamespace(ctx context.Context, lease *coordinationv1.Lease) error {
	gen := r.leaseNamespaceGen.Load()
	err := r.Create(ctx, lease)
	if apierrors.IsNotFound(err) {
		if err := r.ensureLeaseNamespace(ctx, gen); err != nil {
			return err
		}
		err = r.Create(ctx, lease)
	}
	if err != nil {
		return fmt.Errorf("creating lease %s/%s: %w", lease.Namespace, lease.Name, err)
	}
	return nil
}

// ensureLeaseNamespace creates the lease namespace unless it was created since seen, the
// generation read before the lease create that found it missing.
func (r *Reconciler) ensureLeaseNamespace(ctx context.Context, seen uint64) error {
	r.leaseNamespaceMu.Lock()
	defer r.leaseNamespaceMu.Unlock()
	if r.leaseNamespaceGen.Load() != seen {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.leaseNamespace()}}
	if err := r.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating lease namespace %s: %w", ns.Name, err)
	}
	r.leaseNamespaceGen.Add(1)
	return nil
}

func (r *Reconciler) leaseNamespace() string {
	if r.LeaseNamespace == "" {
		return nodelease.DefaultNamespace
	}
	return r.LeaseNamespace
}

// NewLeaseCache returns a cache of the Leases in the lease namespace, and only there, added to the
// manager: renewals then read no lease from the API server, and the operator needs no right to
// list or watch Leases elsewhere (the kubelets' heartbeats in kube-node-lease alone would be
// thousands of updates a minute on a large cluster). It informs on Leases once first read. Both
// controllers read it: the status writer reports what holds a node back from the same leases the
// remediation controller takes.
func NewLeaseCache(mgr ctrl.Manager, namespace string) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: leaseMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}}, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, fmt.Errorf("creating the node lease cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the node lease cache: %w", err)
	}
	return c, nil
}

// leaseMapper maps Leases, and nothing else, for the lease cache. A cache of one namespace asks its
// mapper on every read whether the kind is namespaced; the manager's discovery-backed mapper answers
// by asking each API group in turn, which allocates an error for each group that does not serve the
// kind: the lease waits after every write (awaitLease) made that 12% of the manager's allocations at
// 5,000 nodes. It maps Lease and LeaseList; a read of another kind through the lease cache fails
// with a no-match error.
func leaseMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{coordinationv1.SchemeGroupVersion})
	m.Add(coordinationv1.SchemeGroupVersion.WithKind("Lease"), meta.RESTScopeNamespace)
	// A list is mapped by its own kind (apiutil.IsObjectNamespaced): without it, every List of the
	// lease cache fails (the sweep of leases left by an earlier run, releaseLeftLeases).
	m.Add(coordinationv1.SchemeGroupVersion.WithKind("LeaseList"), meta.RESTScopeNamespace)
	return m
}

// getLease reads the node's lease; nil when there is none. fresh reads around the cache, otherwise
// the lease cache is read.
func (r *Reconciler) getLease(ctx context.Context, node string, fresh bool) (*coordinationv1.Lease, error) {
	key := client.ObjectKey{Namespace: r.leaseNamespace(), Name: nodelease.Name(node)}
	reader := r.Leases
	if fresh {
		reader = r.APIReader
	} else if pending, writing := r.leaseWrites.Load(key); writing {
		select { // this process's last write of it, until the cache shows it (leaseShown)
		case <-pending.(chan struct{}):
		case <-ctx.Done():
			return nil, fmt.Errorf("getting lease of node %s: %w", node, ctx.Err())
		}
	}
	lease := &coordinationv1.Lease{}
	err := reader.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting lease of node %s: %w", node, err)
	}
	return lease, nil
}

package uninstall

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/medik8s/node-healthcheck/internal/lease"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC)
	leaderLease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "node-healthcheck", Name: "e1f13584.medik8s.io"},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		return l
	}
	node := func(name, holder, release string) coordinationv1.Lease {
		l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "medik8s-leases", Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &metav1.MicroTime{Time: now}}}
		if release != "" {
			l.Labels = map[string]string{lease.ReleaseLabel: release}
		}
		return l
	}
	// The lease namespace is shared: this release's leases, a maintenance operator's, another
	// release's, and the public operator's (the same holder identities, no label).
	const release = "nhc.nhc"
	nodes := []coordinationv1.Lease{node("node-worker-0", "NodeHealthCheck-workers", release), node("node-worker-1", "node-maintenance", release),
		node("node-worker-2", "NodeHealthCheck-other", release), node("node-worker-3", "NodeHealthCheck-workers", "other.nhc"),
		node("node-worker-4", "NodeHealthCheck-workers", "")}
	ours := []string{"node-worker-0", "node-worker-2"}
	const prefix = "nhc-node-healthcheck-"
	for _, tt := range []struct {
		name       string
		leader     *coordinationv1.Lease
		wantLeader bool
		wantNodes  []string
		wantKept   int
	}{
		{name: "held by a manager of the release, renewed just now", leader: leaderLease("nhc-node-healthcheck-7d9f-abcde_0f1e", 0), wantLeader: true,
			wantNodes: ours, wantKept: 2},
		{name: "released", leader: leaderLease("", time.Minute), wantLeader: true, wantNodes: ours, wantKept: 2},
		{name: "no leader Lease", wantNodes: ours, wantKept: 2},
		{name: "another operator leads through the same Lease: nothing is deleted", leader: leaderLease("node-healthcheck-operator-5c-xyz_1", 5*time.Second),
			wantKept: 5},
		{name: "another operator's Lease ran out: it is left, the release's node Leases go", leader: leaderLease("node-healthcheck-operator-5c-xyz_1", 15*time.Second),
			wantNodes: ours, wantKept: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.leader, nodes, prefix, release, now)
			if p.Leader != tt.wantLeader {
				t.Errorf("leader deleted %v, want %v", p.Leader, tt.wantLeader)
			}
			if !slices.Equal(p.NodeLeases, tt.wantNodes) {
				t.Errorf("node Leases %v, want %v", p.NodeLeases, tt.wantNodes)
			}
			if len(p.Kept) != tt.wantKept {
				t.Errorf("kept %q, want %d lines", p.Kept, tt.wantKept)
			}
		})
	}
}

// Without a release identity no node Lease is the release's.
func TestDecideWithoutARelease(t *testing.T) {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "medik8s-leases", Name: "node-a"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("NodeHealthCheck-workers")}}
	if p := Decide(nil, []coordinationv1.Lease{l}, "nhc-", "", time.Now()); len(p.NodeLeases) != 0 {
		t.Errorf("node Leases %v deleted without a release identity", p.NodeLeases)
	}
}

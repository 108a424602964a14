package uninstall

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	node := func(name, holder string) coordinationv1.Lease {
		return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "medik8s-leases", Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &metav1.MicroTime{Time: now}}}
	}
	nodes := []coordinationv1.Lease{node("node-worker-0", "NodeHealthCheck-workers"), node("node-worker-1", "node-maintenance"), node("node-worker-2", "NodeHealthCheck-other")}
	const prefix = "nhc-node-healthcheck-"
	for _, tt := range []struct {
		name       string
		leader     *coordinationv1.Lease
		wantLeader bool
		wantNodes  []string
		wantKept   int
	}{
		{name: "held by a manager of the release, renewed just now", leader: leaderLease("nhc-node-healthcheck-7d9f-abcde_0f1e", 0), wantLeader: true,
			wantNodes: []string{"node-worker-0", "node-worker-2"}},
		{name: "released", leader: leaderLease("", time.Minute), wantLeader: true, wantNodes: []string{"node-worker-0", "node-worker-2"}},
		{name: "no leader Lease", wantNodes: []string{"node-worker-0", "node-worker-2"}},
		{name: "another operator leads through the same Lease: nothing is deleted", leader: leaderLease("node-healthcheck-operator-5c-xyz_1", 5*time.Second),
			wantKept: 3},
		{name: "another operator's Lease ran out: it is left, the node Leases go", leader: leaderLease("node-healthcheck-operator-5c-xyz_1", 15*time.Second),
			wantNodes: []string{"node-worker-0", "node-worker-2"}, wantKept: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.leader, nodes, prefix, now)
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

package localcluster

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Simulated nodes record transitions as a kubelet and the node lifecycle controller do: a condition
// keeps its lastTransitionTime while its status stays (heartbeats do not move it), and gets the time
// of the change when its status changes, also when a node comes back Ready after it was Unknown. The
// operator reads it for how long a node has been unhealthy and when it came back.
func TestSimulatedNodesRecordTransitions(t *testing.T) {
	c, _ := startSimulated(t)
	ctx := context.Background()
	k, err := client.New(c.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddNode(ctx, k, "transitions", nil); err != nil {
		t.Fatal(err)
	}
	ready := func(want corev1.ConditionStatus) func() bool {
		return func() bool { s, err := Ready(ctx, k, "transitions"); return err == nil && s == want }
	}
	eventually(t, "the node to be Ready", ready(corev1.ConditionTrue))
	first := readyCondition(ctx, t, k)
	created := first.LastTransitionTime

	if err := SetHeartbeats(ctx, k, "transitions", false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node to be Unknown", ready(corev1.ConditionUnknown))
	lost := readyCondition(ctx, t, k).LastTransitionTime
	if !lost.After(created.Time) {
		t.Fatalf("Ready=Unknown since %s, not after Ready=True since %s", lost, created)
	}
	back := time.Now().Truncate(time.Second)
	if err := SetHeartbeats(ctx, k, "transitions", true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node to be Ready again", ready(corev1.ConditionTrue))
	returned := readyCondition(ctx, t, k)
	if returned.LastTransitionTime.Before(&metav1.Time{Time: back}) {
		t.Fatalf("Ready=True again since %s: before heartbeats resumed at %s (the creation time is %s)", returned.LastTransitionTime, back, created)
	}
	// Heartbeats keep it: kwok renews the node's Lease (the heartbeat the node lifecycle controller
	// reads) after the Ready condition was read, and the condition's lastTransitionTime stays.
	read := time.Now()
	eventually(t, "a heartbeat after the node is Ready again", func() bool {
		l := &coordinationv1.Lease{}
		err := k.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: "transitions"}, l)
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(read)
	})
	if again := readyCondition(ctx, t, k); !again.LastTransitionTime.Equal(&returned.LastTransitionTime) {
		t.Fatalf("lastTransitionTime moved from %s to %s while the node stayed Ready", returned.LastTransitionTime, again.LastTransitionTime)
	}
}

func readyCondition(ctx context.Context, t *testing.T, k client.Client) corev1.NodeCondition {
	t.Helper()
	n := &corev1.Node{}
	if err := k.Get(ctx, client.ObjectKey{Name: "transitions"}, n); err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	t.Fatal("the node has no Ready condition")
	return corev1.NodeCondition{}
}

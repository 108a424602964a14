package notify

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

func TestNotifyCoalescesAndNeverBlocks(t *testing.T) {
	var s Subscribers
	s.Notify() // nobody subscribed: nothing happens
	a, b := s.Subscribe(), s.Subscribe()
	s.Notify()
	s.Notify() // a second change before anyone read: coalesced
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("pending events %d and %d, want one each", len(a), len(b))
	}
	<-a
	s.Notify()
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("after a read and a change: %d and %d pending, want one each", len(a), len(b))
	}
}

func TestSourceHandsEveryValueToTheHandler(t *testing.T) {
	ch := make(chan struct{}, 1)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	calls := make(chan client.Object, 2)
	h := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		calls <- obj
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "every"}}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch <- struct{}{} // a change before the start is pending
	if err := Source(ch, h).Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, ok := (<-calls).(*remediationv1alpha1.NodeHealthCheck); !ok {
		t.Fatal("the handler must get an empty NodeHealthCheck, as from Notify")
	}
	req, _ := q.Get()
	if req.Name != "every" {
		t.Fatalf("enqueued %v, want the mapped request", req)
	}
	q.Done(req)
	ch <- struct{}{} // a later change
	<-calls
	if req, _ := q.Get(); req.Name != "every" {
		t.Fatalf("enqueued %v, want the mapped request", req)
	}
}

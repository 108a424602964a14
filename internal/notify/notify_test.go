package notify

import "testing"

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

package targets

import (
	"errors"
	"testing"
	"time"
)

// The records of nodes a NodeHealthCheck no longer has, and of a NodeHealthCheck that is gone, are
// dropped; others stay.
func TestRefusalsForgetNodesAndNodeHealthChecks(t *testing.T) {
	r := &Refusals{}
	now := time.Now()
	refused := errors.New("forbidden")
	for _, node := range []string{"kept", "gone"} {
		r.Record("nhc-a", node, "TestRemediation", refused, now)
	}
	r.Record("nhc-b", "gone", "TestRemediation", refused, now)
	r.Forget("nhc-a", func(node string) bool { return node == "kept" })
	if r.Len() != 2 {
		t.Fatalf("%d records after Forget, want nhc-a's kept and nhc-b's", r.Len())
	}
	r.ForgetNHC("nhc-b")
	r.ForgetNHC("nhc-a")
	if r.Len() != 0 {
		t.Fatalf("%d records after ForgetNHC, want none", r.Len())
	}
}

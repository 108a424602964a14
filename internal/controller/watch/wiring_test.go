package watch

import (
	"strings"
	"testing"
)

// A controller that lacks a dependency is refused at setup, with every missing one named.
func TestRequire(t *testing.T) {
	if err := Require("nhc", Dependency{"Client", true}, Dependency{"Clock", true}); err != nil {
		t.Fatalf("every dependency set: %v", err)
	}
	err := Require("remediation", Dependency{"Client", true}, Dependency{"Leases", false}, Dependency{"Wiring", false})
	if err == nil || !strings.Contains(err.Error(), "remediation controller") || !strings.Contains(err.Error(), "Leases, Wiring not set") {
		t.Fatalf("err = %v, want the controller and its missing Leases and Wiring named", err)
	}
}

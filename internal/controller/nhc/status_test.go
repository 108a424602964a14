package nhc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/medik8s/node-healthcheck/internal/health"
)

func TestOverlapMessage(t *testing.T) {
	if msg := overlapMessage([]health.Overlap{{NHC: "everything", Nodes: 2}, {NHC: "zone-2", Nodes: 1}}); !strings.Contains(msg, "everything (2 node(s)), zone-2 (1 node(s))") {
		t.Errorf("message %q does not name them with their counts", msg)
	}

	var many []health.Overlap
	for i := range maxOverlapsNamed + 3 {
		many = append(many, health.Overlap{NHC: fmt.Sprintf("nhc-%02d", i), Nodes: 1})
	}
	if msg := overlapMessage(many); !strings.Contains(msg, "and 3 more") || strings.Contains(msg, fmt.Sprintf("nhc-%02d", maxOverlapsNamed)) {
		t.Errorf("message %q names more than %d NodeHealthChecks", msg, maxOverlapsNamed)
	}
}

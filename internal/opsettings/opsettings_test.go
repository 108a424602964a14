package opsettings

import (
	"strings"
	"testing"
	"time"
)

func TestDataRoundTrip(t *testing.T) {
	s := Settings{LeaseNamespace: "leases", ReturningNodeGrace: 20 * time.Second, MaxClockSkew: 10 * time.Second, Version: "0.1.0"}
	got, err := Parse(s.Data())
	if err != nil || got != s {
		t.Fatalf("Parse(Data()) = %+v, %v; want %+v", got, err, s)
	}
	if _, err := Parse(map[string]string{}); err == nil || !strings.Contains(err.Error(), "not published") {
		t.Fatalf("an empty ConfigMap: %v, want: not published", err)
	}
	bad := s.Data()
	bad[KeyReturningNodeGrace] = "a minute"
	if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), KeyReturningNodeGrace) {
		t.Fatalf("a bad duration: %v, want an error naming %s", err, KeyReturningNodeGrace)
	}
}

package remediation

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestMemoryReportsOnceWhileTheValueLasts(t *testing.T) {
	var m memory
	const nhc = types.UID("uid-a")
	if !m.first(nhc, "n1", onceLease, "maintenance") || m.first(nhc, "n1", onceLease, "maintenance") {
		t.Fatal("a report is made once per value")
	}
	if !m.first(nhc, "n1", onceEtcd, "maintenance") || !m.first(nhc, "n2", onceLease, "maintenance") || !m.first("uid-b", "n1", onceLease, "maintenance") {
		t.Error("kinds, nodes and NodeHealthChecks are told apart")
	}
	// A node that writes a new value each time costs at most onceValues per kind.
	for i := range 1000 {
		m.first(nhc, "n1", onceMachineLink, fmt.Sprintf("claim-%d", i))
	}
	if _, _, entries := m.size(); entries != onceValues+4 {
		t.Errorf("%d entries, want %d", entries, onceValues+4)
	}
	if m.first(nhc, "n1", onceMachineLink, "claim-999") {
		t.Error("the newest values are kept")
	}
	if !m.first(nhc, "n1", onceMachineLink, "claim-0") {
		t.Error("a value that came back after onceValues others is reported again")
	}
}

func TestMemoryForgetsNodesAndNodeHealthChecks(t *testing.T) {
	var m memory
	now := time.Now()
	m.first("uid-a", "kept", onceLease, "x")
	m.first("uid-a", "gone", onceOld, "cr-1")
	m.first("uid-b", "shared", onceOld, "cr-2")
	m.first("uid-a", "shared", onceOld, "cr-3")
	m.record("uid-a", "gone", ownWrite{writeDelete, "cr-1"}, now)
	if !m.made("uid-a", "gone", ownWrite{writeDelete, "cr-1"}, now) || m.made("uid-a", "gone", ownWrite{writeTimedOut, "cr-1"}, now) {
		t.Fatal("writes are remembered by verb and uid")
	}
	if m.made("uid-a", "gone", ownWrite{writeDelete, "cr-1"}, now.Add(ownWritesTTL+time.Second)) {
		t.Error("a write older than ownWritesTTL is forgotten")
	}
	uncounted := m.forget("uid-a", func(node string) bool { return node == "kept" })
	if fmt.Sprint(uncounted) != "[gone]" {
		t.Errorf("nodes no NodeHealthCheck counted old CRs of: %v, want [gone] (uid-b still counts shared)", uncounted)
	}
	if nhcs, nodes, _ := m.size(); nhcs != 2 || nodes != 2 {
		t.Errorf("%d NodeHealthChecks and %d nodes left, want 2 and 2", nhcs, nodes)
	}
	if !m.first("uid-a", "gone", onceOld, "cr-1") {
		t.Error("a node forgotten is reported again")
	}
	m.forgetNHC("uid-a")
	if uncounted := m.forgetNHC("uid-b"); fmt.Sprint(uncounted) != "[shared]" {
		t.Errorf("nodes uncounted when the last NodeHealthCheck goes: %v, want [shared]", uncounted)
	}
	if nhcs, nodes, entries := m.size(); nhcs+nodes+entries != 0 {
		t.Errorf("%d NodeHealthChecks, %d nodes, %d entries left, want none", nhcs, nodes, entries)
	}
	if m.track("a", "uid-1") != "" || m.track("a", "uid-1") != "" || m.track("a", "uid-2") != "uid-1" {
		t.Error("track tells a NodeHealthCheck created again under its name")
	}
	if uid, ok := m.uidOf("a"); !ok || uid != "uid-2" {
		t.Errorf("uidOf(a) = %q, %v", uid, ok)
	}
	if _, ok := m.uidOf("a"); ok {
		t.Error("uidOf forgets the name")
	}
}

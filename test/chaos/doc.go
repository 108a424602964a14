// Package chaos drives the operator's real controllers (controller.ConfigureManager and
// controller.SetupWithManager, as cmd/manager wires them, on a fake clock) on a real kube-apiserver
// through random histories, and checks safety and liveness invariants from the API after every
// step: node failures, recoveries and flapping, relabelling, the exclusion label, template changes,
// pauses, dry-run, repair-budget resets, clock skew, a maintenance operator's leases, forged status,
// forged Machine claims, injected API errors and conflicts, watches dropped, API server restarts, a
// leader killed right after a CR create, manager restarts and leader changes, alone or several in a
// burst.
//
// Everything lives in the package's tests; see docs/chaos.md for what it checks and how to replay
// a run (make chaos CHAOS_SEED=... CHAOS_STEPS=...).
package chaos

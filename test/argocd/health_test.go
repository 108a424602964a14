package argocd

import (
	"strings"
	"testing"
)

// nhc is a NodeHealthCheck as Argo CD's cache holds it: generation and observedGeneration are
// int64, as the API server's JSON decodes to.
func nhc(generation int64, status map[string]any) map[string]any {
	obj := map[string]any{
		"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck",
		"metadata": map[string]any{"name": "workers", "generation": generation},
		"spec":     map[string]any{"minHealthy": "51%"},
	}
	if status != nil {
		obj["status"] = status
	}
	return obj
}

func disabled(status, reason, message string) []any {
	return []any{map[string]any{"type": "Disabled", "status": status, "reason": reason, "message": message}}
}

// Every rule of the mapping on hand-written objects; the e2e suite runs the states the operator
// reaches on statuses it wrote.
func TestHealthMapping(t *testing.T) {
	for _, tt := range []struct {
		name string
		obj  map[string]any
		want Health
	}{
		{"no status yet", nhc(1, nil), Health{Progressing, "Waiting for the operator's first status"}},
		{"a status without a phase", nhc(1, map[string]any{"observedGeneration": int64(1)}), Health{Progressing, "Waiting for the operator's first status"}},
		{"a spec not evaluated yet", nhc(3, map[string]any{"phase": "Enabled", "observedGeneration": int64(2)}),
			Health{Progressing, "Waiting for the operator to evaluate generation 3 (the status is of generation 2)"}},
		{"a spec not evaluated yet, while disabled", nhc(3, map[string]any{"phase": "Disabled", "observedGeneration": int64(2),
			"conditions": disabled("True", "RemediationTemplateNotFound", "gone")}), Health{Progressing, "Waiting for the operator to evaluate generation 3 (the status is of generation 2)"}},
		{"enabled", nhc(2, map[string]any{"phase": "Enabled", "observedGeneration": int64(2), "reason": "",
			"conditions": disabled("False", "NodeHealthCheckEnabled", "")}), Health{Healthy, ""}},
		{"disabled", nhc(2, map[string]any{"phase": "Disabled", "observedGeneration": int64(2), "reason": "template missing",
			"conditions": disabled("True", "RemediationTemplateNotFound", "Remediation template not found")}),
			Health{Degraded, "Disabled: RemediationTemplateNotFound: Remediation template not found"}},
		{"disabled without a message", nhc(2, map[string]any{"phase": "Disabled", "observedGeneration": int64(2),
			"conditions": disabled("True", "InvalidConfiguration", "")}), Health{Degraded, "Disabled: InvalidConfiguration"}},
		{"phase Disabled without the condition", nhc(2, map[string]any{"phase": "Disabled", "reason": "why"}), Health{Degraded, "why"}},
		{"paused", nhc(2, map[string]any{"phase": "Paused", "observedGeneration": int64(2), "reason": "paused by pause requests"}),
			Health{Suspended, "paused by pause requests"}},
		{"remediating", nhc(2, map[string]any{"phase": "Remediating", "observedGeneration": int64(2), "reason": "remediating node w-1"}),
			Health{Progressing, "remediating node w-1"}},
		// The public operator writes no observedGeneration.
		{"the public operator's status", nhc(5, map[string]any{"phase": "Enabled"}), Health{Healthy, ""}},
		{"a phase it does not know", nhc(1, map[string]any{"phase": "Resting", "observedGeneration": int64(1)}), Health{Unknown, "Unknown phase Resting"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Evaluate(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The script runs as Argo CD runs one from argocd-cm: without Lua's string library, and only a
// table with a status Argo CD knows is a health.
func TestRunAsArgoCD(t *testing.T) {
	if _, err := Run(`return {status = string.upper("healthy")}`, nhc(1, nil)); err == nil || !strings.Contains(err.Error(), "string") {
		t.Errorf("a script using the string library: got %v, want an error", err)
	}
	if _, err := Run(`return {status = "Fine"}`, nhc(1, nil)); err == nil {
		t.Error("a status Argo CD does not know is accepted")
	}
	if _, err := Run(`return "Healthy"`, nhc(1, nil)); err == nil {
		t.Error("a script returning no table is accepted")
	}
	if h, err := Run(`return {status = "Healthy", message = obj.metadata.name .. " " .. obj.metadata.generation}`, nhc(7, nil)); err != nil || h.Message != "workers 7" {
		t.Errorf("obj: got %+v, %v", h, err)
	}
}

package upgrade

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

func obj(kind, name string, generation int64, spec, status map[string]any) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"spec": spec, "status": status}}
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetGeneration(generation)
	return u
}

func conditions(kv ...string) []any {
	var out []any
	for i := 0; i < len(kv); i += 2 {
		out = append(out, map[string]any{"type": kv[i], "status": kv[i+1], "message": "Working towards 4.20.1"})
	}
	return out
}

func progressing(since string) []any {
	return []any{map[string]any{"type": "Progressing", "status": "True", "message": "Working towards 4.20.1", "lastTransitionTime": since}}
}

func TestClusterVersionProgressing(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status map[string]any
		want   bool
		since  time.Time
	}{
		{"no status", nil, false, time.Time{}},
		{"available", map[string]any{"conditions": conditions("Available", "True", "Progressing", "False")}, false, time.Time{}},
		{"upgrading, no time", map[string]any{"conditions": conditions("Available", "True", "Progressing", "True")}, true, time.Time{}},
		{"upgrading since the condition changed", map[string]any{"conditions": progressing("2026-11-22T10:00:00Z"),
			"history": []any{map[string]any{"state": "Partial", "startedTime": "2026-11-22T09:59:58Z"}}}, true, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)},
		{"a new update started while progressing", map[string]any{"conditions": progressing("2026-11-22T10:00:00Z"),
			"history": []any{map[string]any{"state": "Partial", "startedTime": "2026-11-22T11:30:00Z"}, map[string]any{"state": "Partial", "startedTime": "2026-11-22T10:00:00Z"}}},
			true, time.Date(2026, 11, 22, 11, 30, 0, 0, time.UTC)},
		{"a completed update does not restart it", map[string]any{"conditions": progressing("2026-11-22T10:00:00Z"),
			"history": []any{map[string]any{"state": "Completed", "startedTime": "2026-11-22T11:30:00Z"}}}, true, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cv := obj("ClusterVersion", "version", 1, nil, tt.status)
			s := ClusterVersionProgressing(&cv)
			if (s != nil) != tt.want {
				t.Fatalf("got %+v", s)
			}
			if s != nil && (!strings.Contains(s.Message, "Working towards 4.20.1") || s.Object.Name != "version" || s.Explicit) {
				t.Errorf("signal %+v", s)
			}
			if s != nil && !s.Since.Equal(tt.since) {
				t.Errorf("since %s, want %s", s.Since, tt.since)
			}
		})
	}
}

func mhc(name string, conds ...map[string]any) unstructured.Unstructured {
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		list = append(list, c)
	}
	return obj("MachineHealthCheck", name, 1, map[string]any{"unhealthyConditions": list}, nil)
}

func TestClassifyMachineHealthChecks(t *testing.T) {
	termination := mhc("machine-api-termination-handler", map[string]any{"type": "Terminating", "status": "True", "timeout": "0s"})
	custom := mhc("workers", map[string]any{"type": "Ready", "status": "False", "timeout": "300s"})
	tests := []struct {
		name         string
		mhcs         []unstructured.Unstructured
		conflict     string
		terminatingS corev1.ConditionStatus
	}{
		{"none", nil, "", ""},
		{"the termination handler alone is tolerated", []unstructured.Unstructured{termination}, "", corev1.ConditionTrue},
		{"a termination handler without status means True", []unstructured.Unstructured{mhc("t", map[string]any{"type": "Terminating"})}, "", corev1.ConditionTrue},
		{"a custom one conflicts", []unstructured.Unstructured{custom}, "ns/workers", ""},
		{"a termination handler with more conditions conflicts", []unstructured.Unstructured{mhc("t", map[string]any{"type": "Terminating", "status": "True"},
			map[string]any{"type": "Ready", "status": "Unknown"})}, "ns/t", ""},
		{"two conflict, even if one is the termination handler", []unstructured.Unstructured{termination, custom}, "ns/machine-api-termination-handler, ns/workers", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClassifyMachineHealthChecks(tt.mhcs)
			if got.Terminating != tt.terminatingS || (tt.conflict == "") != (got.Conflict == "") || !strings.Contains(got.Conflict, tt.conflict) {
				t.Errorf("got %+v", got)
			}
		})
	}
}

func TestClusterAPIRollout(t *testing.T) {
	tests := []struct {
		name       string
		generation int64
		spec       map[string]any
		status     map[string]any
		want       string
	}{
		{"settled v1beta1", 2, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(2), "replicas": int64(3), "updatedReplicas": int64(3)}, ""},
		{"settled v1beta2", 2, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(2), "replicas": int64(3), "upToDateReplicas": int64(3),
			"conditions": conditions("RollingOut", "False")}, ""},
		{"no status yet", 1, map[string]any{"replicas": int64(3)}, nil, "has not observed"},
		{"spec changed", 3, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(2), "replicas": int64(3), "updatedReplicas": int64(3)}, "has not observed"},
		{"RollingOut", 2, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(2), "replicas": int64(3), "upToDateReplicas": int64(3),
			"conditions": conditions("RollingOut", "True")}, "RollingOut"},
		{"old machines", 2, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(2), "replicas": int64(3), "updatedReplicas": int64(1)}, "1 of 3 replicas are up to date"},
		{"v1beta2 counts win", 2, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(2), "replicas": int64(3), "upToDateReplicas": int64(2), "updatedReplicas": int64(3)}, "2 of 3"},
		{"surge", 2, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(2), "replicas": int64(4), "updatedReplicas": int64(3)}, "4 replicas exist, 3 desired"},
		{"replicas default to 1", 2, map[string]any{}, map[string]any{"observedGeneration": int64(2), "replicas": int64(1), "updatedReplicas": int64(1)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := obj("MachineDeployment", "md", tt.generation, tt.spec, tt.status)
			got := ClusterAPIRollout(&o)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	settled := obj("KubeadmControlPlane", "cp", 1, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(1), "replicas": int64(3), "updatedReplicas": int64(3)})
	rolling := obj("MachineDeployment", "md", 1, map[string]any{"replicas": int64(3)}, map[string]any{"observedGeneration": int64(1), "replicas": int64(3), "updatedReplicas": int64(2)})
	if s := ClusterAPIRollouts([]unstructured.Unstructured{settled}); s != nil {
		t.Errorf("settled objects: %+v", s)
	}
	s := ClusterAPIRollouts([]unstructured.Unstructured{settled, rolling})
	if len(s) != 1 || s[0].Object.Name != "md" || s[0].Message != "Cluster API rolls out MachineDeployment ns/md (2 of 3 replicas are up to date)" || !s[0].Since.IsZero() || s[0].Explicit {
		t.Errorf("rolling: %+v", s)
	}
}

func TestClusterAPIRolloutsAreOneSignalEach(t *testing.T) {
	began := "2026-11-22T10:00:00Z"
	withTime := func(kv ...string) []any {
		out := conditions(kv...)
		for _, c := range out {
			c.(map[string]any)["lastTransitionTime"] = began
		}
		return out
	}
	spec := map[string]any{"replicas": int64(3)}
	objs := []unstructured.Unstructured{
		obj("MachineDeployment", "b", 1, spec, map[string]any{"observedGeneration": int64(1), "replicas": int64(3), "upToDateReplicas": int64(3),
			"conditions": withTime("RollingOut", "True")}),
		obj("MachineDeployment", "a", 1, spec, map[string]any{"observedGeneration": int64(1), "replicas": int64(4), "updatedReplicas": int64(3),
			"v1beta2": map[string]any{"conditions": withTime("RollingOut", "True")}}),
		obj("KubeadmControlPlane", "cp", 1, spec, map[string]any{"observedGeneration": int64(1), "replicas": int64(3), "updatedReplicas": int64(1),
			"conditions": withTime("Ready", "True", "MachinesSpecUpToDate", "False")}),
		obj("KubeadmControlPlane", "settled", 1, spec, map[string]any{"observedGeneration": int64(1), "replicas": int64(3), "updatedReplicas": int64(3),
			"conditions": withTime("MachinesSpecUpToDate", "True")}),
	}
	s := ClusterAPIRollouts(objs)
	want := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if len(s) != 3 {
		t.Fatalf("want three signals, got %+v", s)
	}
	for i, name := range []string{"cp", "a", "b"} { // by kind, namespace and name
		if s[i].Object.Name != name || !s[i].Since.Equal(want) || !strings.Contains(s[i].Message, "ns/"+name+" (") {
			t.Errorf("signal %d: %+v, want %s since %s", i, s[i], name, want)
		}
	}
}

func TestPauseObjects(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "pause"}, Data: map[string]string{"reason": "upgrading to 1.38"}}
	if s := PauseConfigMap(cm); !strings.Contains(s.Message, "ops/pause exists: upgrading to 1.38") || s.Object.Kind != "ConfigMap" || !s.Explicit {
		t.Errorf("ConfigMap signal %+v", s)
	}

	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-time.Hour))
	renewed := metav1.NewMicroTime(now.Add(-5 * time.Minute))
	forever := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "pause", CreationTimestamp: created}}
	if s, until := PauseLease(forever, now); s == nil || !until.IsZero() || !s.Explicit || !s.Since.Equal(created.Time) {
		t.Errorf("a Lease without a duration pauses until deleted: %+v %s", s, until)
	}
	held := &coordinationv1.Lease{ObjectMeta: forever.ObjectMeta, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("tool"), LeaseDurationSeconds: ptr.To[int32](600), RenewTime: &renewed}}
	s, until := PauseLease(held, now)
	if s == nil || !until.Equal(now.Add(5*time.Minute)) || !strings.Contains(s.Message, "held by tool until 2026-11-22T12:05:00Z") {
		t.Errorf("a renewed Lease pauses until renewTime+duration: %+v %s", s, until)
	}
	if s, _ := PauseLease(held, now.Add(5*time.Minute)); s != nil {
		t.Errorf("an expired Lease must not pause: %+v", s)
	}
	unrenewed := &coordinationv1.Lease{ObjectMeta: forever.ObjectMeta, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](600)}}
	if s, _ := PauseLease(unrenewed, now); s != nil {
		t.Errorf("a Lease created an hour ago for 10 minutes and never renewed has expired: %+v", s)
	}
}

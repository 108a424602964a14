package decodeguard_test

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"

	"github.com/medik8s/node-healthcheck/internal/controller/decodeguard"
)

// goodNHC is a complete, valid NodeHealthCheck; each case below breaks one field of a copy.
const goodNHC = `{
 "apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck",
 "metadata": {"name": "nhc", "uid": "u-1", "resourceVersion": "7"},
 "spec": {
  "selector": {"matchLabels": {"role": "worker"}},
  "unhealthyConditions": [{"type": "Ready", "status": "False", "duration": "300s"}],
  "minHealthy": "51%",
  "escalatingRemediations": [{"remediationTemplate": {"kind": "T", "name": "t"}, "order": 1, "timeout": "5m"}],
  "pauseRequests": ["upgrade"],
  "healthyDelay": "-1s",
  "stormCooldownDuration": "10m"
 },
 "status": {
  "observedNodes": 3, "healthyNodes": 2, "phase": "Enabled", "lastUpdateTime": "2026-01-02T03:04:05Z",
  "unhealthyNodes": [{"name": "n", "healthyDelayed": false, "conditionsHealthyTimestamp": "2026-01-02T03:04:05Z",
    "remediations": [{"resource": {"kind": "T", "name": "n"}, "started": "2026-01-02T03:04:05Z", "timedOut": "2026-01-02T03:05:05Z"}]}],
  "conditions": [{"type": "Disabled", "status": "False", "reason": "R", "message": "", "lastTransitionTime": "2026-01-02T03:04:05Z"}]
 }
}`

// typedDecode decodes the object's JSON as the typed client does: through the scheme's codecs.
func typedDecode(u *unstructured.Unstructured) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := remediationv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	_, _, err = serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode(data, nil, &remediationv1alpha1.NodeHealthCheck{})
	return err
}

// object returns goodNHC with the value at path (dot-separated; a number indexes a list) replaced by
// raw JSON.
func object(t *testing.T, path, raw string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(goodNHC)); err != nil {
		t.Fatal(err)
	}
	if path == "" {
		return u
	}
	// Numbers as the API server's unstructured decoding keeps them: int64 when whole and in range.
	v := &unstructured.Unstructured{}
	if err := v.UnmarshalJSON([]byte(`{"kind":"X","apiVersion":"v1","v":` + raw + `}`)); err != nil {
		t.Fatalf("value %s: %v", raw, err)
	}
	value := v.Object["v"]
	parts := strings.Split(path, ".")
	var cur any = u.Object
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = value
			} else {
				cur = c[p]
			}
		case []any:
			idx := int(p[0] - '0')
			if last {
				c[idx] = value
			} else {
				cur = c[idx]
			}
		default:
			t.Fatalf("path %s: %T at %s", path, cur, p)
		}
	}
	return u
}

func TestDecodeGood(t *testing.T) {
	for _, tc := range []struct{ name, path, raw string }{
		{"as is", "", ""},
		{"largest int32 minHealthy", "spec.minHealthy", "2147483647"},
		{"large order still fits int", "spec.escalatingRemediations.0.order", "9007199254740993"},
		{"unknown field ignored", "spec.newerField", `{"x": 1}`},
		{"null duration", "spec.healthyDelay", "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := object(t, tc.path, tc.raw)
			nhc, err := decodeguard.Decode(u)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if err := typedDecode(u); err != nil {
				t.Fatalf("the typed client refuses what Decode accepts: %v", err)
			}
			if nhc.Name != "nhc" || nhc.UID != "u-1" || nhc.ResourceVersion != "7" || nhc.Kind != "" {
				t.Errorf("metadata: got %+v, %+v", nhc.ObjectMeta, nhc.TypeMeta)
			}
		})
	}
	nhc, err := decodeguard.Decode(object(t, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := nhc.Spec.EscalatingRemediations[0].Timeout.Duration.String(); got != "5m0s" {
		t.Errorf("timeout: %s", got)
	}
	if got := nhc.Spec.MinHealthy.String(); got != "51%" {
		t.Errorf("minHealthy: %s", got)
	}
}

// Every field of spec and status that the Go type cannot hold in some shape the API server may store.
func TestDecodeBad(t *testing.T) {
	for _, tc := range []struct {
		path, raw string
		field     string // the path the error must name
	}{
		// Integers that overflow their field.
		{"spec.escalatingRemediations.0.order", "1e20", "spec.escalatingRemediations"},
		{"spec.escalatingRemediations.0.order", "99999999999999999999", "spec.escalatingRemediations"},
		{"spec.minHealthy", "99999999999", "spec.minHealthy"},
		{"spec.maxUnhealthy", "2147483648", "spec.maxUnhealthy"},
		{"spec.minHealthy", "-2147483649", "spec.minHealthy"},
		{"status.observedNodes", "1e20", "status.observedNodes"},
		{"status.healthyNodes", "99999999999999999999", "status.healthyNodes"},
		// Not integers.
		{"spec.escalatingRemediations.0.order", "1.5", "spec.escalatingRemediations"},
		{"spec.minHealthy", "1.5", "spec.minHealthy"},
		{"status.observedNodes", "2.5", "status.observedNodes"},
		// Durations time.ParseDuration refuses.
		{"spec.healthyDelay", `"99999999999h"`, "spec.healthyDelay"},
		{"spec.stormCooldownDuration", `"99999999999h"`, "spec.stormCooldownDuration"},
		{"spec.unhealthyConditions.0.duration", `"forever"`, "spec.unhealthyConditions"},
		{"spec.escalatingRemediations.0.timeout", `"1y"`, "spec.escalatingRemediations"},
		{"spec.healthyDelay", `""`, "spec.healthyDelay"},
		// Times that do not parse.
		{"status.lastUpdateTime", `"yesterday"`, "status.lastUpdateTime"},
		{"status.unhealthyNodes.0.conditionsHealthyTimestamp", `"2026-13-01T00:00:00Z"`, "status.unhealthyNodes"},
		{"status.unhealthyNodes.0.remediations.0.started", `"x"`, "status.unhealthyNodes"},
		{"status.conditions.0.lastTransitionTime", `"x"`, "status.conditions"},
		// Wrong types.
		{"spec.healthyDelay", "5", "spec.healthyDelay"},
		{"spec.minHealthy", "true", "spec.minHealthy"},
		{"spec.minHealthy", `{"a": 1}`, "spec.minHealthy"},
		{"spec.escalatingRemediations.0.order", `"1"`, "spec.escalatingRemediations"},
		{"spec.selector.matchLabels", `{"role": 1}`, "spec.selector"},
		{"spec.pauseRequests", `"upgrade"`, "spec.pauseRequests"},
		{"spec.unhealthyConditions", `{"type": "Ready"}`, "spec.unhealthyConditions"},
		{"status.unhealthyNodes.0.healthyDelayed", `"yes"`, "status.unhealthyNodes"},
		{"status.phase", "1", "status.phase"},
		{"spec", `"x"`, "spec"},
		{"status", "[]", "status"},
	} {
		t.Run(tc.path+"="+tc.raw, func(t *testing.T) {
			u := object(t, tc.path, tc.raw)
			_, err := decodeguard.Decode(u)
			if err == nil {
				t.Fatal("Decode succeeded")
			}
			if typedDecode(u) == nil {
				t.Fatal("the typed client accepts what Decode refuses")
			}
			if !strings.HasPrefix(err.Error(), tc.field+": ") {
				t.Errorf("error does not start with the field %s: %v", tc.field, err)
			}
		})
	}
}

func TestDecodeNamesEveryBadField(t *testing.T) {
	u := object(t, "spec.healthyDelay", `"soon"`)
	if err := unstructured.SetNestedField(u.Object, int64(99999999999), "spec", "minHealthy"); err != nil {
		t.Fatal(err)
	}
	_, err := decodeguard.Decode(u)
	if err == nil || !strings.Contains(err.Error(), "spec.healthyDelay: ") || !strings.Contains(err.Error(), "; spec.minHealthy: ") {
		t.Fatalf("want both fields named: %v", err)
	}
}

// fuzzPaths are the fields FuzzDecode puts values into.
var fuzzPaths = []string{
	"spec.minHealthy", "spec.maxUnhealthy", "spec.healthyDelay", "spec.stormCooldownDuration", "spec.pauseRequests",
	"spec.selector.matchLabels", "spec.unhealthyConditions.0.duration", "spec.escalatingRemediations.0.order",
	"spec.escalatingRemediations.0.timeout", "status.observedNodes", "status.lastUpdateTime",
	"status.unhealthyNodes.0.healthyDelayed", "status.unhealthyNodes.0.remediations.0.started", "spec", "status",
}

// FuzzDecode puts any JSON value into one field: Decode refuses exactly what the typed client
// refuses, and its error then names a field of spec or status.
func FuzzDecode(f *testing.F) {
	for i, raw := range []string{"1e20", `"99999999999h"`, "99999999999", `"5m"`, "null", "-0", `{"a":"b"}`, "[1]", "1.0", "true", `""`,
		"9223372036854775807", "9223372036854775808", "-9.3e18", `"2026-01-02T03:04:05Z"`} {
		f.Add(uint8(i), raw)
	}
	f.Fuzz(func(t *testing.T, at uint8, raw string) {
		v := &unstructured.Unstructured{}
		if !json.Valid([]byte(raw)) || v.UnmarshalJSON([]byte(`{"kind":"X","apiVersion":"v1","v":`+raw+`}`)) != nil {
			t.Skip()
		}
		u := object(t, fuzzPaths[int(at)%len(fuzzPaths)], raw)
		_, err := decodeguard.Decode(u)
		typedErr := typedDecode(u)
		if (err == nil) != (typedErr == nil) {
			t.Fatalf("Decode: %v; typed client: %v", err, typedErr)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "spec") && !strings.HasPrefix(err.Error(), "status") {
			t.Fatalf("error names no field: %v", err)
		}
	})
}

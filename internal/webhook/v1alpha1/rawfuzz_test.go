package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	webhookv1alpha1 "github.com/medik8s/node-healthcheck/internal/webhook/v1alpha1"
)

// strictDecoder decodes stored NodeHealthChecks the way the operator's client does (the apimachinery
// JSON serializer: case-sensitive field names, integers kept as integers), and in addition refuses
// unknown and duplicate fields, so a field the CRD keeps but the Go types lack is found too.
var strictDecoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	if err := remediationv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

// rawSeeds are valid and near-valid NodeHealthCheck documents: the reference examples, and the
// values only raw JSON can carry (numbers beyond the Go types, floats, overflowing durations, odd
// types and shapes, case variants, duplicate keys, deep nesting).
func rawSeeds() []string {
	var seeds []string
	for _, doc := range []string{referenceExampleTemplate, referenceExampleEscalation, referenceDefaultNHC} {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, string(j))
	}
	nested := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	tooDeep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000) // beyond what the JSON decoder accepts
	for _, fields := range [][]string{
		nil,
		{`"minHealthy": 2147483647`}, {`"minHealthy": 2147483648`}, {`"minHealthy": 1e20`}, {`"maxUnhealthy": 1e10`},
		{`"minHealthy": 3.0`}, {`"minHealthy": -0`}, {`"minHealthy": "99999999999"`}, {`"minHealthy": "2147483648"`},
		{`"minHealthy": "0000000003"`}, {`"minHealthy": "100%"`}, {`"minHealthy": true`}, {`"minHealthy": null`},
		{`"minHealthy": "51%", "minHealthy": 3`},
		{`"escalatingRemediations": ` + rawStep("2147483647")}, {`"escalatingRemediations": ` + rawStep("2147483648")},
		{`"escalatingRemediations": ` + rawStep("1e20")}, {`"escalatingRemediations": ` + rawStep("3.0")},
		{`"escalatingRemediations": ` + rawStep("-9223372036854775808")}, {`"escalatingRemediations": ` + rawStep(`"1"`)},
		{`"healthyDelay": "99999999999h"`}, {`"healthyDelay": "-8760h"`}, {`"healthyDelay": "-8760h0m0.000000001s"`},
		{`"stormCooldownDuration": "2000000h2000000h"`}, {`"stormCooldownDuration": "9223372036854775807ns"`},
		{`"stormCooldownDuration": "0"`}, {`"stormCooldownDuration": ".5s"`}, {`"stormCooldownDuration": "1\u00b5s"`},
		{`"stormCooldownDuration": "1\u03bcs"`}, {`"stormCooldownDuration": 300}`},
		// Boundaries one mutation away from overflowing: Go's largest durations, nine parts of the
		// most digits the pattern allows (9e18ns, just below 2^63), the largest int32 and int64.
		{`"stormCooldownDuration": "2562047h47m16.854775807s"`}, {`"healthyDelay": "-2562047h47m16.854775808s"`},
		{`"unhealthyConditions": [{"type":"Ready","status":"False","duration":"` + strings.Repeat("999999999999999999ns", 9) + `"}]`},
		{`"unhealthyConditions": [{"type":"Ready","status":"False","duration":"` + strings.Repeat("99999h", 9) + `"}]`},
		{`"maxUnhealthy": "4294967295"`}, {`"maxUnhealthy": 9223372036854775807`},
		{`"escalatingRemediations": ` + rawStep("9223372036854775807")},
		{`"unhealthyConditions": [{"type":"Ready","status":"False","duration":"8760h"}]`},
		{`"unhealthyConditions": [{"type":"Ready","status":"False","duration":"8761h"}]`},
		{`"unhealthyConditions": null`}, {`"unhealthyConditions": []`}, {`"unhealthyConditions": [{"type":"Ready"}]`},
		{`"unhealthyConditions": [null]`},
		{`"selector": "worker"`}, {`"selector": null`}, {`"selector": {"matchLabels": {"a": 1}}`},
		{`"selector": {"matchExpressions": [{"key":"k","operator":"In","values":["a",null]}]}`},
		{`"selector": {"matchExpressions": ` + nested + `}`}, {`"pauseRequests": ` + nested},
		{`"Selector": {}`, `"RemediationTemplate": {}`},
		{`"pauseRequests": [1]`}, {`"pauseRequests": "upgrade"`}, {`"pauseRequests": ["upgrade", null]`},
		{`"remediationTemplate": {"apiVersion":"v1","kind":"XTemplate","name":"x","uid":7}`},
		{`"remediationTemplate": {"apiVersion":"test.medik8s.io/v1alpha1","kind":"TestRemediationTemplate","name":"t","Name":"u"}`},
	} {
		seeds = append(seeds, rawNHC("fuzz", fields...))
	}
	return append(seeds,
		`{"status": {"observedNodes": 3, "healthyNodes": 1e10, "phase": "Enabled", "lastUpdateTime": "2026-01-02T15:04:05Z",`+
			`"unhealthyNodes": [{"name": "worker-1", "healthyDelayed": true, "conditionsHealthyTimestamp": "2026-01-02T15:04:05.123+02:00",`+
			`"remediations": [{"resource": {"kind": "TestRemediation", "name": "worker-1"}, "started": "2026-01-02T15:04:05Z", "templateName": "t"}]}],`+
			`"conditions": [{"type": "Disabled", "status": "False", "reason": "NodeHealthCheckEnabled", "message": "", "lastTransitionTime": "2026-01-02T15:04:05Z", "observedGeneration": 9223372036854775807}]}}`,
		`{"status": {"observedNodes": 9223372036854775808, "lastUpdateTime": "2006-01-02T15:04:05", "inFlightRemediations": {"a": "2026-01-02T15:04:05Z"}}}`,
		`{"spec": null}`, `{"spec": []}`, `{"Spec": {"selector": {}}}`, `[]`, `null`, `"spec"`, tooDeep,
		`{"apiVersion":"remediation.medik8s.io/v1alpha1","kind":"NodeHealthCheck","metadata":{"name":"x"},"spec":{"selector":{},"remediationTemplate":{"apiVersion":"a/v1","kind":"ATemplate","name":"a"}},"status":{"observedNodes":1e300,"lastUpdateTime":"2006-01-02T15:04:05"}}`,
	)
}

// FuzzRawJSON feeds raw bytes through what the API server and the webhook do with a created
// NodeHealthCheck: the CRD's pruning, defaulting, OpenAPI constraints and CEL rules (in process, as
// crdvalidation_test.go does), then the webhook's defaulting and validation of what decodes.
// Properties: nothing panics; every refusal names a field; whatever the CRD admits decodes into the
// Go types (the key property: with the webhook off, the CRD alone decides what is stored, and one
// undecodable object breaks the operator's informer); and whatever both admit is still admitted by
// the CRD once defaulted and holds only values the operator can use.
func FuzzRawJSON(f *testing.F) {
	v, err := loadCRDValidator()
	if err != nil {
		f.Fatalf("loading CRD validator: %v", err)
	}
	for _, s := range rawSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The API server decodes numbers as int64 where they are integral, else as float64; so does
		// utiljson. A body that is not a JSON object is refused before any validation.
		var obj map[string]any
		if err := utiljson.Unmarshal(data, &obj); err != nil || obj == nil {
			return
		}
		// The status subresource: the nhc controller writes it, but so can anyone allowed to, and the
		// informer decodes it too.
		if status, ok := obj["status"]; ok {
			checkStatusUpdate(t, v, status)
		}

		// A create on the main endpoint: the client names the kind, the API server checks metadata
		// itself, and status is a subresource, dropped on create.
		obj["apiVersion"] = remediationv1alpha1.GroupVersion.String()
		obj["kind"] = "NodeHealthCheck"
		obj["metadata"] = map[string]any{"name": "fuzz"}
		delete(obj, "status")
		v.coerce(obj)

		crdErrs := v.validateObject(context.Background(), obj, nil)
		requireCRDFieldPaths(t, crdErrs)
		stored, err := json.Marshal(obj)
		if err != nil {
			t.Fatalf("marshalling the object: %v", err)
		}
		nhc, err := decodeNHC(stored)
		if err != nil {
			if len(crdErrs) == 0 {
				t.Fatalf("the CRD admits an object the operator cannot decode: %v\n%s", err, stored)
			}
			return // the webhook cannot decode it either and refuses it without validation
		}

		defaulted := nhc.DeepCopy()
		remediationv1alpha1.SetDefaults(defaulted)
		webhookErrs := webhookv1alpha1.ValidateSpec(&defaulted.Spec)
		requireFieldPaths(t, "webhook", webhookErrs)
		if len(crdErrs) > 0 || len(webhookErrs) > 0 {
			return
		}

		// The API server validates the object the mutating webhook returns: defaulting must keep it
		// admissible, and it must decode again.
		mutated, err := json.Marshal(defaulted)
		if err != nil {
			t.Fatalf("marshalling the defaulted object: %v", err)
		}
		var mutatedObj map[string]any
		if err := utiljson.Unmarshal(mutated, &mutatedObj); err != nil {
			t.Fatalf("unmarshalling the defaulted object: %v", err)
		}
		if errs := v.validateObject(context.Background(), mutatedObj, nil); len(errs) > 0 {
			t.Fatalf("the CRD refuses the webhook's defaulted object: %v\nbefore: %s\nafter:  %s", errs, stored, mutated)
		}
		if _, err := decodeNHC(mutated); err != nil {
			t.Fatalf("the defaulted object does not decode: %v\n%s", err, mutated)
		}
		requireUsable(t, &defaulted.Spec)
	})
}

// checkStatusUpdate writes status to a stored valid NodeHealthCheck through the status subresource
// (which keeps the stored spec) and checks that a status the CRD admits decodes.
func checkStatusUpdate(t *testing.T, v *crdValidator, status any) {
	t.Helper()
	stored := func() map[string]any {
		var obj map[string]any
		if err := utiljson.Unmarshal([]byte(rawNHC("fuzz")), &obj); err != nil {
			t.Fatalf("unmarshalling the stored object: %v", err)
		}
		v.coerce(obj)
		return obj
	}
	oldObj, newObj := stored(), stored()
	newObj["status"] = status
	v.coerce(newObj)
	errs := v.validateObject(context.Background(), newObj, oldObj)
	requireCRDFieldPaths(t, errs)
	raw, err := json.Marshal(newObj)
	if err != nil {
		t.Fatalf("marshalling the object: %v", err)
	}
	if _, err := decodeNHC(raw); err != nil && len(errs) == 0 {
		t.Fatalf("the CRD admits a status the operator cannot decode: %v\n%s", err, raw)
	}
}

// decodeNHC decodes a stored object strictly with the operator's serializer, and with plain
// encoding/json as well.
func decodeNHC(stored []byte) (*remediationv1alpha1.NodeHealthCheck, error) {
	nhc := &remediationv1alpha1.NodeHealthCheck{}
	if _, _, err := strictDecoder.Decode(stored, nil, nhc); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(stored, &remediationv1alpha1.NodeHealthCheck{}); err != nil {
		return nil, fmt.Errorf("encoding/json: %w", err)
	}
	return nhc, nil
}

// requireCRDFieldPaths fails unless the CRD's errors name the fields they are about. The OpenAPI
// library adds a few summaries without a path (an int-or-string that matches neither type: "spec.x
// must validate at least one schema (anyOf)"; a float for an integer: "Checked value must be of type
// integer (default format) in spec.x"); they name the field in their text and always come with an
// error at that path, and the API server returns them the same way.
func requireCRDFieldPaths(t *testing.T, errs field.ErrorList) {
	t.Helper()
	var withPath, withoutPath field.ErrorList
	for _, e := range errs {
		if e.Field == "" || e.Field == "<nil>" {
			withoutPath = append(withoutPath, e)
		} else {
			withPath = append(withPath, e)
		}
	}
	for _, e := range withoutPath {
		named := false
		for _, p := range withPath {
			named = named || strings.Contains(e.Detail, p.Field)
		}
		if !named {
			t.Fatalf("CRD refusal without a field path: %v (all: %v)", e, errs)
		}
	}
}

// requireFieldPaths fails unless every error names the field it is about.
func requireFieldPaths(t *testing.T, layer string, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		if e.Field == "" || e.Field == "<nil>" {
			t.Fatalf("%s refusal without a field path: %v (all: %v)", layer, e, errs)
		}
	}
}

// requireUsable fails unless every duration and number of an admitted spec can be used the way the
// operator uses it.
func requireUsable(t *testing.T, spec *remediationv1alpha1.NodeHealthCheckSpec) {
	t.Helper()
	durations := map[string]time.Duration{}
	for i, c := range spec.UnhealthyConditions {
		durations[fmt.Sprintf("unhealthyConditions[%d].duration", i)] = c.Duration.Duration
	}
	for i, e := range spec.EscalatingRemediations {
		durations[fmt.Sprintf("escalatingRemediations[%d].timeout", i)] = e.Timeout.Duration
		if int64(e.Order) != int64(int32(e.Order)) {
			t.Fatalf("order %d does not fit a 32-bit int", e.Order)
		}
	}
	if spec.HealthyDelay != nil {
		durations["healthyDelay"] = spec.HealthyDelay.Duration
	}
	if spec.StormCooldownDuration != nil {
		durations["stormCooldownDuration"] = spec.StormCooldownDuration.Duration
	}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, d := range durations {
		if d > remediationv1alpha1.MaxDuration || d < -remediationv1alpha1.MaxDuration {
			t.Fatalf("%s %s is beyond a year", name, d)
		}
		// A deadline computed from it is a timestamp the status can hold.
		ts := metav1.NewTime(base.Add(d))
		raw, err := json.Marshal(ts)
		if err != nil {
			t.Fatalf("%s %s: marshalling %v: %v", name, d, ts, err)
		}
		if err := json.Unmarshal(raw, &metav1.Time{}); err != nil {
			t.Fatalf("%s %s: deadline %s does not decode: %v", name, d, raw, err)
		}
	}

	limit := absolute(spec.MaxUnhealthy)
	for _, total := range []int{0, 1, 3, 10, 1000, 1 << 20} {
		min, err := health.MinHealthy(total, spec.MinHealthy, spec.MaxUnhealthy)
		switch {
		case limit > int64(total):
			if err == nil {
				t.Fatalf("maxUnhealthy %v above %d nodes resolves to %d", spec.MaxUnhealthy, total, min)
			}
		case err != nil:
			t.Fatalf("minHealthy %v / maxUnhealthy %v for %d nodes: %v", spec.MinHealthy, spec.MaxUnhealthy, total, err)
		case min < 0:
			t.Fatalf("minHealthy %v / maxUnhealthy %v for %d nodes resolves to %d", spec.MinHealthy, spec.MaxUnhealthy, total, min)
		}
	}
}

// absolute returns an absolute budget (an integer or numeric string), or -1 for none or a percentage.
func absolute(v *intstr.IntOrString) int64 {
	switch {
	case v == nil:
		return -1
	case v.Type == intstr.Int:
		return int64(v.IntVal)
	}
	n, err := strconv.ParseInt(v.StrVal, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

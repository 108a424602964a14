package decodeguard

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "sigs.k8s.io/json"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Decode converts a NodeHealthCheck read as unstructured into its Go type, or returns why it cannot:
// a number that overflows its field, a duration or time that does not parse, a value of the wrong
// type. It decodes the object's JSON the way the typed client does (case-sensitive field names, whole
// numbers kept as integers, unknown fields ignored), so it refuses exactly what would break a typed
// list. Like the typed client, it leaves TypeMeta empty.
//
// The error names every offending field of spec and status ("spec.healthyDelay: time: invalid
// duration ..."), so the message alone tells an administrator what to fix.
func Decode(u *unstructured.Unstructured) (*remediationv1alpha1.NodeHealthCheck, error) {
	out, err := decode(u.Object)
	if err != nil {
		return nil, locate(u.Object, err)
	}
	out.TypeMeta = metav1.TypeMeta{}
	return out, nil
}

func decode(obj map[string]any) (*remediationv1alpha1.NodeHealthCheck, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := &remediationv1alpha1.NodeHealthCheck{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// locate decodes each field of spec and status alone and returns the errors of those that fail, each
// prefixed with its path; errors of custom decoders (durations, times, int-or-strings) do not name
// their field otherwise. When no single field fails it returns err as it is.
func locate(obj map[string]any, err error) error {
	var msgs []string
	for _, section := range []string{"spec", "status"} {
		switch fields := obj[section].(type) {
		case nil:
		case map[string]any:
			for _, key := range slices.Sorted(maps.Keys(fields)) {
				if _, err := decode(map[string]any{section: map[string]any{key: fields[key]}}); err != nil {
					msgs = append(msgs, fmt.Sprintf("%s.%s: %v", section, key, err))
				}
			}
		default:
			if _, err := decode(map[string]any{section: fields}); err != nil {
				msgs = append(msgs, fmt.Sprintf("%s: %v", section, err))
			}
		}
	}
	if len(msgs) == 0 {
		return err
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

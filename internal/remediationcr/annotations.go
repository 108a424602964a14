package remediationcr

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
)

// The annotations the operator writes on the remediation CRs it creates, beyond the template
// contract: the remediation request a remediation answers (requested-at), the node as the answering
// remediation found it (request-baseline), and the node's failure domain when the CR was created.
// Nodes cannot write CRs: what the operator reads back from them is trusted.

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// RequestOf returns the latest request time the CRs answer (their requested-at annotations; zero:
// none).
func RequestOf(crs []unstructured.Unstructured) time.Time {
	var latest time.Time
	for i := range crs {
		if v, ok := Annotation(&crs[i], remediationv1alpha1.RemediationRequestedAtAnnotation); ok {
			if at, err := time.Parse(time.RFC3339, v); err == nil {
				latest = later(latest, at)
			}
		}
	}
	return latest
}

// baseline is a health.RequestBaseline as the request-baseline annotation holds it.
type baseline struct {
	At         time.Time           `json:"at"`
	Conditions []baselineCondition `json:"conditions"`
}

type baselineCondition struct {
	Type               corev1.NodeConditionType `json:"type"`
	Status             corev1.ConditionStatus   `json:"status"`
	LastTransitionTime time.Time                `json:"lastTransitionTime"`
}

// EncodeBaseline returns the request-baseline annotation's value for the baseline.
func EncodeBaseline(b health.RequestBaseline) string {
	v := baseline{At: b.At.UTC().Truncate(time.Second), Conditions: []baselineCondition{}}
	for _, c := range b.Conditions {
		v.Conditions = append(v.Conditions, baselineCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime.UTC()})
	}
	out, _ := json.Marshal(v) // plain strings and times: never fails
	return string(out)
}

// BaselineOf returns the baseline recorded on the CRs (the earliest one's; nil: none that parses).
func BaselineOf(crs []unstructured.Unstructured) *health.RequestBaseline {
	var out *health.RequestBaseline
	for i := range crs {
		v, ok := Annotation(&crs[i], remediationv1alpha1.RemediationRequestBaselineAnnotation)
		if !ok {
			continue
		}
		var b baseline
		if err := json.Unmarshal([]byte(v), &b); err != nil || b.At.IsZero() {
			continue
		}
		if out != nil && !b.At.Before(out.At) {
			continue
		}
		out = &health.RequestBaseline{At: b.At}
		for _, c := range b.Conditions {
			out.Conditions = append(out.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: metav1.NewTime(c.LastTransitionTime)})
		}
	}
	return out
}

// FailureDomainValue is the failure-domain annotation's value for a node in domain of key.
func FailureDomainValue(key, domain string) string { return key + "=" + domain }

// CutDomain reads a failure-domain annotation's value for the key.
func CutDomain(v, key string) (string, bool) {
	if len(v) <= len(key) || v[:len(key)] != key || v[len(key)] != '=' {
		return "", false
	}
	return v[len(key)+1:], true
}

package health

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// MinHealthy returns how many of total selected nodes must be healthy for a new remediation to
// start. minHealthy and maxUnhealthy are an integer, a numeric string such as "3", or a percentage of
// total rounded up; maxUnhealthy m becomes total - m. With neither set, the API's default minHealthy
// applies. A maxUnhealthy above total, or an unparsable value, is an error: the caller starts no
// remediation and reports it.
func MinHealthy(total int, minHealthy, maxUnhealthy *intstr.IntOrString) (int, error) {
	switch {
	case minHealthy != nil && maxUnhealthy != nil:
		return 0, fmt.Errorf("minHealthy and maxUnhealthy are mutually exclusive")
	case maxUnhealthy != nil:
		m, err := scaled(maxUnhealthy, total)
		if err != nil {
			return 0, fmt.Errorf("maxUnhealthy: %w", err)
		}
		if m > total {
			return 0, fmt.Errorf("maxUnhealthy %s is more than the %d selected nodes", maxUnhealthy, total)
		}
		return total - m, nil
	case minHealthy != nil:
		m, err := scaled(minHealthy, total)
		if err != nil {
			return 0, fmt.Errorf("minHealthy: %w", err)
		}
		return m, nil
	default:
		def := remediationv1alpha1.DefaultMinHealthy
		return scaled(&def, total)
	}
}

// scaled resolves an int-or-percent against total, rounding percentages up.
func scaled(v *intstr.IntOrString, total int) (int, error) {
	if v.Type == intstr.String {
		if n, err := strconv.ParseInt(v.StrVal, 10, 32); err == nil {
			v = &intstr.IntOrString{Type: intstr.Int, IntVal: int32(n)}
		}
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, true)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("%s must not be negative", v)
	}
	return n, nil
}

// InFlightLimit resolves spec.maxInFlight against the number of selected nodes: a count, or a
// percentage rounded up; at least one node whatever the percentage, so that a small pool is not
// stopped by rounding.
func InFlightLimit(total int, maxInFlight *intstr.IntOrString) (int, error) {
	m, err := scaled(maxInFlight, total)
	if err != nil {
		return 0, fmt.Errorf("maxInFlight: %w", err)
	}
	if m < 1 {
		if maxInFlight.Type == intstr.Int || !strings.HasSuffix(maxInFlight.StrVal, "%") {
			return 0, fmt.Errorf("maxInFlight %s: must be at least 1", maxInFlight)
		}
		m = 1
	}
	return m, nil
}

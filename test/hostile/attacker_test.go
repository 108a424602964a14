package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// operatorKeys are the Node annotations the operator (or a remediator it trusts) reads.
var operatorKeys = []string{
	remediationv1alpha1.RemediationRequestAnnotation,
	remediationv1alpha1.RemediationRequestHandledAnnotation,
	remediationv1alpha1.RepairBudgetResetAnnotation,
	remediationv1alpha1.ManuallyConfirmedHealthyAnnotation,
	"machine.openshift.io/machine",
	"cluster.x-k8s.io/machine",
	"cluster.x-k8s.io/cluster-name",
	"cluster.x-k8s.io/cluster-namespace",
	remediationv1alpha1.MachineConfigCurrentAnnotation,
	remediationv1alpha1.MachineConfigDesiredAnnotation,
}

// annotationReserve is left free of the annotation limit for what others write on the node (the
// operator's remediation-request-handled, a few dozen bytes), so that the attacker's own writes
// reach the limit without being refused for the operator's share.
const annotationReserve = 1 << 10

// largeValue is the smallest value the attacker counts as large (the issue's "distinct large
// request values"): past the 1 KiB an event note may hold.
const largeValue = 1 << 10

// attacker is a compromised kubelet: with its node's own credentials it writes, at random, what
// they allow on its own Node (annotations, labels, conditions, cordon), tries what they do not
// (taints, restricted labels, another node), and plays with its Lease.
type attacker struct {
	node  string
	cs    kubernetes.Interface
	rng   *rand.Rand
	zones []string
	// annotations is the attacker's model of the annotations it set: key -> value length.
	annotations map[string]int
	// labelKeys are the other-domain label keys it has set so far.
	labelKeys []string
	// requests counts the requests sent.
	requests int
	stats    attackStats
}

// attackStats count what the attacker did.
type attackStats struct {
	// Writes counts the writes of each action, Refused the actions refused; Refusals counts
	// them by action and reason.
	Writes, Refused map[string]int
	Refusals        map[string]int
	// Errors are answers that are no refusal (the API server unreachable, a timeout): they count
	// as a failure of the suite's setup, not of the operator.
	Errors []string
	// RequestValues counts the distinct remediation-request values written; LargeRequests those
	// of largeValue or more, LargeRequestBytes their size in all. ResetValues and LargeResets are
	// the same for repair-budget-reset.
	RequestValues, LargeRequests, LargeRequestBytes int
	ResetValues, LargeResets, LargeResetBytes       int
	// Zones counts the zone changes.
	Zones int
}

func newAttacker(node string, cs kubernetes.Interface, seed uint64, zones []string) *attacker {
	return &attacker{node: node, cs: cs, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), zones: zones, //nolint:gosec // a replayable test
		annotations: map[string]int{},
		stats:       attackStats{Writes: map[string]int{}, Refused: map[string]int{}, Refusals: map[string]int{}}}
}

// actions, with their weights: what a kubelet writes most is its own Node.
var actions = []struct {
	name   string
	weight int
	do     func(*attacker, context.Context) error
}{
	{"annotate", 35, (*attacker).annotate},
	{"flood", 5, (*attacker).flood},
	{"conditions", 20, (*attacker).conditions},
	{"label", 12, (*attacker).label},
	{"lease", 10, (*attacker).lease},
	{"cordon", 5, (*attacker).cordon},
	{"taint", 3, (*attacker).taint},
	{"forbidden", 5, (*attacker).forbidden},
}

// step does one random action and counts its writes and its outcome: a refusal by the API server
// (forbidden, invalid, not found, a conflict, throttled) is what a hostile node expects; any other
// error is recorded in Errors.
func (a *attacker) step(ctx context.Context) {
	total := 0
	for _, x := range actions {
		total += x.weight
	}
	pick := a.rng.IntN(total)
	for _, x := range actions {
		if pick -= x.weight; pick >= 0 {
			continue
		}
		before := a.requests
		err := x.do(a, ctx)
		if a.requests == before {
			a.requests++ // an action of one write
		}
		a.stats.Writes[x.name] += a.requests - before
		switch {
		case err == nil:
		case ctx.Err() != nil:
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsBadRequest(err),
			// The API server's priority and fairness throttling the node is a refusal too.
			apierrors.IsTooManyRequests(err):
			a.stats.Refused[x.name]++
			a.stats.Refusals[fmt.Sprintf("%s: %s", x.name, apierrors.ReasonForError(err))]++
		default:
			a.stats.Errors = append(a.stats.Errors, fmt.Sprintf("%s: %s", x.name, firstLine(err.Error(), 200)))
		}
		return
	}
}

// value returns a value for the annotation key, of one of nine kinds: times now, past and future,
// text that is no time, empty, a Machine reference, and text of any size up to room bytes.
func (a *attacker) value(key string, room int) string {
	now := time.Now()
	switch a.rng.IntN(9) {
	case 0: // a valid time, now: a request the operator may answer
		return now.UTC().Format(time.RFC3339)
	case 1: // the past, seconds to decades
		return now.Add(-time.Duration(a.rng.Int64N(int64(30 * 365 * 24 * time.Hour)))).UTC().Format(time.RFC3339)
	case 2: // the future, seconds to millennia (the API's time stops at year 9999)
		if a.rng.IntN(4) == 0 {
			return "9999-12-31T23:59:59Z"
		}
		return now.Add(time.Duration(a.rng.Int64N(int64(200 * 365 * 24 * time.Hour)))).UTC().Format(time.RFC3339)
	case 3: // not a time, short
		return fmt.Sprintf("not-a-time-%x", a.rng.Uint64())
	case 4: // empty
		return ""
	case 5: // a Machine reference, namespace/name
		return fmt.Sprintf("openshift-machine-api/%s-%x", strings.ToLower(key[:3]), a.rng.Uint32())
	case 6: // any size up to the room left, as many small as large (log-uniform)
		return a.filler(int(float64(room) * pow(a.rng.Float64(), 4)))
	default: // large and distinct: from 1 KiB to all the room left
		if room <= largeValue {
			return a.filler(room)
		}
		return a.filler(largeValue + a.rng.IntN(room-largeValue+1))
	}
}

func pow(x float64, n int) float64 {
	out := 1.0
	for range n {
		out *= x
	}
	return out
}

// filler returns a distinct string of size n (a random prefix, then filler).
func (a *attacker) filler(n int) string {
	if n <= 0 {
		return ""
	}
	prefix := fmt.Sprintf("%016x", a.rng.Uint64())
	if n <= len(prefix) {
		return prefix[:n]
	}
	return prefix + strings.Repeat(string(rune('a'+a.rng.IntN(26))), n-len(prefix))
}

// annotationKey picks a key to annotate: mostly the operator's, the request above all.
func (a *attacker) annotationKey() string {
	switch r := a.rng.IntN(20); {
	case r < 6:
		return remediationv1alpha1.RemediationRequestAnnotation
	case r < 9:
		return remediationv1alpha1.RepairBudgetResetAnnotation
	case r < 16:
		return operatorKeys[a.rng.IntN(len(operatorKeys))]
	default:
		return fmt.Sprintf("hostile.example.com/k%d", a.rng.IntN(16))
	}
}

// room returns how long a value of key may be for the node's annotations to stay within the
// API's limit once the patch applies.
func (a *attacker) room(patch map[string]*string, key string) int {
	used := len(key)
	for k, n := range a.annotations {
		if _, changed := patch[k]; !changed {
			used += n
		}
	}
	for k, v := range patch {
		if v != nil && k != key {
			used += len(k) + len(*v)
		}
	}
	return max(0, annotationLimit-annotationReserve-used)
}

// annotate sets or removes one to four annotations, with values of every kind and size, keeping
// the total within the API's limit (once in twenty values it goes past it, and is refused).
func (a *attacker) annotate(ctx context.Context) error {
	patch := map[string]*string{}
	for range 1 + a.rng.IntN(4) {
		key := a.annotationKey()
		if a.rng.IntN(7) == 0 {
			patch[key] = nil
			continue
		}
		v := a.value(key, a.room(patch, key))
		if a.rng.IntN(20) == 0 {
			v += strings.Repeat("+", annotationReserve+1) // past the limit
		}
		patch[key] = &v
	}
	return a.sendAnnotations(ctx, patch)
}

// flood writes one of the operator's keys 4 to 16 times in a row, each time with another large
// value (from 1 KiB to all the room the limit leaves, the node's other large values removed): the
// writes that grew the manager before issue 33.
func (a *attacker) flood(ctx context.Context) error {
	key := remediationv1alpha1.RemediationRequestAnnotation
	switch r := a.rng.IntN(20); {
	case r >= 17:
		key = operatorKeys[a.rng.IntN(len(operatorKeys))]
	case r >= 12:
		key = remediationv1alpha1.RepairBudgetResetAnnotation
	}
	patch := map[string]*string{}
	for k, n := range a.annotations {
		if k != key && n >= largeValue {
			patch[k] = nil
		}
	}
	for range 4 + a.rng.IntN(13) {
		room := a.room(patch, key)
		v := a.filler(room)
		if room > largeValue {
			v = a.filler(largeValue + a.rng.IntN(room-largeValue+1))
		}
		patch[key] = &v
		if err := a.sendAnnotations(ctx, patch); err != nil {
			return err
		}
		patch = map[string]*string{}
	}
	return nil
}

// sendAnnotations sends one patch of annotations and records it in the model and the figures.
func (a *attacker) sendAnnotations(ctx context.Context, patch map[string]*string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
	if err != nil {
		return err
	}
	a.requests++
	if err := mergePatch(ctx, a.cs, a.node, string(body)); err != nil {
		return err
	}
	for k, v := range patch {
		if v == nil {
			delete(a.annotations, k)
			continue
		}
		a.annotations[k] = len(k) + len(*v)
		switch k {
		case remediationv1alpha1.RemediationRequestAnnotation:
			a.stats.RequestValues++
			if len(*v) >= largeValue {
				a.stats.LargeRequests++
				a.stats.LargeRequestBytes += len(*v)
			}
		case remediationv1alpha1.RepairBudgetResetAnnotation:
			a.stats.ResetValues++
			if len(*v) >= largeValue {
				a.stats.LargeResets++
				a.stats.LargeResetBytes += len(*v)
			}
		}
	}
	return nil
}

// labelValue returns a valid label value of up to 63 characters.
func (a *attacker) labelValue() string {
	n := a.rng.IntN(64)
	if n == 0 {
		return ""
	}
	v := []byte(a.filler(n))
	v[0], v[n-1] = 'a', 'z'
	return string(v)
}

// label changes one to three labels a kubelet may set: mostly its zone (jumping between the
// cluster's zones, or to a zone of its own), the other topology and instance labels, the exclusion
// label, and labels of another domain.
func (a *attacker) label(ctx context.Context) error {
	patch := map[string]*string{}
	for range 1 + a.rng.IntN(3) {
		var key, value string
		switch a.rng.IntN(8) {
		case 0, 1, 2:
			key, value = "topology.kubernetes.io/zone", a.zones[a.rng.IntN(len(a.zones))]
			if a.rng.IntN(5) == 0 {
				value = a.labelValue()
			}
			a.stats.Zones++
		case 3:
			key, value = "topology.kubernetes.io/region", a.labelValue()
		case 4:
			key, value = "node.kubernetes.io/instance-type", a.labelValue()
		case 5:
			key, value = remediationv1alpha1.ExcludeFromRemediationLabel, []string{"true", "false", "", "yes"}[a.rng.IntN(4)]
		default:
			if len(a.labelKeys) < 32 {
				a.labelKeys = append(a.labelKeys, fmt.Sprintf("hostile.example.com/l%d", len(a.labelKeys)))
			}
			key, value = a.labelKeys[a.rng.IntN(len(a.labelKeys))], a.labelValue()
		}
		if a.rng.IntN(8) == 0 {
			patch[key] = nil
			continue
		}
		patch[key] = &value
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
	if err != nil {
		return err
	}
	return mergePatch(ctx, a.cs, a.node, string(body))
}

// condition times: now, the past, the future.
func (a *attacker) conditionTime() string {
	now := time.Now()
	switch a.rng.IntN(4) {
	case 0:
		return now.UTC().Format(time.RFC3339)
	case 1:
		return now.Add(-time.Duration(a.rng.Int64N(int64(10 * 365 * 24 * time.Hour)))).UTC().Format(time.RFC3339)
	case 2:
		return now.Add(-time.Duration(a.rng.Int64N(int64(10 * time.Minute)))).UTC().Format(time.RFC3339)
	default:
		return now.Add(time.Duration(a.rng.Int64N(int64(100 * 365 * 24 * time.Hour)))).UTC().Format(time.RFC3339)
	}
}

// conditions replaces the node's conditions with one to eight: Ready most of the time, the
// kubelet's pressure conditions, types of its own (some 316 characters long), any status (also one
// that is none of True, False and Unknown), transition times in the past and the future, and
// reasons and messages up to 64 KiB.
func (a *attacker) conditions(ctx context.Context) error {
	types := []string{"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}
	var list []map[string]string
	seen := map[string]bool{}
	if a.rng.IntN(5) != 0 {
		list = append(list, a.condition("Ready"))
		seen["Ready"] = true
	}
	for range a.rng.IntN(8) {
		t := types[a.rng.IntN(len(types))]
		switch a.rng.IntN(3) {
		case 0:
			t = fmt.Sprintf("Hostile%d", a.rng.IntN(64))
		case 1:
			t = "Hostile" + strings.Repeat("x", a.rng.IntN(310))
		}
		if seen[t] {
			continue
		}
		seen[t] = true
		list = append(list, a.condition(t))
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": list}})
	if err != nil {
		return err
	}
	return mergePatch(ctx, a.cs, a.node, string(body), "status")
}

func (a *attacker) condition(t string) map[string]string {
	status := []string{"True", "False", "Unknown", "Maybe", ""}[min(a.rng.IntN(7), 4)]
	c := map[string]string{"type": t, "status": status, "lastTransitionTime": a.conditionTime(), "lastHeartbeatTime": a.conditionTime()}
	if a.rng.IntN(3) == 0 {
		c["reason"] = a.filler(a.rng.IntN(1 << 10))
		c["message"] = a.filler(int(float64(64<<10) * pow(a.rng.Float64(), 2)))
	}
	return c
}

// cordon sets or clears spec.unschedulable.
func (a *attacker) cordon(ctx context.Context) error {
	return mergePatch(ctx, a.cs, a.node, fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, a.rng.IntN(2) == 0))
}

// taint tries to add or remove a taint: NodeRestriction refuses both.
func (a *attacker) taint(ctx context.Context) error {
	if a.rng.IntN(2) == 0 {
		return mergePatch(ctx, a.cs, a.node, `{"spec":{"taints":null}}`)
	}
	return mergePatch(ctx, a.cs, a.node, `{"spec":{"taints":[{"key":"hostile.example.com/t","effect":"NoExecute"}]}}`)
}

// lease renews, rewrites, deletes or recreates the node's Lease in kube-node-lease, with any
// holder, duration and renew time.
func (a *attacker) lease(ctx context.Context) error {
	leases := a.cs.CoordinationV1().Leases(nodeLeaseNamespace)
	if a.rng.IntN(8) == 0 {
		return leases.Delete(ctx, a.node, metav1.DeleteOptions{})
	}
	renew := metav1.NewMicroTime(time.Now().Add(time.Duration(a.rng.Int64N(int64(200*365*24*time.Hour))) - 100*365*24*time.Hour))
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(a.filler(1 + a.rng.IntN(4<<10))),
		LeaseDurationSeconds: ptr.To(int32(1 + a.rng.IntN(1<<30))),
		RenewTime:            &renew,
	}
	l, err := leases.Get(ctx, a.node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.node, Namespace: nodeLeaseNamespace}, Spec: spec}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec = spec
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// forbidden tries what NodeRestriction refuses: its selector label away, a control-plane role, a
// restricted label, another node's Lease.
func (a *attacker) forbidden(ctx context.Context) error {
	switch a.rng.IntN(4) {
	case 0:
		return mergePatch(ctx, a.cs, a.node, fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, restrictedLabel))
	case 1:
		return mergePatch(ctx, a.cs, a.node, `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`)
	case 2:
		return mergePatch(ctx, a.cs, a.node, `{"metadata":{"labels":{"node-restriction.kubernetes.io/x":"y"}}}`)
	default:
		_, err := a.cs.CoordinationV1().Leases(nodeLeaseNamespace).Create(ctx,
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.node + "-neighbour", Namespace: nodeLeaseNamespace}}, metav1.CreateOptions{})
		return err
	}
}

// summary says what the attacker did, one line per figure.
func (s attackStats) summary() string {
	var b strings.Builder
	names := make([]string, 0, len(s.Writes))
	for n := range s.Writes {
		names = append(names, n)
	}
	sort.Strings(names)
	total := 0
	for _, n := range names {
		total += s.Writes[n]
		fmt.Fprintf(&b, "%-10s %5d writes, %5d refused\n", n, s.Writes[n], s.Refused[n])
	}
	fmt.Fprintf(&b, "in all     %5d writes\n", total)
	reasons := make([]string, 0, len(s.Refusals))
	for r := range s.Refusals {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		fmt.Fprintf(&b, "refused: %s x%d\n", r, s.Refusals[r])
	}
	fmt.Fprintf(&b, "request-remediation values: %d, of them %d of 1 KiB or more (%.1f MiB in all)\n", s.RequestValues, s.LargeRequests, mib(s.LargeRequestBytes))
	fmt.Fprintf(&b, "repair-budget-reset values: %d, of them %d of 1 KiB or more (%.1f MiB in all)\n", s.ResetValues, s.LargeResets, mib(s.LargeResetBytes))
	fmt.Fprintf(&b, "zone labels written: %d\n", s.Zones)
	return b.String()
}

func mib[T int | float64 | uint64](n T) float64 { return float64(n) / (1 << 20) }

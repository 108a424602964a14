package lease

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultNamespace is where node leases live unless configured otherwise; other operators that
// touch nodes (maintenance, upgrades) coordinate through the same leases.
const DefaultNamespace = "medik8s-leases"

const (
	// SingleTemplateStep is the step duration a lease assumes for a single remediationTemplate,
	// which has no timeout (the public operator's DefaultRemediationDuration).
	SingleTemplateStep = 10 * time.Minute
	// Buffer is added to the step duration so the lease outlives the step it covers (the public
	// operator's LeaseBuffer).
	Buffer = time.Minute
	// OverdueFactor: a remediation step running for this many lease durations is stuck, and times
	// out (the public operator's factor).
	OverdueFactor = 3
	// Recheck is how soon a node held back without a known end (a lease of another party without an
	// expiry, the etcd guard) is looked at again: the public operator's one-minute retry for both.
	Recheck = time.Minute
	// MaxDuration is the longest duration a Lease holds (leaseDurationSeconds is an int32).
	MaxDuration = time.Duration(math.MaxInt32) * time.Second
)

// Name is the name of a node's lease: "node-<node>", the public operator's. A node name so long
// that the prefix would make it an invalid name is cut and completed with a hash of the whole name,
// so every node still has its own lease.
func Name(node string) string {
	name := "node-" + node
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	suffix := "-" + hex.EncodeToString(sum[:8])
	head := strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-")
	return head + suffix
}

// Holder is the holder identity of the NodeHealthCheck named nhc: "NodeHealthCheck-<name>".
func Holder(nhc string) string { return "NodeHealthCheck-" + nhc }

// Duration is the lease duration for a step: its timeout (or SingleTemplateStep for a single
// template) plus Buffer, at most what a lease can hold.
func Duration(stepTimeout time.Duration) time.Duration {
	if stepTimeout <= 0 {
		stepTimeout = SingleTemplateStep
	}
	return min(stepTimeout, MaxDuration-Buffer) + Buffer
}

// Seconds is the duration in whole seconds, as a Lease holds it.
func Seconds(d time.Duration) int32 {
	return int32(min(d, MaxDuration) / time.Second)
}

// Overdue is how long a remediation step may run before it counts as stuck and times out:
// OverdueFactor lease durations of the step, measured from when the step started (its CR), never
// from a lease's acquisition: the public operator keeps a lease's first acquireTime across steps,
// so a lease taken over from it would make a later step overdue at once.
func Overdue(stepTimeout time.Duration) time.Duration {
	d := Duration(stepTimeout)
	if d > math.MaxInt64/OverdueFactor {
		return math.MaxInt64
	}
	return OverdueFactor * d
}

// ForeignHold reports whether a party other than holder holds the lease at now, and until when
// (zero: no expiry is known, because it has no duration or renew time: it is held until it is
// released). A nil lease is held by nobody.
func ForeignHold(l *coordinationv1.Lease, holder string, now time.Time) (bool, time.Time) {
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || *l.Spec.HolderIdentity == holder {
		return false, time.Time{}
	}
	if l.Spec.LeaseDurationSeconds == nil || l.Spec.RenewTime == nil {
		return true, time.Time{}
	}
	expires := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return now.Before(expires), expires
}

// StepStartSlack is how much later than a lease's acquireTime a step may start and still be the
// step the lease was acquired for (Renew); escalation steps last minutes. A step's start is its
// CR's creationTimestamp (the API server's clock, whole seconds), taken after the lease was
// acquired for it with the operator's clock: counting it as a new step renewed most leases of the
// scale benchmark's outage a second time right after taking them (660 of 900).
const StepStartSlack = 10 * time.Second

// Renewal is what holding a lease for a step takes (Renew).
type Renewal struct {
	// Write is set when the lease must be written: it is not holder's, its step changed, a third
	// of its duration has passed since it was renewed, or its duration is not the step's.
	Write bool
	// AcquireTime is the acquireTime to write: the step's start when the lease changes hands or
	// steps, otherwise the one it has.
	AcquireTime time.Time
	// RenewAt is when to renew it next: a third of its duration after the renewal (now when
	// written).
	RenewAt time.Time
}

// Renew says how holder holds a lease that nobody else holds (ForeignHold: free, expired, or
// holder's) for a step of the duration that started at stepStart, at now.
func Renew(l *coordinationv1.Lease, holder string, duration time.Duration, stepStart, now time.Time) Renewal {
	var renewed, acquired time.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	if l.Spec.AcquireTime != nil {
		acquired = l.Spec.AcquireTime.Time
	}
	ours := HolderOf(l) == holder
	stepChanged := ours && stepStart.Sub(acquired) > StepStartSlack
	seconds := Seconds(duration)
	if ours && !stepChanged && now.Before(renewed.Add(duration/3)) && l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds == seconds {
		return Renewal{AcquireTime: acquired, RenewAt: renewed.Add(duration / 3)}
	}
	if !ours || stepChanged {
		acquired = stepStart
	}
	return Renewal{Write: true, AcquireTime: acquired, RenewAt: now.Add(duration / 3)}
}

// HolderOf returns the lease's holder identity ("" for none).
func HolderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// ReleaseLabel labels the node leases the operator creates with the identity of its installation
// (the manager's --release-identity, which the chart sets from the release's namespace and name).
// The uninstall of a release (manager cleanup) deletes only the leases with its identity: the lease
// namespace is shared with other releases, the public operator (whose leases carry the same holder
// identities) and other medik8s operators.
const ReleaseLabel = "nodehealthcheck.medik8s.io/release"

// ReleaseOf returns the release identity a lease is labelled with ("" for none).
func ReleaseOf(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return l.Labels[ReleaseLabel]
}

// ValidRelease says what is wrong with a release identity, nil when it may label a lease (empty
// included: no label).
func ValidRelease(release string) error {
	if errs := validation.IsValidLabelValue(release); len(errs) > 0 {
		return fmt.Errorf("release identity %q is not a valid label value: %s", release, strings.Join(errs, "; "))
	}
	return nil
}

// IsNodeHealthCheckHolder reports whether a holder identity is a NodeHealthCheck's (this operator's
// or the public one's).
func IsNodeHealthCheckHolder(holder string) bool {
	return strings.HasPrefix(holder, "NodeHealthCheck-")
}

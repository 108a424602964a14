package targets

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// The CRs of nodes a NodeHealthCheck does not select (Snapshot.Orphans: deleted, or no longer
// matched) are removed by the remediation controller, but for those that stay: all of them while
// the NodeHealthCheck keeps orphans, and the CRs KeptOrphanCR names. A node whose CRs stay is still
// in flight under maxInFlight.

// KeepsOrphans reports whether the CRs of nodes the NodeHealthCheck does not select (Orphans) are
// left alone now: while it is paused (spec.pauseRequests), as the public operator leaves them, and
// while its selector does not parse (it selects nothing, so every node would look unselected).
func (s *Snapshot) KeepsOrphans() bool { return len(s.NHC.Spec.PauseRequests) > 0 || s.badSelector }

// KeptOrphanCR reports whether a CR of a node the NodeHealthCheck does not select stays even while
// orphans are removed: its remediator deletes the node for good (PermanentNodeDeletionExpected=True)
// and is not done (no Succeeded=True), or it is being deleted already (a remediator's finalizer
// holds it).
func KeptOrphanCR(cr *unstructured.Unstructured) bool {
	if !cr.GetDeletionTimestamp().IsZero() {
		return true
	}
	return remediationcr.Condition(cr, remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected) == metav1.ConditionTrue &&
		remediationcr.Condition(cr, remediationv1alpha1.RemediationConditionSucceeded) != metav1.ConditionTrue
}

// inFlightUnselected counts the nodes the NodeHealthCheck does not select whose CRs stay
// (KeepsOrphans, KeptOrphanCR): their remediation is still in flight (a machine being replaced).
func (s *Snapshot) inFlightUnselected() int {
	n := 0
	for _, node := range s.Orphans {
		if s.KeepsOrphans() || slices.ContainsFunc(s.CRs[node], func(cr unstructured.Unstructured) bool { return KeptOrphanCR(&cr) }) {
			n++
		}
	}
	if s.KeepsOrphans() {
		n += len(s.Previous) // kept while paused, as orphans are
	}
	return n
}

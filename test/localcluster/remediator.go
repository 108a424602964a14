package localcluster

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// Remediator is a test remediator for one remediation kind (TestRemediation unless set): for each
// new CR it "reboots" the node (its heartbeats stop, and resume after RebootDelay) and then reports Succeeded=True. CRs
// created from a template marked with Fail report Succeeded=False at once instead, so that
// escalation moves on.
type Remediator struct {
	// Client acts as the remediator.
	Client client.Client
	// Namespace holds the CRs.
	Namespace string
	// APIVersion and Kind are the CRs' kind; empty: test.medik8s.io/v1alpha1 TestRemediation.
	APIVersion, Kind string
	// RebootDelay is how long a "reboot" takes.
	RebootDelay time.Duration
	// Log receives what the remediator does (for example GinkgoWriter.Printf); may be nil.
	Log func(format string, args ...any)

	mu      sync.Mutex
	failing map[string]bool
	holding map[string]bool
	seen    map[types.UID]bool
}

// Hold makes the remediator ignore CRs of the template (true), as a remediator that is slow or
// stuck, until released (false).
func (r *Remediator) Hold(template string, hold bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holding == nil {
		r.holding = map[string]bool{}
	}
	r.holding[template] = hold
}

// Fail makes CRs of the template fail (true) or work (false).
func (r *Remediator) Fail(template string, fail bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing == nil {
		r.failing = map[string]bool{}
	}
	r.failing[template] = fail
}

// Run acts on CRs until ctx ends. It polls: it is test code, and its delays are the point.
func (r *Remediator) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		list := &unstructured.UnstructuredList{}
		apiVersion, kind := r.APIVersion, r.Kind
		if kind == "" {
			apiVersion, kind = "test.medik8s.io/v1alpha1", "TestRemediation"
		}
		list.SetAPIVersion(apiVersion)
		list.SetKind(kind + "List")
		if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace)); err != nil {
			continue
		}
		for i := range list.Items {
			cr := list.Items[i]
			r.mu.Lock()
			if r.seen == nil {
				r.seen = map[types.UID]bool{}
			}
			template := cr.GetAnnotations()[remediationv1alpha1.TemplateNameAnnotation]
			if r.holding[template] {
				r.mu.Unlock()
				continue
			}
			seen := r.seen[cr.GetUID()]
			r.seen[cr.GetUID()] = true
			fail := r.failing[template]
			r.mu.Unlock()
			if seen || !cr.GetDeletionTimestamp().IsZero() {
				continue
			}
			go r.remediate(ctx, cr, fail)
		}
	}
}

func (r *Remediator) remediate(ctx context.Context, cr unstructured.Unstructured, fail bool) {
	node := cr.GetAnnotations()[remediationv1alpha1.NodeNameAnnotation]
	if node == "" {
		node = cr.GetName()
	}
	if fail {
		r.logf("remediator: %s for node %s fails", cr.GetName(), node)
		r.setSucceeded(ctx, cr, metav1.ConditionFalse, "RebootFailed")
		return
	}
	r.logf("remediator: rebooting node %s (%s)", node, cr.GetName())
	_ = SetHeartbeats(ctx, r.Client, node, false)
	select {
	case <-ctx.Done():
		return
	case <-time.After(r.RebootDelay):
	}
	r.logf("remediator: node %s is back", node)
	_ = SetHeartbeats(ctx, r.Client, node, true)
	r.setSucceeded(ctx, cr, metav1.ConditionTrue, "Rebooted")
}

func (r *Remediator) setSucceeded(ctx context.Context, cr unstructured.Unstructured, status metav1.ConditionStatus, reason string) {
	for range 10 {
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(&cr), &cr); err != nil {
			return
		}
		list := []any{map[string]any{"type": remediationv1alpha1.RemediationConditionSucceeded, "status": string(status), "reason": reason,
			"message": "test remediator", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
		_ = unstructured.SetNestedSlice(cr.Object, list, "status", "conditions")
		if err := r.Client.Status().Update(ctx, &cr); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *Remediator) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format+"\n", args...)
	}
}

package machines

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// keptMetadata are the metadata fields a cached Machine keeps: its identity, labels and owners
// (IsControlPlane, and the Cluster API MachineHealthCheck detector's selectors) and what an
// informer's store needs.
var keptMetadata = []string{"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "labels", "ownerReferences"}

// Trim returns the Machine reduced to what the operator reads of it: the metadata above,
// spec.clusterName and status.nodeRef.name. A Machine's spec and status hold provider data
// (kilobytes per Machine) nothing reads.
func Trim(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := map[string]any{}
	for _, f := range []string{"apiVersion", "kind"} {
		if v, ok := u.Object[f]; ok {
			out[f] = v
		}
	}
	if meta, ok := u.Object["metadata"].(map[string]any); ok {
		kept := map[string]any{}
		for _, f := range keptMetadata {
			if v, ok := meta[f]; ok {
				kept[f] = v
			}
		}
		out["metadata"] = kept
	}
	if v, ok := nested(u.Object, "spec", "clusterName").(string); ok {
		out["spec"] = map[string]any{"clusterName": v}
	}
	if v, ok := nested(u.Object, "status", "nodeRef", "name").(string); ok {
		out["status"] = map[string]any{"nodeRef": map[string]any{"name": v}}
	}
	return &unstructured.Unstructured{Object: out}
}

// Transform returns a cache transform that trims Machines of both kinds (Trim) and hands every
// other object to next (nil: returned as it is). The operator's cache holds one informer per
// Machine kind, shared by the Machine links and the Cluster API MachineHealthCheck detector.
func Transform(next func(any) (any, error)) func(any) (any, error) {
	return func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok && IsMachine(u.GroupVersionKind().GroupKind()) {
			return Trim(u), nil
		}
		if next == nil {
			return obj, nil
		}
		return next(obj)
	}
}

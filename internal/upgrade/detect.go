package upgrade

import (
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
)

// What the cluster-wide detectors read from objects they get from the API. The upgradeguard
// controller fetches; these functions decide.

// ClusterVersionProgressing returns the ClusterVersion signal when an OpenShift ClusterVersion has
// Progressing=True (the Cluster Version Operator applies a release: an upgrade). It began when the
// condition became True or, when later, when the update being applied started (the newest entry of
// status.history, state Partial): an upgrade started while an earlier one was stuck is a new one.
func ClusterVersionProgressing(cv *unstructured.Unstructured) *Signal {
	c := findCondition(cv, "Progressing")
	if c == nil || c["status"] != "True" {
		return nil
	}
	msg := fmt.Sprintf("ClusterVersion %s is progressing", cv.GetName())
	if m, _ := c["message"].(string); m != "" {
		msg += ": " + m
	}
	since := timeField(c, "lastTransitionTime")
	if history, _, _ := unstructured.NestedSlice(cv.Object, "status", "history"); len(history) > 0 {
		if h, ok := history[0].(map[string]any); ok && h["state"] == "Partial" {
			if started := timeField(h, "startedTime"); started.After(since) {
				since = started
			}
		}
	}
	return &Signal{Detector: DetectorClusterVersion, Reason: remediationv1alpha1.ConditionReasonClusterVersionProgressing, Message: msg,
		Object: reference(cv), Since: since}
}

// ClassifyMachineHealthChecks decides what OpenShift MachineHealthChecks mean for NodeHealthChecks:
// none, or a single one whose only unhealthy condition is Terminating (the default termination
// handler), are tolerated; any other would remediate the same machines and conflicts.
func ClassifyMachineHealthChecks(mhcs []unstructured.Unstructured) MachineHealthChecks {
	if len(mhcs) == 0 {
		return MachineHealthChecks{}
	}
	if len(mhcs) == 1 {
		conds, _, _ := unstructured.NestedSlice(mhcs[0].Object, "spec", "unhealthyConditions")
		if len(conds) == 1 {
			if c, ok := conds[0].(map[string]any); ok && c["type"] == string(TerminatingCondition) {
				status, _ := c["status"].(string)
				if status == "" {
					status = string(corev1.ConditionTrue)
				}
				return MachineHealthChecks{Terminating: corev1.ConditionStatus(status)}
			}
		}
	}
	names := make([]string, 0, len(mhcs))
	for i, m := range mhcs {
		if i == maxNamedNodes {
			names = append(names, fmt.Sprintf("and %d more", len(mhcs)-maxNamedNodes))
			break
		}
		names = append(names, m.GetNamespace()+"/"+m.GetName())
	}
	return MachineHealthChecks{Conflict: fmt.Sprintf("MachineHealthCheck %s would remediate the same machines; "+
		"NodeHealthChecks stay disabled while a MachineHealthCheck other than the default termination handler exists", strings.Join(names, ", "))}
}

// ClusterAPIRollout says why a Cluster API KubeadmControlPlane or MachineDeployment (v1beta1 or
// v1beta2) is rolling out, or "" when it is not: its controller has not observed the latest spec,
// it reports RollingOut=True, fewer replicas are up to date than desired, or more replicas exist
// than desired (old machines not yet removed).
func ClusterAPIRollout(obj *unstructured.Unstructured) string {
	observed, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if !found || observed < obj.GetGeneration() {
		return "its controller has not observed the latest spec yet"
	}
	if c := findCondition(obj, "RollingOut"); c != nil && c["status"] == "True" {
		return "it reports RollingOut"
	}
	desired, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if !found {
		desired = 1
	}
	upToDate, found, _ := unstructured.NestedInt64(obj.Object, "status", "upToDateReplicas") // v1beta2
	if !found {
		upToDate, _, _ = unstructured.NestedInt64(obj.Object, "status", "updatedReplicas") // v1beta1
	}
	if upToDate < desired {
		return fmt.Sprintf("%d of %d replicas are up to date", upToDate, desired)
	}
	if replicas, _, _ := unstructured.NestedInt64(obj.Object, "status", "replicas"); replicas > desired {
		return fmt.Sprintf("%d replicas exist, %d desired", replicas, desired)
	}
	return ""
}

// ClusterAPIRollouts returns one Cluster API signal per object rolling out (see ClusterAPIRollout),
// ordered by kind, namespace and name. Each rollout is a signal of its own, with its own maximum
// pause: a MachineDeployment that starts rolling out while another is stuck pauses remediation
// again. A rollout began when the object's RollingOut condition (v1beta2, also under
// status.v1beta2 of v1beta1 objects) became True or, for a v1beta1 KubeadmControlPlane, when
// MachinesSpecUpToDate became False; without those, Since is zero and the gate fills it in.
func ClusterAPIRollouts(objs []unstructured.Unstructured) []Signal {
	var out []Signal
	for i := range objs {
		o := &objs[i]
		why := ClusterAPIRollout(o)
		if why == "" {
			continue
		}
		out = append(out, Signal{Detector: DetectorClusterAPI, Reason: remediationv1alpha1.ConditionReasonClusterAPIRollout,
			Message: fmt.Sprintf("Cluster API rolls out %s %s/%s (%s)", o.GetKind(), o.GetNamespace(), o.GetName(), why),
			Object:  reference(o), Since: rolloutSince(o)})
	}
	slices.SortFunc(out, func(a, b Signal) int { return strings.Compare(a.key(), b.key()) })
	return out
}

// rolloutSince returns when a Cluster API object's rollout began, as its conditions tell, or zero.
func rolloutSince(obj *unstructured.Unstructured) time.Time {
	for _, path := range [][]string{{"status", "conditions"}, {"status", "v1beta2", "conditions"}} {
		if c := findConditionAt(obj, "RollingOut", path...); c != nil && c["status"] == "True" {
			return timeField(c, "lastTransitionTime")
		}
	}
	if c := findCondition(obj, "MachinesSpecUpToDate"); c != nil && c["status"] == "False" {
		return timeField(c, "lastTransitionTime")
	}
	return time.Time{}
}

// PauseConfigMap returns the pause signal of an existing pause ConfigMap; its data key "reason", when
// set, is quoted in the message. It is explicit: the maximum pause does not end it.
func PauseConfigMap(cm *corev1.ConfigMap) *Signal {
	msg := fmt.Sprintf("pause ConfigMap %s/%s exists", cm.Namespace, cm.Name)
	if r := cm.Data["reason"]; r != "" {
		msg += ": " + r
	}
	return &Signal{Detector: DetectorPauseObject, Reason: remediationv1alpha1.ConditionReasonPauseObject, Message: msg,
		Object: &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID},
		Since:  cm.CreationTimestamp.Time, Explicit: true}
}

// PauseLease returns the pause signal of an existing pause Lease, unless it expired: a Lease with
// spec.leaseDurationSeconds pauses until renewTime (or acquireTime) plus that duration, so a tool
// that dies does not pause remediation forever; without a duration it pauses until deleted. until
// is when the signal expires (zero: never). It is explicit: the maximum pause does not end it.
func PauseLease(l *coordinationv1.Lease, now time.Time) (s *Signal, until time.Time) {
	msg := fmt.Sprintf("pause Lease %s/%s exists", l.Namespace, l.Name)
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		msg += ", held by " + *h
	}
	since := l.CreationTimestamp.Time
	if l.Spec.AcquireTime != nil {
		since = l.Spec.AcquireTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		start := since
		if l.Spec.RenewTime != nil {
			start = l.Spec.RenewTime.Time
		}
		until = start.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
		if !now.Before(until) {
			return nil, time.Time{}
		}
		msg += " until " + until.UTC().Format(time.RFC3339)
	}
	return &Signal{Detector: DetectorPauseObject, Reason: remediationv1alpha1.ConditionReasonPauseObject, Message: msg,
		Object: &corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: l.Namespace, Name: l.Name, UID: l.UID},
		Since:  since, Explicit: true}, until
}

func findCondition(obj *unstructured.Unstructured, condType string) map[string]any {
	return findConditionAt(obj, condType, "status", "conditions")
}

func findConditionAt(obj *unstructured.Unstructured, condType string, path ...string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, path...)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == condType {
			return m
		}
	}
	return nil
}

// timeField reads an RFC 3339 time from a field of an unstructured map; zero when it is missing or
// does not parse.
func timeField(m map[string]any, field string) time.Time {
	v, _ := m[field].(string)
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

func reference(obj *unstructured.Unstructured) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

package upgrade

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// DetectorClusterAPIMachineHealthCheck finds the nodes that Cluster API MachineHealthChecks cover
// (automatic where Cluster API's MachineHealthCheck or Machine kind is served). Not a signal: a
// covered node is left to its MachineHealthCheck, which remediates it (never two remediators on
// one node).
const DetectorClusterAPIMachineHealthCheck = "clusterapimachinehealthcheck"

// ClusterAPICoverage returns, for each node whose Machine a Cluster API MachineHealthCheck
// selects, that MachineHealthCheck as "namespace/name" (the first by that order when several
// do). A MachineHealthCheck selects the Machines of its namespace and spec.clusterName whose labels
// match spec.selector (an empty selector selects none, as Cluster API's webhook requires one); a
// Machine's node is status.nodeRef.name. Paused MachineHealthChecks (cluster.x-k8s.io/paused) still
// count: they resume on their own.
func ClusterAPICoverage(mhcs, machines []unstructured.Unstructured) map[string]string {
	slices.SortFunc(mhcs, func(a, b unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	out := map[string]string{}
	for i := range mhcs {
		mhc := &mhcs[i]
		cluster, _, _ := unstructured.NestedString(mhc.Object, "spec", "clusterName")
		raw, found, _ := unstructured.NestedMap(mhc.Object, "spec", "selector")
		if !found || len(raw) == 0 {
			continue
		}
		ls := &metav1.LabelSelector{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, ls); err != nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			continue
		}
		for j := range machines {
			m := &machines[j]
			node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
			machineCluster, _, _ := unstructured.NestedString(m.Object, "spec", "clusterName")
			if node == "" || m.GetNamespace() != mhc.GetNamespace() || machineCluster != cluster || !sel.Matches(labels.Set(m.GetLabels())) {
				continue
			}
			if _, taken := out[node]; !taken {
				out[node] = mhc.GetNamespace() + "/" + mhc.GetName()
			}
		}
	}
	return out
}

// CoverageCounts counts the nodes each MachineHealthCheck covers.
func CoverageCounts(coverage map[string]string) map[string]int {
	out := map[string]int{}
	for _, mhc := range coverage {
		out[mhc]++
	}
	return out
}

func sameCoverage(a, b map[string]string) bool { return maps.Equal(a, b) }

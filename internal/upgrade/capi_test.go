package upgrade

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func capiObject(kind, namespace, name string, labels map[string]string, fields map[string]any) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": kind}}
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func TestClusterAPICoverage(t *testing.T) {
	mhc := func(ns, name, cluster string, selector map[string]any) unstructured.Unstructured {
		spec := map[string]any{"clusterName": cluster}
		if selector != nil {
			spec["selector"] = selector
		}
		return capiObject("MachineHealthCheck", ns, name, nil, map[string]any{"spec": spec})
	}
	machine := func(ns, name, cluster, node string, labels map[string]string) unstructured.Unstructured {
		fields := map[string]any{"spec": map[string]any{"clusterName": cluster}}
		if node != "" {
			fields["status"] = map[string]any{"nodeRef": map[string]any{"name": node}}
		}
		return capiObject("Machine", ns, name, labels, fields)
	}
	workers := map[string]any{"matchLabels": map[string]any{"pool": "workers"}}
	got := ClusterAPICoverage(
		[]unstructured.Unstructured{
			mhc("ns", "workers-b", "c1", workers),
			mhc("ns", "workers-a", "c1", workers),
			mhc("ns", "empty-selector", "c1", map[string]any{}),
			mhc("other", "elsewhere", "c1", workers),
		},
		[]unstructured.Unstructured{
			machine("ns", "m1", "c1", "node-1", map[string]string{"pool": "workers"}),
			machine("ns", "m2", "c2", "node-2", map[string]string{"pool": "workers"}), // another cluster
			machine("ns", "m3", "c1", "node-3", map[string]string{"pool": "masters"}), // not selected
			machine("ns", "m4", "c1", "", map[string]string{"pool": "workers"}),       // no node yet
		})
	if len(got) != 1 || got["node-1"] != "ns/workers-a" {
		t.Fatalf("coverage = %v, want node-1 covered by ns/workers-a (the first by name), nothing else", got)
	}
	if c := CoverageCounts(got); c["ns/workers-a"] != 1 || len(c) != 1 {
		t.Fatalf("counts = %v", c)
	}
}

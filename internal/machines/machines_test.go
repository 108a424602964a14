package machines

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/medik8s/node-healthcheck/internal/clusterapi"
)

func TestClaimOf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        Claim
		claimed     bool
	}{
		{"none", nil, Claim{}, false},
		{"OpenShift", map[string]string{OpenShiftMachineAnnotation: "openshift-machine-api/worker-0"},
			Claim{Kind: openShiftMachine, Annotation: OpenShiftMachineAnnotation, Namespace: "openshift-machine-api", Name: "worker-0"}, true},
		{"OpenShift without a namespace", map[string]string{OpenShiftMachineAnnotation: "worker-0"}, Claim{}, false},
		{"OpenShift with an empty name", map[string]string{OpenShiftMachineAnnotation: "ns/"}, Claim{}, false},
		{"OpenShift with an empty namespace", map[string]string{OpenShiftMachineAnnotation: "/m"}, Claim{}, false},
		{"Cluster API", map[string]string{ClusterAPIMachineAnnotation: "m", ClusterAPINamespaceAnnotation: "ns", ClusterAPIClusterNameAnnotation: "c1"},
			Claim{Kind: clusterapi.Machine, Annotation: ClusterAPIMachineAnnotation, Namespace: "ns", Name: "m", Cluster: "c1"}, true},
		{"Cluster API naming no cluster", map[string]string{ClusterAPIMachineAnnotation: "m", ClusterAPINamespaceAnnotation: "ns"},
			Claim{Kind: clusterapi.Machine, Annotation: ClusterAPIMachineAnnotation, Namespace: "ns", Name: "m"}, true},
		{"Cluster API without a namespace", map[string]string{ClusterAPIMachineAnnotation: "m", ClusterAPIClusterNameAnnotation: "c1"}, Claim{}, false},
		{"Cluster API without a name", map[string]string{ClusterAPINamespaceAnnotation: "ns"}, Claim{}, false},
		{"OpenShift first", map[string]string{OpenShiftMachineAnnotation: "a/b", ClusterAPIMachineAnnotation: "m", ClusterAPINamespaceAnnotation: "ns"},
			Claim{Kind: openShiftMachine, Annotation: OpenShiftMachineAnnotation, Namespace: "a", Name: "b"}, true},
		{"OpenShift naming no object a node could have", map[string]string{OpenShiftMachineAnnotation: "nodeinput.bounded/262144/abc/x"}, Claim{}, false},
		{"Cluster API with an invalid name", map[string]string{ClusterAPIMachineAnnotation: "M/../x", ClusterAPINamespaceAnnotation: "ns"}, Claim{}, false},
		{"Cluster API with an invalid namespace", map[string]string{ClusterAPIMachineAnnotation: "m", ClusterAPINamespaceAnnotation: "Not_A_Label"}, Claim{}, false},
		{"a malformed OpenShift claim leaves Cluster API's", map[string]string{OpenShiftMachineAnnotation: "b", ClusterAPIMachineAnnotation: "m", ClusterAPINamespaceAnnotation: "ns"},
			Claim{Kind: clusterapi.Machine, Annotation: ClusterAPIMachineAnnotation, Namespace: "ns", Name: "m"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, claimed := ClaimOf(tc.annotations)
			if got != tc.want || claimed != tc.claimed {
				t.Errorf("ClaimOf(%v) = %+v, %v; want %+v, %v", tc.annotations, got, claimed, tc.want, tc.claimed)
			}
		})
	}
}

// A node without a claim, as most are, costs a decision no allocation (the decisions ask for every
// selected node).
func TestClaimOfANodeWithoutAClaimAllocatesNothing(t *testing.T) {
	annotations := map[string]string{"node.alpha.kubernetes.io/ttl": "0", ClusterAPIClusterNameAnnotation: "c1"}
	if allocs := testing.AllocsPerRun(100, func() { ClaimOf(annotations) }); allocs != 0 {
		t.Errorf("ClaimOf of a node without a claim: %v allocations, want 0", allocs)
	}
}

func TestVerify(t *testing.T) {
	openshift := Claim{Kind: openShiftMachine, Annotation: OpenShiftMachineAnnotation, Namespace: "ns", Name: "m"}
	capi := Claim{Kind: clusterapi.Machine, Annotation: ClusterAPIMachineAnnotation, Namespace: "ns", Name: "m", Cluster: "c1"}
	noCluster := capi
	noCluster.Cluster = ""
	machine := func(nodeRef, cluster string) *Machine {
		return &Machine{Namespace: "ns", Name: "m", NodeRef: nodeRef, ClusterName: cluster}
	}
	for _, tc := range []struct {
		name    string
		claim   Claim
		machine *Machine
		want    string // "" verifies; otherwise a part of the reason
	}{
		{"OpenShift: nodeRef names the node", openshift, machine("n1", ""), ""},
		{"missing", openshift, nil, "does not exist"},
		{"no nodeRef", openshift, machine("", ""), "names no node"},
		{"another node's Machine", openshift, machine("cp-0", ""), "names node cp-0"},
		{"another Machine than claimed", openshift, &Machine{Namespace: "other", Name: "m", NodeRef: "n1"}, "not the claimed Machine"},
		{"Cluster API: nodeRef and cluster", capi, machine("n1", "c1"), ""},
		{"Cluster API: another cluster", capi, machine("n1", "c2"), `cluster "c2"`},
		{"Cluster API: a Machine of no cluster, the node names one", capi, machine("n1", ""), `cluster ""`},
		{"Cluster API: the node names no cluster", noCluster, machine("n1", "c2"), ""},
		{"Cluster API: the node names no cluster, another node's Machine", noCluster, machine("cp-0", "c1"), "names node cp-0"},
		{"Cluster API: another node's Machine in the named cluster", capi, machine("cp-0", "c1"), "names node cp-0"},
		{"OpenShift ignores spec.clusterName", Claim{Kind: openShiftMachine, Namespace: "ns", Name: "m", Cluster: "x"}, machine("n1", "y"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Verify(tc.claim, "n1", tc.machine)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("Verify = %q; want %q", got, tc.want)
			}
		})
	}
}

func TestIsControlPlane(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Machine
		want bool
	}{
		{"a worker", Machine{Labels: map[string]string{"cluster.x-k8s.io/deployment-name": "md-0"},
			Owners: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "MachineSet", Name: "ms"}}}, false},
		{"nothing", Machine{}, false},
		{"Cluster API label, empty value", Machine{Labels: map[string]string{ClusterAPIControlPlaneLabel: ""}}, true},
		{"owned by KubeadmControlPlane", Machine{Owners: []metav1.OwnerReference{
			{APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlane", Name: "kcp", Controller: ptr.To(true)}}}, true},
		{"owned by another control-plane provider's kind", Machine{Owners: []metav1.OwnerReference{
			{APIVersion: "controlplane.cluster.x-k8s.io/v1alpha1", Kind: "RKE2ControlPlane", Name: "cp"}}}, true},
		{"owned by a ...ControlPlane kind elsewhere", Machine{Owners: []metav1.OwnerReference{
			{APIVersion: "example.com/v1", Kind: "FooControlPlane", Name: "cp"}}}, true},
		{"owned by OpenShift's ControlPlaneMachineSet", Machine{Owners: []metav1.OwnerReference{
			{APIVersion: "machine.openshift.io/v1", Kind: "ControlPlaneMachineSet", Name: "cluster"}}}, true},
		{"OpenShift master role", Machine{Labels: map[string]string{OpenShiftMachineRoleLabel: "master"}}, true},
		{"OpenShift master type", Machine{Labels: map[string]string{OpenShiftMachineTypeLabel: "master"}}, true},
		{"OpenShift worker", Machine{Labels: map[string]string{OpenShiftMachineRoleLabel: "worker", OpenShiftMachineTypeLabel: "worker"}}, false},
		{"a node role label on a Machine is not Cluster API's", Machine{Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsControlPlane(tc.m); got != tc.want {
				t.Errorf("IsControlPlane(%+v) = %v; want %v", tc.m, got, tc.want)
			}
		})
	}
}

// machineObject is a Cluster API Machine as the API server returns it.
func machineObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
		"metadata": map[string]any{
			"name": "cp-0", "namespace": "ns", "uid": "u1", "resourceVersion": "7", "generation": int64(2),
			"labels":          map[string]any{ClusterAPIControlPlaneLabel: "", "cluster.x-k8s.io/cluster-name": "c1"},
			"annotations":     map[string]any{"big": strings.Repeat("x", 1000)},
			"ownerReferences": []any{map[string]any{"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "name": "kcp", "uid": "u2", "controller": true}},
			"managedFields":   []any{map[string]any{"manager": "capi"}},
		},
		"spec": map[string]any{"clusterName": "c1", "bootstrap": map[string]any{"dataSecretName": "s"}, "providerID": "metal3://x"},
		"status": map[string]any{"nodeRef": map[string]any{"name": "n1", "uid": "u3", "kind": "Node"}, "addresses": []any{"10.0.0.1"},
			"phase": "Running"},
	}}
}

func TestFromUnstructured(t *testing.T) {
	u := machineObject()
	got := FromUnstructured(u)
	want := Machine{Namespace: "ns", Name: "cp-0", ClusterName: "c1", NodeRef: "n1",
		Labels: map[string]string{ClusterAPIControlPlaneLabel: "", "cluster.x-k8s.io/cluster-name": "c1"},
		Owners: []metav1.OwnerReference{{APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlane", Name: "kcp", Controller: ptr.To(true)}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromUnstructured = %+v; want %+v", got, want)
	}
	if !reflect.DeepEqual(u, machineObject()) {
		t.Error("FromUnstructured modified the object")
	}
}

func TestTrim(t *testing.T) {
	u := machineObject()
	trimmed := Trim(u)
	want := map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
		"metadata": map[string]any{
			"name": "cp-0", "namespace": "ns", "uid": "u1", "resourceVersion": "7", "generation": int64(2),
			"labels":          map[string]any{ClusterAPIControlPlaneLabel: "", "cluster.x-k8s.io/cluster-name": "c1"},
			"ownerReferences": []any{map[string]any{"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "name": "kcp", "uid": "u2", "controller": true}},
		},
		"spec":   map[string]any{"clusterName": "c1"},
		"status": map[string]any{"nodeRef": map[string]any{"name": "n1"}},
	}
	if !reflect.DeepEqual(trimmed.Object, want) {
		t.Errorf("Trim = %v; want %v", trimmed.Object, want)
	}
	if !reflect.DeepEqual(FromUnstructured(trimmed), FromUnstructured(u)) {
		t.Error("the checks read something Trim drops")
	}
	if !reflect.DeepEqual(Trim(trimmed).Object, trimmed.Object) {
		t.Error("Trim is not idempotent")
	}
	empty := Trim(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine"}})
	if !reflect.DeepEqual(empty.Object, map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine"}) {
		t.Errorf("Trim of a bare Machine = %v", empty.Object)
	}
}

func TestTransform(t *testing.T) {
	var passed []any
	next := func(obj any) (any, error) { passed = append(passed, obj); return obj, nil }
	transform := Transform(next)

	got, err := transform(machineObject())
	if err != nil || got.(*unstructured.Unstructured).Object["spec"].(map[string]any)["bootstrap"] != nil {
		t.Errorf("a Cluster API Machine is not trimmed: %v, %v", got, err)
	}
	openshift := machineObject()
	openshift.SetAPIVersion("machine.openshift.io/v1beta1")
	if got, _ := transform(openshift); got.(*unstructured.Unstructured).Object["status"].(map[string]any)["phase"] != nil {
		t.Error("an OpenShift Machine is not trimmed")
	}
	if len(passed) != 0 {
		t.Errorf("Machines were handed on: %v", passed)
	}
	machineSet := machineObject()
	machineSet.SetKind("MachineSet")
	other := &metav1.PartialObjectMetadata{}
	for _, obj := range []any{machineSet, other} {
		if got, _ := transform(obj); got != obj {
			t.Errorf("%T changed", obj)
		}
	}
	if len(passed) != 2 {
		t.Errorf("other objects handed on: %d; want 2", len(passed))
	}
	if got, _ := Transform(nil)(other); got != other {
		t.Error("without next, another object is not returned as it is")
	}
}

// FuzzVerify checks that a Machine confirms a claim only when it is the claimed Machine and its
// status.nodeRef names the node, whatever the node's annotations say.
func FuzzVerify(f *testing.F) {
	f.Add("ns/m", "", "", "", "n1", "ns", "m", "n1", "", "")
	f.Add("", "m", "ns", "c1", "n1", "ns", "m", "n1", "c1", "master")
	f.Add("", "m", "ns", "", "n1", "ns", "m", "cp-0", "c2", "")
	f.Fuzz(func(t *testing.T, openshift, capiName, capiNamespace, capiCluster, node, ns, name, nodeRef, clusterName, role string) {
		claim, claimed := ClaimOf(map[string]string{OpenShiftMachineAnnotation: openshift, ClusterAPIMachineAnnotation: capiName,
			ClusterAPINamespaceAnnotation: capiNamespace, ClusterAPIClusterNameAnnotation: capiCluster})
		if !claimed {
			if claim != (Claim{}) {
				t.Fatalf("no claim, but %+v", claim)
			}
			return
		}
		if claim.Namespace == "" || claim.Name == "" || !IsMachine(claim.Kind) {
			t.Fatalf("claim %+v names no Machine", claim)
		}
		m := &Machine{Namespace: ns, Name: name, NodeRef: nodeRef, ClusterName: clusterName, Labels: map[string]string{OpenShiftMachineRoleLabel: role}}
		why := Verify(claim, node, m)
		verified := ns == claim.Namespace && name == claim.Name && nodeRef != "" && nodeRef == node &&
			(claim.Kind != clusterapi.Machine || claim.Cluster == "" || clusterName == claim.Cluster)
		if (why == "") != verified {
			t.Fatalf("Verify(%+v, %q, %+v) = %q; verified should be %v", claim, node, m, why, verified)
		}
		if Verify(claim, node, nil) == "" {
			t.Fatal("a missing Machine verified")
		}
		// Trimming keeps every field the checks read.
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
			"metadata": map[string]any{"namespace": ns, "name": name, "labels": map[string]any{OpenShiftMachineRoleLabel: role}},
			"spec":     map[string]any{"clusterName": clusterName}, "status": map[string]any{"nodeRef": map[string]any{"name": nodeRef}}}}
		if got := FromUnstructured(Trim(u)); !reflect.DeepEqual(got, FromUnstructured(u)) || !reflect.DeepEqual(got, *m) {
			t.Fatalf("trimmed %+v; want %+v", got, *m)
		}
		if IsControlPlane(*m) != (role == OpenShiftMasterRole) {
			t.Fatalf("IsControlPlane with role %q", role)
		}
	})
}

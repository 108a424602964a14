package machines

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/medik8s/node-healthcheck/internal/clusterapi"
	"github.com/medik8s/node-healthcheck/internal/openshift"
)

// openShiftMachine is the Machine kind of OpenShift's Machine API; the other kind a node can be
// linked to is clusterapi.Machine (v1beta1 or v1beta2).
var openShiftMachine = openshift.Machine.GroupKind()

// Node annotations that claim a Machine; the node's own credentials can write them.
const (
	// OpenShiftMachineAnnotation names the node's Machine as "<namespace>/<name>".
	OpenShiftMachineAnnotation = "machine.openshift.io/machine"
	// ClusterAPIMachineAnnotation names the node's Machine; ClusterAPINamespaceAnnotation its
	// namespace, and ClusterAPIClusterNameAnnotation the cluster it belongs to.
	ClusterAPIMachineAnnotation     = "cluster.x-k8s.io/machine"
	ClusterAPINamespaceAnnotation   = "cluster.x-k8s.io/cluster-namespace"
	ClusterAPIClusterNameAnnotation = "cluster.x-k8s.io/cluster-name"
)

// Machine labels and owners that make a Machine a control-plane Machine.
const (
	// ClusterAPIControlPlaneLabel marks a Cluster API control-plane Machine (any value).
	ClusterAPIControlPlaneLabel = "cluster.x-k8s.io/control-plane"
	// OpenShiftMachineRoleLabel and OpenShiftMachineTypeLabel are "master" on OpenShift's
	// control-plane Machines.
	OpenShiftMachineRoleLabel = "machine.openshift.io/cluster-api-machine-role"
	OpenShiftMachineTypeLabel = "machine.openshift.io/cluster-api-machine-type"
	// OpenShiftMasterRole is those labels' value on a control-plane Machine.
	OpenShiftMasterRole = "master"
)

// Claim is the Machine a node's annotations name.
type Claim struct {
	// Kind is the Machine's kind (OpenShift or ClusterAPI).
	Kind schema.GroupKind
	// Annotation is the annotation that names the Machine, for messages.
	Annotation string
	// Namespace and Name name the Machine.
	Namespace, Name string
	// Cluster is the Cluster API cluster the node names (cluster.x-k8s.io/cluster-name); "" when it
	// names none.
	Cluster string
}

// String is "<namespace>/<name>".
func (c Claim) String() string { return c.Namespace + "/" + c.Name }

// ClaimOf returns the Machine the node's annotations claim, and false when they claim none. An
// OpenShift annotation of the form "<namespace>/<name>" comes first; otherwise the Cluster API
// annotations, which claim a Machine only when both its name and its namespace are given (the
// public operator's and Cluster API's reading: a partial claim names nothing to look up). The node
// writes these annotations itself: a namespace or name that no object can have (not a DNS label, not
// a DNS subdomain) claims nothing either.
func ClaimOf(annotations map[string]string) (Claim, bool) {
	if ns, name, found := strings.Cut(annotations[OpenShiftMachineAnnotation], "/"); found && validName(ns, name) {
		return Claim{Kind: openShiftMachine, Annotation: OpenShiftMachineAnnotation, Namespace: ns, Name: name}, true
	}
	ns, name := annotations[ClusterAPINamespaceAnnotation], annotations[ClusterAPIMachineAnnotation]
	if !validName(ns, name) {
		return Claim{}, false
	}
	return Claim{Kind: clusterapi.Machine, Annotation: ClusterAPIMachineAnnotation, Namespace: ns, Name: name,
		Cluster: annotations[ClusterAPIClusterNameAnnotation]}, true
}

// validName reports whether a namespace and a name can name an object. Most nodes carry no claim:
// an empty part is refused before the validation, whose refusal builds an error message (every
// decision asks for every selected node: at 5,000 nodes those messages were 15% of the manager's
// allocations).
func validName(namespace, name string) bool {
	if namespace == "" || name == "" {
		return false
	}
	return len(validation.IsDNS1123Label(namespace)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0
}

// Machine is what the checks read of a Machine; none of it can be written with a node's
// credentials.
type Machine struct {
	// Namespace and Name name the Machine.
	Namespace, Name string
	// Labels are its labels.
	Labels map[string]string
	// Owners are its owner references.
	Owners []metav1.OwnerReference
	// ClusterName is spec.clusterName (Cluster API).
	ClusterName string
	// NodeRef is status.nodeRef.name: the node the Machine's controller linked it to.
	NodeRef string
}

// FromUnstructured reads a Machine of either kind. It copies nothing but the labels and owner
// references it needs, and does not modify u (a cached object).
func FromUnstructured(u *unstructured.Unstructured) Machine {
	m := Machine{Namespace: u.GetNamespace(), Name: u.GetName(),
		ClusterName: nestedString(u.Object, "spec", "clusterName"),
		NodeRef:     nestedString(u.Object, "status", "nodeRef", "name")}
	if labels, ok := nested(u.Object, "metadata", "labels").(map[string]any); ok && len(labels) > 0 {
		m.Labels = make(map[string]string, len(labels))
		for k, v := range labels {
			if s, ok := v.(string); ok {
				m.Labels[k] = s
			}
		}
	}
	if refs, ok := nested(u.Object, "metadata", "ownerReferences").([]any); ok {
		for _, r := range refs {
			o, ok := r.(map[string]any)
			if !ok {
				continue
			}
			ref := metav1.OwnerReference{}
			ref.APIVersion, _ = o["apiVersion"].(string)
			ref.Kind, _ = o["kind"].(string)
			ref.Name, _ = o["name"].(string)
			if c, ok := o["controller"].(bool); ok {
				ref.Controller = &c
			}
			m.Owners = append(m.Owners, ref)
		}
	}
	return m
}

func nested(obj map[string]any, fields ...string) any {
	v, found, err := unstructured.NestedFieldNoCopy(obj, fields...)
	if !found || err != nil {
		return nil
	}
	return v
}

func nestedString(obj map[string]any, fields ...string) string {
	s, _ := nested(obj, fields...).(string)
	return s
}

// Verify reports why the Machine does not confirm that it is the claimed Machine of the node, or ""
// when it does. m is nil when the claimed Machine does not exist.
//
// The Machine confirms the claim when its status.nodeRef.name is the node: the Machine's controller
// writes it, the node cannot. For Cluster API, a Machine of another cluster than the one the node
// names does not confirm it (one management cluster may hold Machines of several clusters whose node
// names coincide). A node that names no cluster is checked by status.nodeRef alone: Cluster API
// writes the cluster name together with the Machine's, so its absence is no sign of a forged claim,
// and naming a cluster would not stop one (the node can name any cluster); what a forged claim cannot
// produce is a Machine whose status.nodeRef names the forging node.
func Verify(c Claim, node string, m *Machine) string {
	switch {
	case m == nil:
		return fmt.Sprintf("%s %s does not exist", c.Kind, c)
	case m.Namespace != c.Namespace || m.Name != c.Name:
		return fmt.Sprintf("%s %s/%s is not the claimed Machine %s", c.Kind, m.Namespace, m.Name, c)
	case m.NodeRef == "":
		return "its status.nodeRef names no node"
	case m.NodeRef != node:
		return fmt.Sprintf("its status.nodeRef names node %s", m.NodeRef)
	case c.Kind == clusterapi.Machine && c.Cluster != "" && m.ClusterName != c.Cluster:
		return fmt.Sprintf("it belongs to cluster %q (spec.clusterName), not to cluster %q that the node names", m.ClusterName, c.Cluster)
	}
	return ""
}

// IsControlPlane reports whether the Machine is a control-plane Machine: Cluster API's
// control-plane label, an owner of a control-plane kind (Cluster API's control-plane group, a kind
// named "...ControlPlane" such as KubeadmControlPlane, or OpenShift's ControlPlaneMachineSet), or
// OpenShift's master role or type label. Every owner reference counts, not only the controller's:
// a node taken for a control-plane node is only remediated one at a time (the safe side).
func IsControlPlane(m Machine) bool {
	if _, ok := m.Labels[ClusterAPIControlPlaneLabel]; ok {
		return true
	}
	if m.Labels[OpenShiftMachineRoleLabel] == OpenShiftMasterRole || m.Labels[OpenShiftMachineTypeLabel] == OpenShiftMasterRole {
		return true
	}
	for _, o := range m.Owners {
		gv, _ := schema.ParseGroupVersion(o.APIVersion)
		if gv.Group == clusterapi.ControlPlaneGroup || strings.HasSuffix(o.Kind, "ControlPlane") || o.Kind == "ControlPlaneMachineSet" {
			return true
		}
	}
	return false
}

// IsMachine reports whether the kind is one of the Machine kinds.
func IsMachine(gk schema.GroupKind) bool { return gk == openShiftMachine || gk == clusterapi.Machine }

package remediation

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/openshift"
)

// MachineAnnotation on a Node names its Machine as "<namespace>/<name>" (OpenShift Machine API).
const MachineAnnotation = openshift.MachineAnnotation

// machineOwner returns an owner reference to the node's Machine when the node names one in the
// template's namespace and it exists: OpenShift's (machine.openshift.io/machine: <namespace>/<name>)
// or Cluster API's (cluster.x-k8s.io/machine and cluster.x-k8s.io/cluster-namespace), as Metal3's
// remediation expects of a CR.
func (r *Reconciler) machineOwner(ctx context.Context, node *corev1.Node, namespace string) (*metav1.OwnerReference, error) {
	gvk := openshift.Machine
	ns, name, found := strings.Cut(node.Annotations[MachineAnnotation], "/")
	if !found {
		// Cluster API: the Machine's name and namespace in two annotations; its version is the one
		// the API server prefers (v1beta1 or v1beta2).
		ns, name = node.Annotations[ClusterAPINamespaceAnnotation], node.Annotations[ClusterAPIMachineAnnotation]
		if ns == "" || name == "" || ns != namespace {
			return nil, nil
		}
		mapping, err := r.Client.RESTMapper().RESTMapping(clusterAPIMachine)
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("finding the Cluster API Machine kind: %w", err)
		}
		gvk = mapping.GroupVersionKind
	}
	if ns != namespace || name == "" {
		return nil, nil
	}
	machine := &metav1.PartialObjectMetadata{}
	machine.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, machine); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting machine %s/%s: %w", ns, name, err)
	}
	return &metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name, UID: machine.UID}, nil
}

// Cluster API's annotations on a Node that name its Machine, and the Machine's kind.
const (
	ClusterAPIMachineAnnotation   = "cluster.x-k8s.io/machine"
	ClusterAPINamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace"
)

var clusterAPIMachine = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}

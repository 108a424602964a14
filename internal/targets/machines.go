package targets

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// MachineSource reads a node's link to its Machine: the Machine its annotations claim, verified
// (machines.Verify: the Machine confirms the claim). A node's annotations are its own to write; a
// claim the Machine does not confirm counts for nothing. The link tells whether the node is a
// control-plane node (a verified control-plane Machine, machines.IsControlPlane) and what its CRs
// carry (MachineLink.ForCR). Decisions read it: an implementation reads from a cache.
type MachineSource interface {
	Link(ctx context.Context, node *corev1.Node) (MachineLink, error)
}

// machineLink is a node's Machine link as read, or why it could not be.
type machineLink struct {
	link MachineLink
	err  error
}

// machineLink reads the node's Machine link (Machines; none without).
func (g *Gatherer) machineLink(ctx context.Context, n *corev1.Node) machineLink {
	if g.Machines == nil {
		return machineLink{}
	}
	l, err := g.Machines.Link(ctx, n)
	return machineLink{l, err}
}

// controlPlaneOf reports whether the node is a control-plane node: by its own role labels, or by
// its verified Machine. A Machine whose kind cannot be read now (NotReadableError) leaves it
// unknown, and unknown is not free: the node counts as a control-plane node, and unknown says why
// (no control-plane start while it is), never as "not a control-plane node".
func controlPlaneOf(n *corev1.Node, m machineLink) (cp bool, unknown string, err error) {
	if remediationcr.IsControlPlane(n.Labels) {
		return true, "", nil
	}
	var nr *NotReadableError
	if errors.As(m.err, &nr) {
		return true, fmt.Sprintf("whether node %s is a control-plane node is unknown: the Machine it names cannot be read (%s)", n.Name, nr.Error()), nil
	}
	if m.err != nil {
		return false, "", fmt.Errorf("reading the Machine of node %s: %w", n.Name, m.err)
	}
	return m.link.ControlPlane, "", nil
}

// MachineLink is a node's link to its Machine as verified.
type MachineLink struct {
	// Claim is the Machine the node's annotations claim; Claimed is false when they claim none.
	Claim   machines.Claim
	Claimed bool
	// Verified is set when the Machine confirms the claim; Rejected says why it does not
	// (machines.Verify). Neither is set when the API server serves no Machines of the claimed kind:
	// they live elsewhere (a Cluster API workload cluster's nodes carry the annotations, its Machines
	// are in the management cluster), and there is nothing to verify the claim against or to own a CR.
	Verified bool
	Rejected string
	// GVK and UID identify the verified Machine, in the version the API server prefers.
	GVK schema.GroupVersionKind
	UID types.UID
	// ControlPlane is set when the verified Machine is a control-plane Machine.
	ControlPlane bool
}

// ForCR returns what the link adds to a remediation CR in the namespace: the Machine as an owner
// when it is verified and lives there (an owner must live in its dependent's namespace), and
// whether it is a control-plane Machine.
func (l MachineLink) ForCR(namespace string) remediationcr.Machine {
	if !l.Verified {
		return remediationcr.Machine{}
	}
	m := remediationcr.Machine{ControlPlane: l.ControlPlane}
	if l.Claim.Namespace == namespace {
		m.Owner = &metav1.OwnerReference{APIVersion: l.GVK.GroupVersion().String(), Kind: l.GVK.Kind, Name: l.Claim.Name, UID: l.UID}
	}
	return m
}

// Machines is the operator's MachineSource, and the Machine links of the CRs it creates. It reads
// through Reader: in the operator the manager's cache, which holds one informer per Machine kind,
// trimmed (machines.Transform) and shared with the Cluster API MachineHealthCheck detector, and is
// started only when a node claims a Machine of a kind the API server serves.
type Machines struct {
	// Reader reads Machines (and, without CRDs, nothing else).
	Reader client.Reader
	// Mapper tells a Machine kind's preferred version.
	Mapper meta.RESTMapper
	// CRDs, when set, reads CustomResourceDefinitions as metadata (the manager's cache, which
	// watches them anyway): a kind without its CRD is not served, and its mapping is only looked up
	// again once the CRD changed, so a node claiming a Machine of a kind the cluster does not serve
	// costs no discovery request per decision. nil: the Mapper alone tells (kubectl nhc explain).
	CRDs client.Reader
	// Synced, when set, is the readable-or-skip rule of Reader's cache: a Machine kind whose
	// informer has not synced (Cluster API's conversion webhook down) is not read, and Link returns
	// a NotReadableError instead of waiting for the cache. nil: reads wait for the sync.
	Synced *KindSync

	mu sync.Mutex
	// unmapped holds, per kind the Mapper did not know, the resourceVersion of its CRD then.
	unmapped map[schema.GroupKind]string
}

// NewMachines returns the Machines read through c: Machines and their CRDs (as metadata) from the
// manager's cache when c is the manager's client, the kinds' versions from c's RESTMapper.
func NewMachines(c client.Client) *Machines {
	return &Machines{Reader: c, Mapper: c.RESTMapper(), CRDs: c}
}

// Link implements MachineSource: it reads the Machine the node's annotations claim and verifies it. Errors are those of reading
// (a NotReadableError when the Machine kind cannot be read from the cache now, see Synced); a Machine
// that is missing or does not confirm the claim is a Rejected link, a kind the API server does not
// serve neither verified nor rejected.
func (m *Machines) Link(ctx context.Context, node *corev1.Node) (MachineLink, error) {
	claim, claimed := machines.ClaimOf(node.Annotations)
	if !claimed {
		return MachineLink{}, nil
	}
	l := MachineLink{Claim: claim, Claimed: true}
	gvk, served, err := m.kind(ctx, claim.Kind)
	if err != nil {
		return l, err
	}
	if !served {
		return l, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := m.Synced.Readable(ctx, u, true); err != nil {
		return l, err
	}
	// Read only: u shares the cached object.
	err = m.Reader.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Name}, u, client.UnsafeDisableDeepCopy)
	var found *machines.Machine
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
	case err != nil:
		return l, fmt.Errorf("getting %s %s: %w", claim.Kind, claim, err)
	default:
		read := machines.FromUnstructured(u)
		found = &read
	}
	if l.Rejected = machines.Verify(claim, node.Name, found); l.Rejected != "" {
		return l, nil
	}
	l.Verified, l.GVK, l.UID, l.ControlPlane = true, gvk, u.GetUID(), machines.IsControlPlane(*found)
	return l, nil
}

// kind returns the Machine kind's preferred version, and false when the API server does not serve
// it.
func (m *Machines) kind(ctx context.Context, gk schema.GroupKind) (schema.GroupVersionKind, bool, error) {
	var crdVersion string
	if m.CRDs != nil {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		err := m.CRDs.Get(ctx, client.ObjectKey{Name: "machines." + gk.Group}, crd, client.UnsafeDisableDeepCopy)
		if apierrors.IsNotFound(err) {
			return schema.GroupVersionKind{}, false, nil
		}
		if err != nil {
			return schema.GroupVersionKind{}, false, fmt.Errorf("getting the CRD of %s: %w", gk, err)
		}
		crdVersion = crd.ResourceVersion
		m.mu.Lock()
		v, unmapped := m.unmapped[gk]
		m.mu.Unlock()
		if unmapped && v == crdVersion {
			return schema.GroupVersionKind{}, false, nil // not established yet when last looked up
		}
	}
	mapping, err := m.Mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		if m.CRDs != nil {
			m.mu.Lock()
			if m.unmapped == nil {
				m.unmapped = map[schema.GroupKind]string{}
			}
			m.unmapped[gk] = crdVersion
			m.mu.Unlock()
		}
		return schema.GroupVersionKind{}, false, nil
	}
	if err != nil {
		return schema.GroupVersionKind{}, false, fmt.Errorf("finding the %s kind: %w", gk, err)
	}
	return mapping.GroupVersionKind, true, nil
}

package targets

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestMachineLinkAsRead checks that the snapshot hands out each node's Machine link as the
// decision read it, a link that could not be read as its error (no CR is built without it), and
// that the control-plane rule reads the same link: a role label wins, a link that cannot be read
// leaves it unknown, counted as a control-plane node.
func TestMachineLinkAsRead(t *testing.T) {
	verified := MachineLink{Claimed: true, Verified: true, ControlPlane: true, UID: "m1-uid"}
	notReadable := &NotReadableError{GVK: schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "Machine"}, Why: "conversion webhook down"}
	labelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w2", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
	for _, tc := range []struct {
		node        *corev1.Node
		m           machineLink
		cp, unknown bool
	}{
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, machineLink{link: verified}, true, false},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, machineLink{err: notReadable}, true, true},
		{labelled, machineLink{err: notReadable}, true, false},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, machineLink{}, false, false},
	} {
		cp, unknown, err := controlPlaneOf(tc.node, tc.m)
		if err != nil || cp != tc.cp || (unknown != "") != tc.unknown {
			t.Errorf("%s with %+v: control plane %v, unknown %q, %v; want %v, unknown %v", tc.node.Name, tc.m, cp, unknown, err, tc.cp, tc.unknown)
		}
	}

	r := testReading(t, func(r *reading) {
		r.links = map[string]machineLink{"w1": {link: verified}, "w2": {err: notReadable}}
	})
	s, _ := assemble(r, Acting, 0)
	if l, err := s.MachineLink("w1"); err != nil || l != verified {
		t.Errorf("w1: %+v, %v; want the link read", l, err)
	}
	if _, err := s.MachineLink("w2"); !errors.As(err, &notReadable) {
		t.Errorf("w2: %v; want the error the read met", err)
	}
	if l, err := s.MachineLink("w3"); err != nil || l.Claimed {
		t.Errorf("w3, which claims no Machine: %+v, %v; want no link", l, err)
	}
}

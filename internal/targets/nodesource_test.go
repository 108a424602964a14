package targets

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/medik8s/node-healthcheck/internal/remediationcr"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// storeNodes is a NodeSource that looks nodes up in a node informer's store, as the controllers'
// (watch.Affected) does, and cannot tell which nodes a selector selects.
type storeNodes struct{ store toolscache.Indexer }

func (s storeNodes) Node(name string) (*corev1.Node, bool, bool) {
	obj, exists, err := s.store.GetByKey(name)
	if err != nil {
		return nil, false, false
	}
	n, ok := obj.(*corev1.Node)
	return n, exists && ok, true
}

func (storeNodes) Selected(metav1.Object, labels.Selector) ([]*corev1.Node, bool) { return nil, false }

// A control-plane node another NodeHealthCheck remediates (its CR not labelled as a control-plane
// node's, as a CR created before the label was) is found through the node store as through lists.
func TestControlPlaneElsewhere(t *testing.T) {
	ctx := context.Background()
	scheme := testutil.Scheme()
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Labels: map[string]string{remediationcr.ControlPlaneRoleLabel: ""}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "master-1", Labels: map[string]string{remediationcr.MasterRoleLabel: ""}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
	}
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, n := range nodes {
		_ = store.Add(n)
		b = b.WithObjects(n.DeepCopy())
	}
	withStore := storeNodes{store}
	reader := b.Build()
	for _, g := range []*Gatherer{{Reader: reader}, {Reader: reader, Nodes: withStore}} {
		for _, tt := range []struct {
			elsewhere, labelled []string
			orphans             []string
			want                string
		}{
			{elsewhere: []string{"worker-1"}, want: ""},
			{elsewhere: []string{"worker-1", "master-1"}, want: "master-1"},
			{elsewhere: []string{"worker-1", "cp-1", "master-1"}, want: "cp-1"},
			{elsewhere: []string{"gone", "worker-1"}, want: ""},
			{elsewhere: []string{"worker-1"}, labelled: []string{"worker-1"}, want: "worker-1"},
			{orphans: []string{"gone"}, labelled: []string{"gone"}, want: "gone"},
		} {
			elsewhere, labelled := map[string]string{}, map[string]bool{}
			for _, n := range tt.elsewhere {
				elsewhere[n] = "other"
			}
			for _, n := range tt.labelled {
				labelled[n] = true
			}
			got, err := g.controlPlaneElsewhere(ctx, elsewhere, labelled, tt.orphans)
			if err != nil || got != tt.want {
				t.Errorf("store %v, elsewhere %v, labelled %v: %q, %v; want %q", g.Nodes != nil, tt.elsewhere, tt.labelled, got, err, tt.want)
			}
		}
	}
}

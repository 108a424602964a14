package chart

import (
	"context"
	"net/http"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// allowed asks the API server whether the user may do the verb on NodeHealthChecks (cluster-wide).
func (c *cluster) allowed(t *testing.T, user, verb string) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		Groups:             []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: "remediation.medik8s.io", Resource: "nodehealthchecks"},
	}}
	if err := c.k8s.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

// bind binds the user to the built-in ClusterRole: cluster-wide, or with a RoleBinding in a
// namespace.
func (c *cluster) bind(t *testing.T, user, role, ns string) {
	t.Helper()
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	meta := metav1.ObjectMeta{Name: user + "-" + role, Namespace: ns}
	var obj client.Object = &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
	if ns != "" {
		obj = &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
	}
	if err := c.k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// flowSchemaUID returns the UID of the FlowSchema the API server classified a request of the
// ServiceAccount sa into (a list of ConfigMaps in the release namespace).
func (c *cluster) flowSchemaUID(t *testing.T, sa string) string {
	t.Helper()
	fs, _ := c.classified(t, sa, "/api/v1/namespaces/"+namespace+"/configmaps")
	return fs
}

// classified returns the UIDs of the FlowSchema and of the priority level the API server
// classified a GET of path by the ServiceAccount sa into.
func (c *cluster) classified(t *testing.T, sa, path string) (flowSchema, priorityLevel string) {
	t.Helper()
	cfg := rest.CopyConfig(c.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The request is classified before it is authorized or found: a read the ServiceAccount may not
	// do, or of an object that does not exist, tells as well.
	resp, err := hc.Get(cfg.Host + path)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET %s as %s: %s", path, sa, resp.Status)
	}
	return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID), resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID)
}

// The values that add cluster objects, on a real API server with the ClusterRole aggregation
// controller: the NetworkPolicy, the FlowSchema and its priority level are accepted as rendered; a
// request of the operator's ServiceAccount is classified into the chart's FlowSchema, and another
// ServiceAccount's is not; the view and edit roles reach the built-in ones, for ClusterRoleBindings
// only.
func TestChartValuesOnARealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.startAggregation(t)
	ctx := context.Background()
	const sa = "nhc-node-healthcheck"
	base := map[string]any{"webhooks": map[string]any{"enabled": false}, "certManager": map[string]any{"enabled": false}}
	c.install(t, base)

	// By default the leader's Lease requests, and those alone, go to the built-in leader-election
	// priority level.
	t.Run("the leader's Lease requests are classified into the leader-election level", func(t *testing.T) {
		fs := &flowcontrolv1.FlowSchema{}
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: sa + "-leader-election"}, fs); err != nil {
			t.Fatal(err)
		}
		level := &flowcontrolv1.PriorityLevelConfiguration{}
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: "leader-election"}, level); err != nil {
			t.Fatalf("the built-in leader-election priority level: %v", err)
		}
		lease := "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases/e1f13584.medik8s.io"
		var gotFS, gotLevel string
		waitFor(t, "the leader's Lease GET classified into the chart's leader-election FlowSchema", func() bool {
			gotFS, gotLevel = c.classified(t, sa, lease)
			return gotFS == string(fs.UID)
		})
		if gotLevel != string(level.UID) {
			t.Errorf("the Lease GET went to priority level %s, want leader-election's %s", gotLevel, level.UID)
		}
		for what, path := range map[string]string{
			"a ConfigMap list":                          "/api/v1/namespaces/" + namespace + "/configmaps",
			"a node Lease (in leases.namespace)":        "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases/node-1",
			"the Lease list of the release's namespace": "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases",
		} {
			if got, _ := c.classified(t, sa, path); got == string(fs.UID) {
				t.Errorf("%s is classified into the leader-election FlowSchema", what)
			}
		}
		if got, _ := c.classified(t, "someone-else", lease); got == string(fs.UID) {
			t.Error("another ServiceAccount's Lease request is classified into the chart's leader-election FlowSchema")
		}
	})

	// Before: the operator's other requests go where every ServiceAccount's do, and view grants
	// nothing on NodeHealthChecks.
	before := c.flowSchemaUID(t, sa)
	if before == "" {
		t.Fatal("the API server names no FlowSchema: API Priority and Fairness is off")
	}
	c.bind(t, "viewer", "view", "")
	c.bind(t, "editor", "edit", "")
	c.bind(t, "namespace-editor", "edit", "default")
	if c.allowed(t, "viewer", "list") {
		t.Fatal("view grants NodeHealthChecks without the chart's aggregated role")
	}

	c.upgrade(t, merged(base, map[string]any{
		"networkPolicy": map[string]any{"enabled": true, "webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}},
			"apiServer": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}}},
		"apiPriorityAndFairness": map[string]any{"enabled": true},
		"rbac":                   map[string]any{"aggregateClusterRoles": map[string]any{"view": true, "edit": true}},
		"commonLabels":           map[string]any{"team": "platform"},
	}))

	t.Run("the NetworkPolicy is stored as rendered", func(t *testing.T) {
		np := &networkingv1.NetworkPolicy{}
		if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: sa}, np); err != nil {
			t.Fatal(err)
		}
		// Without webhooks, the metrics port only comes in.
		if len(np.Spec.Ingress) != 1 || len(np.Spec.Egress) != 3 || np.Labels["team"] != "platform" {
			t.Errorf("stored policy %+v", np.Spec)
		}
	})

	t.Run("the operator's requests are classified into the chart's FlowSchema", func(t *testing.T) {
		fs := &flowcontrolv1.FlowSchema{}
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: sa}, fs); err != nil {
			t.Fatal(err)
		}
		if fs.UID == "" || string(fs.UID) == before {
			t.Fatalf("FlowSchema UID %q, before %q", fs.UID, before)
		}
		// The API server's flow-control configuration follows the FlowSchema informer's events.
		var got string
		waitFor(t, "a request of the operator's ServiceAccount classified into the chart's FlowSchema", func() bool {
			got = c.flowSchemaUID(t, sa)
			return got == string(fs.UID)
		})
		plc := &flowcontrolv1.PriorityLevelConfiguration{}
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: fs.Spec.PriorityLevelConfiguration.Name}, plc); err != nil {
			t.Fatalf("the FlowSchema's priority level: %v", err)
		}
		if plc.Labels["app.kubernetes.io/instance"] != releaseName {
			t.Errorf("the priority level %s is not the chart's: %v", plc.Name, plc.Labels)
		}
		if other := c.flowSchemaUID(t, "someone-else"); other == string(fs.UID) {
			t.Error("another ServiceAccount's request is classified into the chart's FlowSchema")
		}
	})

	t.Run("view and edit reach NodeHealthChecks through ClusterRoleBindings only", func(t *testing.T) {
		waitFor(t, "the chart's roles aggregated into view and edit", func() bool {
			return c.allowed(t, "viewer", "list") && c.allowed(t, "editor", "create")
		})
		for _, tc := range []struct {
			user, verb string
			want       bool
		}{
			{"viewer", "get", true}, {"viewer", "list", true}, {"viewer", "watch", true},
			{"viewer", "create", false}, {"viewer", "update", false}, {"viewer", "delete", false},
			{"editor", "get", true}, {"editor", "create", true}, {"editor", "patch", true}, {"editor", "delete", true}, {"editor", "deletecollection", true},
			// A RoleBinding to edit is namespaced; NodeHealthCheck is not.
			{"namespace-editor", "create", false}, {"namespace-editor", "list", false},
		} {
			if got := c.allowed(t, tc.user, tc.verb); got != tc.want {
				t.Errorf("%s may %s NodeHealthChecks: %v, want %v", tc.user, tc.verb, got, tc.want)
			}
		}
		admin := &rbacv1.ClusterRole{}
		if err := c.k8s.Get(ctx, client.ObjectKey{Name: "admin"}, admin); err != nil {
			t.Fatal(err)
		}
		if !grants(admin.Rules, "remediation.medik8s.io", "nodehealthchecks", "delete") {
			t.Error("the built-in admin role lacks the NodeHealthCheck rights")
		}
	})
}

// grants tells whether the rules allow the verb on the group's resource.
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func has(list []string, s string) bool {
	for _, v := range list {
		if v == s || v == "*" {
			return true
		}
	}
	return false
}

// Package rbac checks the operator's RBAC manifests: least privilege, and remediator permissions
// only through aggregation.
package rbac

import (
	"os"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

func load(t *testing.T, file string) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(testutil.Path("config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	return role
}

func TestManagerRoleIsLeastPrivilege(t *testing.T) {
	role := load(t, "role.yaml")
	if len(role.Rules) == 0 {
		t.Fatal("no rules generated")
	}
	for _, r := range role.Rules {
		for _, list := range [][]string{r.Verbs, r.Resources, r.APIGroups} {
			if slices.Contains(list, "*") {
				t.Errorf("wildcard in rule %+v", r)
			}
		}
		if slices.Contains(r.Resources, "clusterroles") || slices.Contains(r.Resources, "clusterrolebindings") {
			t.Errorf("the operator must not manage RBAC: %+v", r)
		}
		for _, g := range r.APIGroups {
			// Remediators' groups come only through aggregation.
			if g == "test.medik8s.io" || g == "self-node-remediation.medik8s.io" || g == "infrastructure.cluster.x-k8s.io" {
				t.Errorf("remediator group %s granted directly: %+v", g, r)
			}
		}
	}
}

func TestRemediatorPermissionsComeFromAggregation(t *testing.T) {
	role := load(t, "aggregated_remediation_role.yaml")
	if role.AggregationRule == nil || len(role.AggregationRule.ClusterRoleSelectors) != 1 {
		t.Fatalf("no aggregation rule: %+v", role)
	}
	sel := role.AggregationRule.ClusterRoleSelectors[0]
	if sel.MatchLabels[remediationv1alpha1.AggregateToExtRemediationLabel] != "true" {
		t.Errorf("selector %+v does not select %s=true", sel, remediationv1alpha1.AggregateToExtRemediationLabel)
	}
}

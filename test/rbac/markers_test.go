package rbac

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

var rbacMarker = regexp.MustCompile(`(?m)^//\s*\+kubebuilder:rbac:groups=("?[^,]*"?),resources=([^,]+),verbs=(\S+)`)

// controller-gen silently drops RBAC markers that sit in a doc comment; a permission the code needs
// would then be missing from the generated role, and the operator would fail with Forbidden in a
// real cluster. Every marker in the code must be granted by config/rbac/role.yaml.
func TestEveryRBACMarkerIsGenerated(t *testing.T) {
	role := load(t, "role.yaml")
	granted := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	markers := 0
	err := filepath.WalkDir(testutil.Path("internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range rbacMarker.FindAllStringSubmatch(string(src), -1) {
			markers++
			group := strings.Trim(m[1], `"`)
			for _, resource := range strings.Split(m[2], ";") {
				for _, verb := range strings.Split(m[3], ";") {
					if !granted(group, resource, verb) {
						t.Errorf("%s: marker grants %s %s/%s, the generated role does not (is the marker in a doc comment?)", path, verb, group, resource)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if markers < 10 {
		t.Fatalf("found only %d RBAC markers; is the pattern still right?", markers)
	}
}

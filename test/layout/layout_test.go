// Package layout keeps the package maps in step with the packages that exist: README.md's, and the
// map by layer at the top of docs/architecture.md. A newcomer reads the maps first, so a package
// they do not name, or a name that no longer exists, is a failure. It also keeps internal/plumbing
// what its name says: imported by the binaries alone.
package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// mapPaths returns the folders the README's package map names (every token that ends in "/"), and
// the files it names.
func mapPaths(t *testing.T, readme string) (dirs, files []string) {
	t.Helper()
	start := strings.Index(readme, "\napi/v1alpha1/ ")
	if start < 0 {
		t.Fatal("README.md has no package map (a code block whose first line starts with api/v1alpha1/)")
	}
	end := strings.Index(readme[start:], "```")
	if end < 0 {
		t.Fatal("the package map's code block does not end")
	}
	token := regexp.MustCompile(`^[a-z][a-z0-9./_-]*$`)
	for _, line := range strings.Split(readme[start:start+end], "\n") {
		// The names come before the description, separated by two spaces or more.
		names, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		for _, name := range strings.FieldsFunc(names, func(r rune) bool { return r == ',' || r == ' ' }) {
			name = strings.Trim(name, "`")
			if !token.MatchString(name) {
				continue
			}
			if strings.HasSuffix(name, "/") {
				dirs = append(dirs, strings.TrimSuffix(name, "/"))
			} else if strings.Contains(name, "/") {
				files = append(files, name)
			}
		}
	}
	return dirs, files
}

// TestPackageMap checks that every Go package of the repository (api, cmd, internal, test) is named
// in README.md's package map, itself or through a folder it names, and that everything the map
// names exists.
func TestPackageMap(t *testing.T) {
	root := testutil.Path()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, files := mapPaths(t, string(readme))
	for _, p := range append(slices.Clone(dirs), files...) {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("README.md's package map names %s, which does not exist", p)
		}
	}
	named := func(pkg string) bool {
		for p := pkg; p != "."; p = filepath.Dir(p) {
			if slices.Contains(dirs, p) {
				return true
			}
		}
		return false
	}
	for _, pkg := range packages(t, root, "api", "cmd", "internal", "test") {
		if !named(pkg) {
			t.Errorf("package %s is not in README.md's package map: add a line that says what it is for", pkg)
		}
	}
}

// packages returns the folders below the tops that hold Go files, relative to root.
func packages(t *testing.T, root string, tops ...string) []string {
	t.Helper()
	var pkgs []string
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if gofiles, _ := filepath.Glob(filepath.Join(path, "*.go")); len(gofiles) > 0 {
				rel, _ := filepath.Rel(root, path)
				pkgs = append(pkgs, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return pkgs
}

// layerMap returns, for each package that the section "Packages by layer" of docs/architecture.md
// names, the layers it is named in. A layer is a line that starts with its name in bold; a
// package is named by a list item under it whose backquoted paths come before the first colon
// ("- `internal/openshift`, `internal/clusterapi`: what they are").
func layerMap(t *testing.T, doc string) map[string][]string {
	t.Helper()
	const heading = "\n## Packages by layer\n"
	start := strings.Index(doc, heading)
	if start < 0 {
		t.Fatal("docs/architecture.md has no section \"Packages by layer\"")
	}
	section := doc[start+len(heading):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	layerName := regexp.MustCompile(`^\*\*([^*]+)\*\*`)
	path := regexp.MustCompile("`([^`]+)`")
	layers := map[string][]string{}
	layer := ""
	for _, line := range strings.Split(section, "\n") {
		if m := layerName.FindStringSubmatch(line); m != nil {
			layer = m[1]
			continue
		}
		item, ok := strings.CutPrefix(line, "- ")
		if !ok {
			continue
		}
		names, _, _ := strings.Cut(item, "`:")
		found := path.FindAllStringSubmatch(names+"`", -1)
		if layer == "" || len(found) == 0 {
			t.Errorf("docs/architecture.md's map by layer: %q names no package under a layer", line)
			continue
		}
		for _, m := range found {
			pkg := strings.TrimSuffix(m[1], "/")
			layers[pkg] = append(layers[pkg], layer)
		}
	}
	if len(layers) == 0 {
		t.Fatal("docs/architecture.md's map by layer names no package")
	}
	return layers
}

// TestLayerMap checks that every Go package of api/, cmd/ and internal/ is named in exactly one
// layer of docs/architecture.md's map by layer, and that every package the map names exists (the
// suites under test/ are left to README.md's map).
func TestLayerMap(t *testing.T) {
	root := testutil.Path()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	layers := layerMap(t, string(doc))
	pkgs := packages(t, root, "api", "cmd", "internal")
	for _, pkg := range pkgs {
		switch in := layers[pkg]; len(in) {
		case 0:
			t.Errorf("package %s is in no layer of docs/architecture.md's map by layer: add it where it belongs", pkg)
		case 1:
		default:
			t.Errorf("package %s is named more than once in docs/architecture.md's map by layer (%s): one layer is its place", pkg, strings.Join(in, ", "))
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(layers)) {
		if !slices.Contains(pkgs, pkg) {
			t.Errorf("docs/architecture.md's map by layer names %s, which is no package of api/, cmd/ or internal/", pkg)
		}
	}
}

// TestPlumbingIsForBinaries checks that internal/plumbing holds what only the binaries use: no
// package outside cmd/ and test/ imports it (the folder's own packages may use each other).
func TestPlumbingIsForBinaries(t *testing.T) {
	root := testutil.Path()
	const plumbing = "github.com/medik8s/node-healthcheck/internal/plumbing/"
	for _, top := range []string{"api", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if strings.HasPrefix(rel, "internal/plumbing/") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, plumbing) {
					t.Errorf("%s imports %s: internal/plumbing is for the binaries (cmd/) alone; move what both need out of it", rel, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

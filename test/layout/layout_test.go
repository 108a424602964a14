// Package layout keeps the package map in README.md in step with the packages that exist: a
// newcomer reads the map first, so a package it does not name, or a name that no longer exists,
// is a failure. It also keeps internal/plumbing what its name says: imported by the binaries alone.
package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
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
	for _, top := range []string{"api", "cmd", "internal", "test"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			gofiles, _ := filepath.Glob(filepath.Join(path, "*.go"))
			rel, _ := filepath.Rel(root, path)
			if len(gofiles) > 0 && !named(rel) {
				t.Errorf("package %s is not in README.md's package map: add a line that says what it is for", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
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

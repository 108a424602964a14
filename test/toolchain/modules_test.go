// Package toolchain keeps the tools' checked-in scratch modules (hack/modules: the control plane,
// etcd and kwok, which hack/controlplane.sh and hack/kwok.sh build in) in step with the operator's
// go.mod and the Makefile's pinned versions. A module behind go.mod still builds, but compiles its
// own copy of every package it no longer shares with the operator; a module at another pin is not
// used at all, and a cold machine resolves the module graph from the proxy again (`make modules`
// writes them anew).
package toolchain

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

const root = "../.."

// versions returns the version each module a go.mod requires builds at: the required one, or the
// version of a replacement by another version of the same module (a replacement by a folder is left
// out).
func versions(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]string{}
	for _, r := range f.Require {
		v[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		switch {
		case r.New.Path == r.Old.Path && r.New.Version != "":
			v[r.Old.Path] = r.New.Version
		case r.New.Version == "":
			delete(v, r.Old.Path)
		}
	}
	return v
}

// pins returns the Makefile's pinned tool versions by variable name.
func pins(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	p := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+_VERSION) \?= (\S+)$`).FindAllStringSubmatch(string(data), -1) {
		p[m[1]] = m[2]
	}
	return p
}

func TestScratchModulesFollowTheOperator(t *testing.T) {
	operator := versions(t, filepath.Join(root, "go.mod"))
	p := pins(t)
	for name, pin := range map[string]struct{ module, version string }{
		"controlplane": {"k8s.io/kubernetes", p["KUBERNETES_VERSION"]},
		"etcd":         {"go.etcd.io/etcd/server/v3", p["ETCD_VERSION"]},
		"kwok":         {"sigs.k8s.io/kwok", p["KWOK_VERSION"]},
	} {
		t.Run(name, func(t *testing.T) {
			scratch := versions(t, filepath.Join(root, "hack/modules", name, "go.mod"))
			if pin.version == "" {
				t.Fatalf("the Makefile pins no version of %s", pin.module)
			}
			if got := scratch[pin.module]; got != pin.version {
				t.Errorf("hack/modules/%s requires %s %s, the Makefile pins %s: run `make modules` and commit hack/modules",
					name, pin.module, got, pin.version)
			}
			shared := 0
			for mod, want := range operator {
				got, ok := scratch[mod]
				if !ok {
					continue
				}
				shared++
				if semver.Compare(got, want) < 0 {
					t.Errorf("hack/modules/%s builds %s at %s, behind go.mod's %s: run `make modules` and commit hack/modules",
						name, mod, got, want)
				}
			}
			if shared == 0 {
				t.Errorf("hack/modules/%s shares no module with go.mod", name)
			}
		})
	}
}

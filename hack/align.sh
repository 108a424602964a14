# Sourced by hack/controlplane.sh and hack/kwok.sh. The tools they build from the Go module proxy
# share most packages with the operator (k8s.io/api, apimachinery, client-go, golang.org/x/...): built
# with the operator's versions of those modules and its build settings (CGO_ENABLED=0 -trimpath, as
# the Makefile builds and tests), each shared package compiles once on a cold machine, for the tools
# and the operator alike, instead of once per dependency universe.

# tools_env sets the operator's build settings for the tools' builds.
tools_env() {
  export CGO_ENABLED=0 GOFLAGS="-trimpath ${GOFLAGS:-}"
}

# align_with <module-dir>... raises the current (scratch) module's requirements to the versions the
# given modules select, then tidies: a module the scratch module does not use is dropped again, and a
# version it needs higher than theirs stays. Staging modules the scratch module replaces keep their
# replacement, and a module it already requires (the tool's pin) keeps its version: the operator's
# module graph holds etcd's server at the version k8s.io/apiserver names, and etcd was built at that
# version, not the pinned one, until 2026-12 (go mod edit -require sets a version, it does not raise).
align_with() {
  local flags=() pinned
  pinned=" $(go mod edit -json | sed -n '/"Require": \[/,/^	\]/s/.*"Path": "\(.*\)",*/\1/p' | tr '\n' ' ') "
  for dir in "$@"; do
    [ -f "$dir/go.mod" ] || continue
    # A module replaced by another version of itself counts at that version; one replaced by a folder
    # is left out.
    while read -r path version; do
      [ -z "$version" ] || [[ "$pinned" == *" $path "* ]] || flags+=("-require=$path@$version")
    done < <(go -C "$dir" list -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{if eq .Path $.Path}}{{.Version}}{{end}}{{else}}{{.Version}}{{end}}{{end}}' all)
  done
  [ ${#flags[@]} -eq 0 ] || go mod edit "${flags[@]}"
  go mod tidy
}

# The scratch modules. Each prepare_* function writes one into the current (empty) folder, resolved
# from the Go module proxy and aligned with the given module folders; `make modules` runs them and
# checks the results in under hack/modules, and use_module copies a checked-in one into the current
# folder.

# use_module <name> "<module> <version>" copies hack/modules/<name> here if its go.mod requires that
# module at that version (a pin changed in the Makefile and not yet in hack/modules: it fails, and the
# module is prepared from the proxy).
use_module() {
  local src
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/modules/$1"
  [ -f "$src/go.sum" ] || return 1
  # "<module> <version>" in the require block, or "require <module> <version>" on one line.
  awk -v m="${2% *}" -v v="${2#* }" '($1==m && $2==v) || ($1=="require" && $2==m && $3==v) {f=1} END {exit !f}' "$src/go.mod" || return 1
  echo ">> scratch module $1 from hack/modules/$1"
  cp "$src"/* .
}

# new_module <module-name> <module>@<version> starts a scratch module in the current folder that
# requires the tool's module at its pinned version.
new_module() {
  echo ">> preparing scratch module for ${2%@*} ${2#*@}"
  rm -f go.mod go.sum
  go mod init "$1" >/dev/null 2>&1
  go mod edit -require="$2"
}

# kubernetes_module <module-name> <kubernetes-version> <staging-version> <command>... writes, into the
# current folder, a module that requires k8s.io/kubernetes at that version and builds the named
# commands of k8s.io/kubernetes/cmd (a tools.go imports them): `go install k8s.io/kubernetes/cmd/...`
# fails because its go.mod replaces every staging module with a local path, so every module it
# replaces is replaced here with the same module at the staging version (../shared/toolchain.md).
# hack/node.sh builds the node's binaries in one too.
kubernetes_module() {
  local name=$1 kver=$2 stage=$3 modfile m c
  shift 3
  new_module "$name" "k8s.io/kubernetes@$kver"
  modfile=$(go mod download -json "k8s.io/kubernetes@$kver" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
  for m in $(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&/=>/{print $1}' "$modfile"); do
    go mod edit -replace="$m=$m@$stage"
  done
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } > tools.go
}

# kubernetes_ldflags <kubernetes-version> prints the linker flags that stamp a Kubernetes binary's
# version (`kube-apiserver --version`, the API server's /version), stripped.
kubernetes_ldflags() {
  local kver=$1 minor p ld="-s -w"
  minor=$(echo "$kver" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "$ld"
}

# prepare_controlplane <kubernetes-version> <staging-version> [<module-dir>...]
prepare_controlplane() {
  local kver=$1 stage=$2
  shift 2
  kubernetes_module local/k8s-controlplane "$kver" "$stage" kube-apiserver kube-controller-manager kubectl
  align_with "$@"
}

# prepare_etcd <etcd-version> [<module-dir>...]
prepare_etcd() {
  local ever=$1
  shift
  new_module local/etcd "go.etcd.io/etcd/server/v3@$ever"
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  align_with "$@"
}

# prepare_kwok <kwok-version> [<module-dir>...]
prepare_kwok() {
  local ver=$1
  shift
  new_module local/kwok "sigs.k8s.io/kwok@$ver"
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
GO
  align_with "$@"
}

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
# replacement.
align_with() {
  local flags=()
  for dir in "$@"; do
    [ -f "$dir/go.mod" ] || continue
    # A module replaced by another version of itself counts at that version; one replaced by a folder
    # is left out.
    while read -r path version; do
      [ -z "$version" ] || flags+=("-require=$path@$version")
    done < <(go -C "$dir" list -m -f '{{if not .Main}}{{.Path}} {{with .Replace}}{{if eq .Path $.Path}}{{.Version}}{{end}}{{else}}{{.Version}}{{end}}{{end}}' all)
  done
  [ ${#flags[@]} -eq 0 ] || go mod edit "${flags[@]}"
  go mod tidy
}

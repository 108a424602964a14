#!/usr/bin/env bash
# Builds kwok (simulated nodes with real heartbeats) from the Go module proxy into <dest-dir>, once,
# with a stages file assembled from the module's own stage definitions (standalone kwok ships none):
# node initialization, heartbeats with leases, and the chaos stage that makes a node NotReady on a
# label. See ../shared/toolchain.md.
#
# Usage: hack/kwok.sh <dest-dir> <kwok-version> [<module-dir>...]
# With module folders (the operator's, the control plane's scratch module), kwok builds in a scratch
# module with their versions of the modules it shares (its own Kubernetes libraries are a minor
# behind) and with the operator's build settings (hack/align.sh): a cold machine compiles client-go
# and the rest once for all of them.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/align.sh"
dest=$(mkdir -p "$1" && cd "$1" && pwd)
ver=${2:?kwok version, e.g. v0.8.0}
shift 2
align=()
for d in "$@"; do [ ! -f "$d/go.mod" ] || align+=("$(cd "$d" && pwd)"); done
tools_env

if [ ! -x "$dest/kwok" ]; then
  echo ">> building kwok $ver (a minute or more on a cold cache)"
  work="$dest/.src"
  mkdir -p "$work"
  cd "$work"
  [ -f go.sum ] || use_module kwok "sigs.k8s.io/kwok $ver" || prepare_kwok "$ver" ${align[@]+"${align[@]}"}
  go build -ldflags "-s -w" -o "$dest/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok
  mv "$dest/kwok.tmp" "$dest/kwok"
  cd - >/dev/null
fi
# The module's node stages write every condition's lastTransitionTime as the node's creation time.
# A kubelet sets it when the condition's status changes, and the operator reads it: when a node came
# back (the returning-node hold) and how long it has been unhealthy. The stages here do the same: a
# condition keeps its lastTransitionTime while its status stays, and gets the current time when its
# status changes. The first line names this revision, so a cached file from before is rebuilt.
stages_rev="# stages revision 2: lastTransitionTime changes with the condition's status"
if [ ! -f "$dest/kwok-stages.yaml" ] || [ "$(head -n1 "$dest/kwok-stages.yaml")" != "$stages_rev" ]; then
  dir=$(cd "$dest" && go mod download -json "sigs.k8s.io/kwok@$ver" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  {
    echo "$stages_rev"
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml; do
      echo "---"
      sed -e 's/^\( *\){{ $lastTransitionTime := or .metadata.creationTimestamp $now }}$/&\n\1{{ $existing := .status.conditions }}/' \
          -e 's/^\( *\){{ range NodeConditions }}$/&\n\1{{ $ltt := $now }}{{ $type := .type }}{{ $status := .status }}{{ range $existing }}{{ if and (eq .type $type) (eq .status $status) }}{{ $ltt = .lastTransitionTime }}{{ end }}{{ end }}/' \
          -e 's/lastTransitionTime: {{ $lastTransitionTime | Quote }}/lastTransitionTime: {{ $ltt | Quote }}/' \
          "$dir/kustomize/stage/$f"
    done
    # The chaos stage (unused by the tests) as the module has it.
    echo "---"
    cat "$dir/kustomize/stage/node/chaos/node-not-ready.yaml"
  } > "$dest/kwok-stages.yaml.tmp"
  mv "$dest/kwok-stages.yaml.tmp" "$dest/kwok-stages.yaml"
fi

#!/usr/bin/env bash
# Builds kwok (simulated nodes with real heartbeats) from the Go module proxy into <dest-dir>, once,
# with a stages file assembled from the module's own stage definitions (standalone kwok ships none):
# node initialization, heartbeats with leases, and the chaos stage that makes a node NotReady on a
# label. See ../shared/toolchain.md.
#
# Usage: hack/kwok.sh <dest-dir> <kwok-version>
set -euo pipefail

dest=$(mkdir -p "$1" && cd "$1" && pwd)
ver=${2:?kwok version, e.g. v0.8.0}

if [ ! -x "$dest/kwok" ]; then
  echo ">> building kwok $ver (about a minute)"
  GOBIN="$dest" go install "sigs.k8s.io/kwok/cmd/kwok@$ver"
fi
if [ ! -f "$dest/kwok-stages.yaml" ]; then
  dir=$(cd "$dest" && go mod download -json "sigs.k8s.io/kwok@$ver" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')
  {
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml node/chaos/node-not-ready.yaml; do
      echo "---"
      cat "$dir/kustomize/stage/$f"
    done
  } > "$dest/kwok-stages.yaml.tmp"
  mv "$dest/kwok-stages.yaml.tmp" "$dest/kwok-stages.yaml"
fi

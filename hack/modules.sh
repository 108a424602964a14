#!/usr/bin/env bash
# Writes the scratch modules the tools build in (hack/controlplane.sh, hack/kwok.sh) into
# hack/modules, resolved from the Go module proxy and aligned with the operator's go.mod
# (hack/align.sh). Run it (`make modules`) after a change of go.mod or of a pinned tool version, and
# commit the result; test/toolchain fails while a checked-in module is behind go.mod.
#
# Usage: hack/modules.sh <kubernetes-version> <etcd-version> <kwok-version>
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/align.sh"
root=$(cd "$here/.." && pwd)
kver=${1:?kubernetes version}
ever=${2:?etcd version}
kwver=${3:?kwok version}
tools_env
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/controlplane" "$tmp/etcd" "$tmp/kwok"
(cd "$tmp/controlplane" && prepare_controlplane "$kver" "v0.${kver#v1.}" "$root")
(cd "$tmp/etcd" && prepare_etcd "$ever" "$root")
(cd "$tmp/kwok" && prepare_kwok "$kwver" "$root" "$tmp/controlplane")
for m in controlplane etcd kwok; do
  rm -rf "$here/modules/$m" && mkdir -p "$here/modules/$m"
  cp "$tmp/$m"/* "$here/modules/$m/"
done
echo ">> hack/modules written; commit it"

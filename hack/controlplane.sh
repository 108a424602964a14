#!/usr/bin/env bash
# Builds pinned control-plane binaries (kube-apiserver, kube-controller-manager, kubectl, etcd) from the
# Go module proxy into a cache folder, once. This machine cannot download release tarballs, so
# `setup-envtest use` is not an option; see ../shared/toolchain.md for the recipe this follows.
#
# Usage: hack/controlplane.sh <dest-dir> <kubernetes-version> <etcd-version> [<operator-module-dir>]
# A binary that already exists in <dest-dir> is not rebuilt. With the operator's module folder, the
# scratch modules use the operator's versions of the modules they share, and every binary builds
# with the operator's settings (hack/align.sh): a cold machine compiles k8s.io/api, client-go and the
# rest once for the control plane and the operator. The three Kubernetes binaries build in one `go
# build` (their links run side by side, 2-3 GB each). The scratch modules' go.mod and go.sum are
# checked in (hack/modules, `make modules` writes them): a cold machine downloads what they list in
# parallel instead of resolving the module graph one request at a time.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/align.sh"
dest=$(mkdir -p "$1" && cd "$1" && pwd)
kver=${2:?kubernetes version, e.g. v1.37.2}
ever=${3:?etcd version, e.g. v3.7.3}
root=${4:-}
[ -z "$root" ] || root=$(cd "$root" && pwd)
tools_env
stage="v0.${kver#v1.}"   # v1.37.2 -> v0.37.2, the staging modules' matching version
work="$dest/.src"
mkdir -p "$work/k8s" "$work/etcd"

need=()
for b in kube-apiserver kube-controller-manager kubectl; do
  [ -x "$dest/$b" ] || need+=("$b")
done

if [ ${#need[@]} -gt 0 ]; then
  cd "$work/k8s"
  [ -f go.sum ] || use_module controlplane "k8s.io/kubernetes $kver" || prepare_controlplane "$kver" "$stage" ${root:+"$root"}
  ld=$(kubernetes_ldflags "$kver")
  echo ">> building ${need[*]} $kver (minutes on a cold cache)"
  rm -rf "$dest/.tmp" && mkdir -p "$dest/.tmp"
  go build -ldflags "$ld" -o "$dest/.tmp/" "${need[@]/#/k8s.io/kubernetes/cmd/}"
  for b in "${need[@]}"; do mv "$dest/.tmp/$b" "$dest/$b"; done
  rmdir "$dest/.tmp"
fi

if [ ! -x "$dest/etcd" ]; then
  cd "$work/etcd"
  [ -f go.sum ] || use_module etcd "go.etcd.io/etcd/server/v3 $ever" || prepare_etcd "$ever" ${root:+"$root"}
  echo ">> building etcd $ever"
  go build -ldflags "-s -w" -o "$dest/etcd.tmp" .
  mv "$dest/etcd.tmp" "$dest/etcd"
fi
echo ">> control plane ready in $dest"

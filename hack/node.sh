#!/usr/bin/env bash
# Builds the pinned binaries of a real Kubernetes node from the Go module proxy into <dest-dir>, once:
# kubelet, kube-scheduler and kube-proxy (k8s.io/kubernetes, the recipe of hack/controlplane.sh),
# containerd with its runc shim and ctr, runc (with seccomp, through cgo and libseccomp), the CNI
# plugins a one-node bridge network needs (bridge, host-local, loopback), crictl, and the sandbox
# ("pause") image as an OCI archive (test/realnode/pause, built offline like `make image`).
# test/realnode runs them; the control plane (etcd, kube-apiserver, kube-controller-manager) comes from
# hack/controlplane.sh.
#
# Two Debian packages are installed with apt when missing: libseccomp-dev (runc's seccomp, at build
# time) and nftables (the `nft` command that kube-proxy's nftables mode runs).
#
# Usage: hack/node.sh <dest-dir> <kubernetes> <containerd> <runc> <cni-plugins> <cri-tools>
# A binary is rebuilt only when its pinned version changes (<dest-dir>/.versions/<binary>). Builds run
# one at a time: a Kubernetes binary's link peaks at 2-3 GB RSS and the machine has 2 cores.
set -euo pipefail

dest=$(mkdir -p "$1" && cd "$1" && pwd)
kver=${2:?kubernetes version, e.g. v1.37.2}
cver=${3:?containerd version, e.g. v2.4.2}
rver=${4:?runc version, e.g. v1.5.2}
nver=${5:?CNI plugins version, e.g. v1.10.0}
tver=${6:?cri-tools version, e.g. v1.37.0}
repo=$(cd "$(dirname "$0")/.." && pwd)
# kubernetes_module and kubernetes_ldflags; not tools_env: the node's binaries keep their own build
# settings (runc needs cgo for seccomp).
. "$repo/hack/align.sh"
stage="v0.${kver#v1.}"
mkdir -p "$dest/.versions" "$dest/.src" "$dest/cni"

# current <binary> <version>: the binary exists and was built at this version.
current() { [ -x "$dest/$1" ] && [ "$(cat "$dest/.versions/${1//\//_}" 2>/dev/null)" = "$2" ]; }
# built <binary> <version>: records the version of a binary just built.
built() { echo "$2" > "$dest/.versions/${1//\//_}"; }

apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return
  echo ">> apt-get install ${missing[*]}"
  if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
    apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"
  fi
}
apt_install nftables libseccomp-dev

# Kubernetes node binaries.
need=()
for b in kubelet kube-scheduler kube-proxy; do current "$b" "$kver" || need+=("$b"); done
if [ ${#need[@]} -gt 0 ]; then
  work="$dest/.src/k8s-$kver"
  mkdir -p "$work" && cd "$work"
  if [ ! -f go.sum ]; then
    kubernetes_module local/k8s-node "$kver" "$stage" kube-proxy kube-scheduler kubelet
    go mod tidy
  fi
  ld=$(kubernetes_ldflags "$kver")
  for b in "${need[@]}"; do
    echo ">> building $b $kver (minutes on a cold cache)"
    SECONDS=0
    go build -trimpath -ldflags "$ld" -o "$dest/$b.tmp" "k8s.io/kubernetes/cmd/$b"
    mv "$dest/$b.tmp" "$dest/$b" && built "$b" "$kver"
    echo ">> $b took ${SECONDS}s"
  done
fi

# gobuild <binary> <version> <package@version> [go flags...]: go install into a scratch GOBIN, then
# move into place. The caller's environment (CGO_ENABLED) applies.
gobuild() {
  local bin=$1 ver=$2 pkg=$3; shift 3
  current "$bin" "$ver" && return
  echo ">> building $bin $ver"
  local gobin="$dest/.src/gobin"
  rm -rf "$gobin" && mkdir -p "$gobin"
  SECONDS=0
  GOBIN="$gobin" go install -trimpath "$@" "$pkg"
  mv "$gobin/$(basename "${pkg%@*}")" "$dest/$bin" && built "$bin" "$ver"
  echo ">> $bin took ${SECONDS}s"
}

# containerd without cgo (no btrfs snapshotter; overlayfs is used), its version stamped.
for b in containerd containerd-shim-runc-v2 ctr; do
  CGO_ENABLED=0 gobuild "$b" "$cver" "github.com/containerd/containerd/v2/cmd/$b@$cver" \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$cver"
done

# runc with seccomp (cgo and libseccomp), as distributions build it.
CGO_ENABLED=1 gobuild runc "$rver" "github.com/opencontainers/runc@$rver" -tags seccomp -ldflags "-s -w -X main.version=${rver#v}"

for p in main/bridge ipam/host-local main/loopback; do
  CGO_ENABLED=0 gobuild "cni/$(basename "$p")" "$nver" "github.com/containernetworking/plugins/plugins/$p@$nver" -ldflags "-s -w"
done

CGO_ENABLED=0 gobuild crictl "$tver" "sigs.k8s.io/cri-tools/cmd/crictl@$tver" -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$tver"

# The sandbox image: test/realnode/pause, static, as an OCI archive named by its full reference. Rebuilt
# when its source changes.
prev=$(cat "$dest/.versions/pause.oci.tar" 2>/dev/null || true)
rev=$(cat "$repo"/test/realnode/pause/*.go | sha256sum | cut -c1-12)
if [ ! -f "$dest/pause.oci.tar" ] || [ "$prev" != "$rev" ]; then
  echo ">> building the pause image"
  cd "$repo"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dest/.src/pause" ./test/realnode/pause
  go run ./test/realnode/pause/build --binary "$dest/.src/pause" --out "$dest/pause.oci.tar"
  echo "$rev" > "$dest/.versions/pause.oci.tar"
fi
echo ">> node binaries ready in $dest"

// Package release owns what `make release` writes and `make release-push` publishes: the operator's
// image as an OCI archive with its SBOMs, the packaged chart, install.yaml (the chart rendered with
// its defaults for `kubectl apply -f`), the kubectl plugin's archives per platform with a krew
// manifest, and a checksums file. Every output is reproducible: archives carry one fixed time
// (SOURCE_DATE_EPOCH, the commit's), owner root and a fixed order, and gzip streams no time, so the
// same inputs give the same bytes. It pushes the image (its SBOMs as OCI referrers) and the chart to
// an OCI registry and signs both in cosign's key-based format (a simple-signing payload in a
// `sha256-<hex>.sig` manifest beside the signed one, no transparency log), so that `cosign verify
// --key` checks them (docs/release.md).
package release

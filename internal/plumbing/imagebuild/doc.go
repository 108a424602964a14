// Package imagebuild owns the operator's container image: it assembles a multi-architecture OCI image
// from prebuilt static manager binaries, without a container daemon and without downloading anything
// (an empty base: the image holds /manager and nothing else, so no shell), with a numeric non-root
// user, the manager as entrypoint and OCI labels. Every timestamp is the given creation time, so the
// same binaries and options give the same digests. It writes the image as an OCI image layout and as
// a tarball of that layout, reads the layout back (the tests run the manager binary from it) and
// pushes it to a registry.
package imagebuild

# The operator's image, for builders with a container daemon (docker buildx build --platform
# linux/amd64,linux/arm64 --build-arg VERSION=<appVersion> --build-arg REVISION=<commit> .).
# `make image` builds the same image without a daemon (cmd/imagebuild), and test/image checks that
# this file's final stage describes it: an empty base, the static manager at /manager, user
# 65532:65532, the manager as entrypoint, the same labels.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/manager ./cmd/manager

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="node-healthcheck" \
      org.opencontainers.image.description="Node Healthcheck operator" \
      org.opencontainers.image.source="https://github.com/medik8s/node-healthcheck" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]

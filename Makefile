# node-healthcheck operator. `make help` lists the targets.
#
# Everything a fresh machine needs is built from the Go module proxy and cached under bin/
# (git-ignored): the control plane for envtest (kube-apiserver, kube-controller-manager, kubectl, etcd),
# kwok and controller-gen, with the operator's build settings and module versions (hack/align.sh), in
# the scratch modules checked in under hack/modules (`make modules`). The first `make demo` takes
# about 8 minutes on 2 cores, 6 of them Kubernetes' own compile (docs/e2e.md; twice that on a slower
# machine); later runs reuse the cache.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# Pinned tool versions. KUBERNETES_VERSION matches k8s.io/api v0.37.x in go.mod.
KUBERNETES_VERSION ?= v1.37.2
ETCD_VERSION ?= v3.7.3
CONTROLLER_GEN_VERSION ?= v0.23.0
KWOK_VERSION ?= v0.8.0
# Helm 4's CLI for the real-node suite (Helm 3 is go.mod's tool, `go tool helm`).
HELM4_VERSION ?= v4.3.1
# Writes the image's SBOMs (CycloneDX) from the manager binaries, offline.
CYCLONEDX_GOMOD_VERSION ?= v1.10.0
# The real node (test/realnode, `make node`): the kubelet, kube-scheduler and kube-proxy are
# KUBERNETES_VERSION's.
CONTAINERD_VERSION ?= v2.4.2
RUNC_VERSION ?= v1.5.2
CNI_PLUGINS_VERSION ?= v1.10.0
CRI_TOOLS_VERSION ?= v1.37.0

LOCALBIN ?= $(CURDIR)/bin
MODULE := $(shell go list -m)
space := $(subst ,, )
CHART := charts/node-healthcheck
# The operator's version is the chart's appVersion: the chart's default image tag, the image's tag and
# version label, and the version stamped into the binary (`manager --version`) cannot drift apart.
VERSION := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' $(CHART)/Chart.yaml)
MANAGER_LDFLAGS := -X main.version=$(VERSION)
CONTROLPLANE_DIR ?= $(LOCALBIN)/k8s/$(KUBERNETES_VERSION)
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
CYCLONEDX_GOMOD ?= $(LOCALBIN)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)
HELM4 ?= $(LOCALBIN)/helm-$(HELM4_VERSION)
# Prometheus' promtool for the chart's rule tests, built from test/rules (a module of its own, so that
# Prometheus' dependencies stay out of go.mod); the version is the one test/rules/go.mod requires.
# Its first build takes about 25 minutes on 2 cores (1,364 packages, every service discovery's
# cloud SDK), so `make test-rules` runs in .ci/run, not in `make test`; seconds once built.
PROMETHEUS_VERSION ?= v0.316.0
PROMTOOL ?= $(LOCALBIN)/promtool-$(PROMETHEUS_VERSION)
MANAGER ?= $(LOCALBIN)/manager
# The real node's binaries and its pause image (hack/node.sh); test/realnode finds them through NODE_DIR.
NODE_DIR ?= $(LOCALBIN)/node
# kwok simulates nodes with real heartbeats for the end-to-end suite; tests find it through KWOK_DIR.
KWOK_DIR ?= $(LOCALBIN)/kwok/$(KWOK_VERSION)
export KWOK_DIR

# Where KUBEBUILDER_ASSETS is already set (a folder with kube-apiserver, etcd and kubectl), it is used
# as it is; otherwise the cached build below provides it.
ifeq ($(origin KUBEBUILDER_ASSETS),undefined)
KUBEBUILDER_ASSETS := $(CONTROLPLANE_DIR)
CONTROLPLANE_DEP := controlplane
endif
export KUBEBUILDER_ASSETS

# Fuzzing for time: `make test-extended` runs each target for FUZZTIME (`make fuzz FUZZTIME=5m` runs
# longer); `make test` runs their seed corpora as ordinary tests (go test does).
FUZZTIME ?= 15s
FUZZ_TARGETS ?= ./internal/webhook/v1alpha1:FuzzValidate ./internal/webhook/v1alpha1:FuzzDefaultThenValidate ./internal/webhook/v1alpha1:FuzzWebhookAgreesWithCEL ./internal/webhook/v1alpha1:FuzzRawJSON ./internal/health:FuzzDecide ./internal/controller/decodeguard:FuzzDecode ./internal/upgrade:FuzzCondition ./internal/outcome:FuzzDerive
GO_TEST_FLAGS ?= -timeout 20m
# Every build and test of the project compiles with the image's settings (static, no build paths):
# the demo's, the image's and the tests' compiles then share one build cache, so on a cold machine
# each dependency compiles once (the race detector needs cgo: its run in test-extended compiles again).
GO_ENV := CGO_ENABLED=0 GOFLAGS="$(strip -trimpath $(GOFLAGS))"
# `make test` runs every package but the whole-cluster suites that `make test-extended` runs
# (EXTENDED_PKGS; docs/e2e.md says which runs where, and why), TEST_PARALLEL packages at a time beside
# the operator suite's two processes: an envtest suite mostly waits on its API server (about half a
# core each). go test starts packages in the order it is given them: the longest (TEST_FIRST, by
# docs/e2e.md's times) go first, or the chart's, last in the alphabet and the longest (4.5 minutes
# warm, 8.5 cold), ends the run alone.
EXTENDED_PKGS ?= test/e2e test/chaos
TEST_PARALLEL ?= 3
TEST_FIRST ?= test/chart internal/controller/upgradeguard test/hostile internal/controller/nhc test/scale internal/targets test/localcluster
# The operator suite (TestOperator), the longest package (about 100 specs, each its own pool of
# nodes), runs its specs in OPERATOR_PROCS processes with Ginkgo's CLI (go.mod's tool), each with its
# own control plane and manager, beside the other packages; the CLI runs the suite alone, so go test
# runs that package's other tests.
OPERATOR_SUITE := internal/controller/remediation
OPERATOR_PROCS ?= 2
# The packages with concurrent code (goroutines, locks, shared caches) whose tests `make
# test-extended` runs again under the race detector.
RACE_PKGS ?= ./cmd/manager ./internal/clockskew ./internal/controller/... ./internal/eventseries ./internal/explain \
	./internal/notify ./internal/plumbing/metricsauth ./internal/plumbing/webhookcert ./internal/targets \
	./internal/templateaccess ./internal/upgrade ./internal/webhook/...

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets and what they do.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD, RBAC and webhook manifests under config/.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:allowDangerousTypes=false webhook paths="./..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	@# The chart templates these exact files (a test checks the copies).
	mkdir -p $(CHART)/files/crds $(CHART)/files/rbac $(CHART)/files/webhook
	cp config/crd/bases/*.yaml $(CHART)/files/crds/
	cp config/rbac/role.yaml $(CHART)/files/rbac/role.yaml
	cp config/webhook/manifests.yaml $(CHART)/files/webhook/manifests.yaml

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object paths="./api/..."

GENERATED := config/crd config/webhook config/rbac api/v1alpha1/zz_generated.deepcopy.go $(CHART)/files

.PHONY: verify
verify: manifests generate ## Regenerate everything and fail if anything generated is out of date or code is unformatted.
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "Generated files are out of date; run 'make manifests generate' and commit:"; \
		git status --porcelain -- $(GENERATED); git --no-pager diff -- $(GENERATED) | head -50; exit 1; fi
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then \
		echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@echo "Generated files are up to date and the code is formatted."

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO_ENV) go vet ./...

##@ Test

.PHONY: test
test: $(CONTROLPLANE_DEP) kwok vet image-host ## Run the tests on a real control plane (envtest, kwok nodes), fuzz seeds included; the image for this machine first (the tests run its binary).
	@export IMAGE_LAYOUT=$(HOST_IMAGE_LAYOUT) IMAGE_PLATFORMS=$(HOST_PLATFORM) $(GO_ENV); \
	log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	go tool ginkgo -p --procs=$(OPERATOR_PROCS) --timeout=20m ./$(OPERATOR_SUITE) > $$log 2>&1 & operator=$$!; \
	status=0; go test $(GO_TEST_FLAGS) -p $(TEST_PARALLEL) -skip '^TestOperator$$' \
		$(addprefix ./,$(TEST_FIRST)) $$(go list ./... | grep -vxE '$(subst $(space),|,$(addprefix $(MODULE)/,$(EXTENDED_PKGS) $(TEST_FIRST)))') || status=1; \
	wait $$operator || status=1; \
	echo "--- the operator suite ($(OPERATOR_SUITE), $(OPERATOR_PROCS) processes):"; cat $$log; exit $$status

.PHONY: test-extended
test-extended: $(CONTROLPLANE_DEP) kwok image ## What .ci/run adds to `make test`: the end-to-end and chaos suites, the multi-arch image's checks, each fuzz target for FUZZTIME, the concurrent packages under -race.
	$(GO_ENV) go test $(GO_TEST_FLAGS) -count=1 $(addprefix ./,$(EXTENDED_PKGS)) ./test/image/
	@$(MAKE) --no-print-directory fuzz
	CGO_ENABLED=1 go test $(GO_TEST_FLAGS) -race -count=1 -skip '^TestOperator$$' $(RACE_PKGS)
	CGO_ENABLED=1 go tool ginkgo -race -p --procs=$(OPERATOR_PROCS) --timeout=30m ./$(OPERATOR_SUITE)

.PHONY: test-rules
test-rules: $(PROMTOOL) $(HELM4) ## Test the chart's alerts with Prometheus' own tools (promtool check and test rules, the PromQL parser): seconds.
	cd test/rules && HELM=$(HELM4) PROMTOOL=$(PROMTOOL) go test -count=1 ./...

.PHONY: test-e2e
test-e2e: $(CONTROLPLANE_DEP) kwok image ## Run only the end-to-end suite (the image's manager binary, kwok nodes), verbosely.
	$(GO_ENV) go test -count=1 -timeout 20m ./test/e2e/ -ginkgo.v

# The hostile-kubelet suite (test/hostile, docs/e2e.md): a node with its own credentials attacks the
# running manager for HOSTILE_DURATION (60s in `make test`); HOSTILE_SEED= replays a run.
HOSTILE_DURATION ?= 60s
HOSTILE_SEED ?=

.PHONY: test-hostile
test-hostile: $(CONTROLPLANE_DEP) image ## Run only the hostile-kubelet suite, verbosely (HOSTILE_DURATION, default 60s; HOSTILE_SEED= replays a run).
	NHC_HOSTILE_DURATION=$(HOSTILE_DURATION) NHC_HOSTILE_SEED=$(HOSTILE_SEED) $(GO_ENV) go test -count=1 -timeout 60m ./test/hostile/ -ginkgo.v

# The real-node suite (test/realnode): a one-node cluster on this machine (the control plane, containerd,
# runc, the kubelet, kube-proxy, a CNI bridge), the image imported into containerd and the packaged
# chart installed with helm. It needs root and a cgroup v1 host, takes about 3 minutes once `make node`
# has built the node (docs/e2e.md), and is not part of `make test` yet: `go test ./...` skips it.
.PHONY: test-realnode
test-realnode: $(CONTROLPLANE_DEP) node kwok image chart release $(HELM4) ## Run the real-node suite: the packaged chart, and the release (the chart from oci://, install.yaml), on a real kubelet, containerd and runc (root; not part of make test).
	NHC_REALNODE=1 NODE_DIR=$(NODE_DIR) HELM4=$(HELM4) go test -count=1 -v -timeout 30m ./test/realnode/ -ginkgo.v

.PHONY: cluster
cluster: $(CONTROLPLANE_DEP) node ## Start the real-node cluster and keep it running until Ctrl-C (prints how to point kubectl at it); root.
	go build -o $(LOCALBIN)/realnode-cluster ./test/realnode/cluster
	NODE_DIR=$(NODE_DIR) $(LOCALBIN)/realnode-cluster $(CLUSTER_ARGS)

.PHONY: cluster-down
cluster-down: ## Remove what a real-node cluster left on the machine (processes, mounts, interfaces, cgroups), if anything.
	go build -o $(LOCALBIN)/realnode-cluster ./test/realnode/cluster
	$(LOCALBIN)/realnode-cluster -down $(CLUSTER_ARGS)

# The chaos test (test/chaos) runs three short histories (seeds 1, 2, 18, 45 steps each) and the scripted ones
# (docs/chaos.md) as part of `make test-extended`; `make chaos` runs a longer
# one with a random seed, or replays one: make chaos CHAOS_SEED=42 CHAOS_STEPS=17.
CHAOS_STEPS ?= 400
CHAOS_SEED ?= random

.PHONY: chaos
chaos: $(CONTROLPLANE_DEP) ## Run the chaos test of the running controllers for CHAOS_STEPS (400) steps; CHAOS_SEED= replays a run.
	CHAOS_SEED=$(CHAOS_SEED) CHAOS_STEPS=$(CHAOS_STEPS) $(GO_ENV) go test -count=1 -timeout 60m -v -run '^TestChaos$$' ./test/chaos/

# Benchmarks are not part of `make test` (a benchmark's smoke run is); `make bench` runs them and keeps
# the output in bin/bench/ (one file per run, latest.txt the last), for benchstat. BENCH selects them by
# name, BENCH_PKGS by package: make bench BENCH=ValidatingWebhook/kubernetes BENCHTIME=2000x.
BENCH ?= .
BENCH_PKGS ?= ./...
BENCHTIME ?= 1s
BENCH_DIR := $(LOCALBIN)/bench

.PHONY: bench
bench: $(CONTROLPLANE_DEP) ## Run the benchmarks (BENCH, BENCH_PKGS, BENCHTIME) and write the results to bin/bench/; not part of `make test`.
	@mkdir -p $(BENCH_DIR)
	@out=$(BENCH_DIR)/bench-$$(date -u +%Y%m%dT%H%M%SZ).txt; \
		{ echo "# $$(go version), $$(nproc) CPUs, $$(git rev-parse --short HEAD)"; \
		  $(GO_ENV) go test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) -timeout 60m $(BENCH_PKGS); } | tee $$out; \
		cp $$out $(BENCH_DIR)/latest.txt; echo "Results: $$out"
	@$(if $(strip $(SCALE)),$(MAKE) --no-print-directory bench-scale SCALE="$(SCALE)")

# The scale benchmark (test/scale, issue 15) runs the image's manager on a local cluster with SCALE
# nodes in pools of 100, one NodeHealthCheck per pool (1,000: kwok and the node lifecycle controller;
# more: node conditions driven by the benchmark), and writes bin/bench/scale-<nodes>-<time>.json and
# scale-<nodes>-latest.json. `make bench` runs it after the Go benchmarks (SCALE= skips it);
# NHC_SCALE_STEADY=30s shortens the steady-state phase, NHC_SCALE_LOGS=dir keeps the manager's and the
# simulation's logs, NHC_SCALE_TEMPLATE_LISTWATCH=1 lets the operator cache the test remediator's
# templates. A run takes about 7 minutes on 2 cores (1,000, 5,000 or 10,000 nodes; SCALE=25000 also
# works, and on 2 cores breaks in its mass recovery: docs/performance.md). `make bench-compare` prints
# runs side by side, and the spread of runs repeated at one commit and size.
SCALE ?= 1000 5000

.PHONY: bench-scale
bench-scale: $(CONTROLPLANE_DEP) kwok image ## Run the scale benchmark for each of SCALE (default "1000 5000") nodes; results in bin/bench/scale-*.json.
	@mkdir -p $(BENCH_DIR)
	@for n in $(SCALE); do 		echo "Scale benchmark: $$n nodes"; 		NHC_SCALE=$$n $(GO_ENV) go test -count=1 -v -timeout 60m -run '^TestScale$$' ./test/scale/ || exit 1; 	done

# FILES: the scale results to compare (globs allowed), default every scale-<nodes>-latest.json.
FILES ?= $(BENCH_DIR)/scale-*-latest.json

.PHONY: bench-compare
bench-compare: ## Print scale benchmark results (FILES, default bin/bench/scale-*-latest.json) side by side, a column per run.
	@NHC_SCALE_COMPARE="$(abspath $(FILES))" $(GO_ENV) go test -count=1 -v -run '^TestScaleCompare$$' ./test/scale/ | grep -E '^\||compare_test|FAIL'

.PHONY: fuzz
fuzz: $(CONTROLPLANE_DEP) ## Run each fuzz target for FUZZTIME (default 15s).
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo ">> fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		hack/fuzz.sh $$pkg $$fn $(FUZZTIME) || exit 1; \
	done

##@ Build and run

.PHONY: build
build: ## Build the manager binary into bin/manager, and the kubectl plugin into bin/kubectl-nhc.
	$(GO_ENV) go build -ldflags "$(MANAGER_LDFLAGS)" -o $(MANAGER) ./cmd/manager
	$(GO_ENV) go build -ldflags "$(MANAGER_LDFLAGS)" -o $(LOCALBIN)/kubectl-nhc ./cmd/kubectl-nhc

CHART_VERSION = $(shell awk '$$1 == "version:" {print $$2}' $(CHART)/Chart.yaml)
CHART_PACKAGE = $(LOCALBIN)/chart/node-healthcheck-$(CHART_VERSION).tgz
# Where `make chart-push` pushes the packaged chart, for example oci://ghcr.io/medik8s/charts.
CHART_REGISTRY ?=

.PHONY: chart
chart: ## Lint the chart and package it into bin/chart/node-healthcheck-<version>.tgz (helm from go.mod's tool).
	go tool helm lint $(CHART)
	go tool helm package $(CHART) --destination $(LOCALBIN)/chart
	@echo "Push it with: make chart-push CHART_REGISTRY=oci://<registry>/<path>"

.PHONY: chart-push
chart-push: chart ## Push the packaged chart to an OCI registry: make chart-push CHART_REGISTRY=oci://ghcr.io/medik8s/charts (log in with `go tool helm registry login` first).
	@if [ -z "$(CHART_REGISTRY)" ]; then echo "Set CHART_REGISTRY=oci://<registry>/<path>"; exit 1; fi
	go tool helm push $(CHART_PACKAGE) $(CHART_REGISTRY)

.PHONY: demo
demo: $(CONTROLPLANE_DEP) kwok build ## Start a local cluster with simulated nodes, run the operator and show a node failing and remediated (DEMO_ARGS=-keep keeps it running).
	$(GO_ENV) go run ./test/demo --manager $(MANAGER) --kubectl $(KUBEBUILDER_ASSETS)/kubectl --kubectl-nhc $(LOCALBIN)/kubectl-nhc $(DEMO_ARGS)

##@ Image

# The operator's image, built here without a daemon and offline (cmd/imagebuild): a static manager
# binary per platform on an empty base, user 65532:65532, entrypoint /manager, OCI labels. The chart's
# default image.repository is IMAGE_REPOSITORY and its default tag the appVersion (a test checks both).
IMAGE_REPOSITORY ?= ghcr.io/medik8s/node-healthcheck
IMAGE ?= $(IMAGE_REPOSITORY):$(VERSION)
PLATFORMS ?= linux/amd64 linux/arm64
# The OCI image layout that the tests run the manager from (exported: the tests read it), and the
# same layout as one tar archive.
IMAGE_LAYOUT ?= $(LOCALBIN)/image
IMAGE_TARBALL ?= $(LOCALBIN)/node-healthcheck-$(VERSION).oci.tar
export IMAGE_LAYOUT
# The revision label is the commit, and every timestamp in the image is the commit's time, so a commit
# always gives the same image.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_SOURCE ?= https://github.com/medik8s/node-healthcheck
IMAGE_LICENSES ?= Apache-2.0
# What the image is built from; the tests call a layout older than any of these stale (test/localcluster).
IMAGE_INPUTS := $(shell find api cmd internal -name '*.go' ! -name '*_test.go' ! -path 'internal/testutil/*') go.mod go.sum $(CHART)/Chart.yaml
MANAGER_INPUTS := $(filter-out cmd/imagebuild/% internal/plumbing/imagebuild/% cmd/release/% internal/plumbing/release/%,$(IMAGE_INPUTS))
IMAGE_BINARIES := $(foreach p,$(PLATFORMS),$(LOCALBIN)/platforms/$(subst /,-,$(p))/manager)
# A CycloneDX SBOM of each platform's manager, stored in the layout as an OCI 1.1 artifact whose
# subject is that platform's image (test/image checks it against the binary's build information).
IMAGE_SBOMS := $(foreach p,$(PLATFORMS),$(LOCALBIN)/platforms/$(subst /,-,$(p))/manager.cdx.json)
# Rebuilds the image (not the binaries) when the commit changes.
IMAGE_LABELS_STAMP := $(LOCALBIN)/platforms/labels

.PHONY: image
image: $(IMAGE_LAYOUT)/index.json ## Build the multi-arch OCI image into bin/image (layout) and bin/node-healthcheck-<version>.oci.tar; rebuilt only when its inputs change.

.PHONY: image-push
image-push: image ## Push the image to IMAGE (default ghcr.io/medik8s/node-healthcheck:<appVersion>) with the credentials of `docker login`.
	$(GO_ENV) go run ./cmd/imagebuild push --layout $(IMAGE_LAYOUT) $(IMAGE)

# The image for this machine's platform alone, which `make test` runs the manager of (its checks,
# test/image, run on the platforms built: IMAGE_PLATFORMS); the binary is the one `make image` uses.
HOST_PLATFORM := linux/$(shell go env GOARCH)
HOST_IMAGE_LAYOUT := $(LOCALBIN)/image-$(subst /,-,$(HOST_PLATFORM))

.PHONY: image-host
image-host: ## Build the image for this machine's platform alone into bin/image-linux-<arch> (what `make test` runs).
	@$(MAKE) --no-print-directory image PLATFORMS=$(HOST_PLATFORM) IMAGE_LAYOUT=$(HOST_IMAGE_LAYOUT) \
		IMAGE_TARBALL=$(HOST_IMAGE_LAYOUT).oci.tar

$(IMAGE_LAYOUT)/index.json: $(IMAGE_BINARIES) $(IMAGE_SBOMS) $(IMAGE_LABELS_STAMP) $(IMAGE_INPUTS)
	$(GO_ENV) go run ./cmd/imagebuild build --out $(IMAGE_LAYOUT) --tarball $(IMAGE_TARBALL) \
		--version $(VERSION) --revision $(REVISION) --created $(SOURCE_DATE_EPOCH) \
		--source $(IMAGE_SOURCE) --licenses $(IMAGE_LICENSES) --description "Node Healthcheck operator" \
		$(foreach p,$(PLATFORMS),--binary $(p)=$(LOCALBIN)/platforms/$(subst /,-,$(p))/manager) \
		$(foreach p,$(PLATFORMS),--sbom $(p)=$(LOCALBIN)/platforms/$(subst /,-,$(p))/manager.cdx.json)

# The SBOM is read from the binary's build information (`go version -m`: the modules linked in, with
# their checksums), for its platform; no serial number or timestamp, so a binary gives the same SBOM.
# GOPROXY=off: nothing is fetched (license detection, which downloads modules, is off).
$(LOCALBIN)/platforms/%/manager.cdx.json: $(LOCALBIN)/platforms/%/manager $(CYCLONEDX_GOMOD)
	GOPROXY=off GOOS=$(word 1,$(subst -, ,$*)) GOARCH=$(word 2,$(subst -, ,$*)) \
		$(CYCLONEDX_GOMOD) bin -json -noserial -notimestamp -std -version v$(VERSION) -output $@ $<

# One static binary per platform: no cgo, no build paths, the version stamped, symbols stripped.
$(LOCALBIN)/platforms/%/manager: $(MANAGER_INPUTS)
	CGO_ENABLED=0 GOOS=$(word 1,$(subst -, ,$*)) GOARCH=$(word 2,$(subst -, ,$*)) \
		go build -trimpath -ldflags "-s -w $(MANAGER_LDFLAGS)" -o $@ ./cmd/manager

$(IMAGE_LABELS_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(VERSION) $(REVISION) $(SOURCE_DATE_EPOCH) $(IMAGE_SOURCE) $(IMAGE_LICENSES)' | cmp -s - $@ 2>/dev/null || \
		echo '$(VERSION) $(REVISION) $(SOURCE_DATE_EPOCH) $(IMAGE_SOURCE) $(IMAGE_LICENSES)' > $@

.PHONY: FORCE
FORCE:

##@ Release

# `make release` writes everything a release publishes into RELEASE_DIR (docs/release.md): the image's
# OCI archive (make image's, with its SBOMs) and each platform's SBOM, the packaged chart, install.yaml
# (the chart rendered with its defaults for kubectl apply), the kubectl plugin's archives for
# PLUGIN_PLATFORMS with a krew manifest, and checksums.txt. Reproducible: the same commit gives the
# same bytes (every time in it is SOURCE_DATE_EPOCH, the commit's). Rebuilt only when its inputs change.
RELEASE_DIR ?= $(LOCALBIN)/release/$(VERSION)
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
PLUGIN_BINARIES := $(foreach p,$(PLUGIN_PLATFORMS),$(LOCALBIN)/plugins/$(subst /,-,$(p))/kubectl-nhc)
RELEASE_INPUTS := $(shell find cmd/release internal/plumbing/release -name '*.go' ! -name '*_test.go') $(shell find $(CHART) -type f) LICENSE
# Where `make release-push` publishes: the image (IMAGE), the chart (CHART_REGISTRY, oci://...), signed
# with COSIGN_KEY (a PEM ECDSA P-256 key, or cosign's encrypted key with COSIGN_PASSWORD set).
COSIGN_KEY ?=
RELEASE_PUSH_ARGS ?=

.PHONY: release
release: $(RELEASE_DIR)/checksums.txt ## Build the release into bin/release/<appVersion>/: image archive and SBOMs, chart, install.yaml, plugin archives, krew manifest, checksums; reproducible.

$(RELEASE_DIR)/checksums.txt: $(IMAGE_LAYOUT)/index.json $(PLUGIN_BINARIES) $(RELEASE_INPUTS) $(IMAGE_LABELS_STAMP)
	$(GO_ENV) go run ./cmd/release build --out $(RELEASE_DIR) --version $(VERSION) --created $(SOURCE_DATE_EPOCH) \
		--image-archive $(IMAGE_TARBALL) --chart $(CHART) --license LICENSE --kube-version $(KUBERNETES_VERSION) \
		$(foreach p,$(PLUGIN_PLATFORMS),--plugin $(p)=$(LOCALBIN)/plugins/$(subst /,-,$(p))/kubectl-nhc)

# The plugin per platform: no cgo, no build paths or VCS stamp, the version stamped, symbols stripped.
$(LOCALBIN)/plugins/%/kubectl-nhc: $(MANAGER_INPUTS)
	CGO_ENABLED=0 GOOS=$(word 1,$(subst -, ,$*)) GOARCH=$(word 2,$(subst -, ,$*)) \
		go build -trimpath -buildvcs=false -ldflags "-s -w $(MANAGER_LDFLAGS)" -o $@ ./cmd/kubectl-nhc

.PHONY: release-push
release-push: release ## Push the release's image (with its SBOMs) and chart and sign both: make release-push CHART_REGISTRY=oci://ghcr.io/medik8s/charts COSIGN_KEY=cosign.key [IMAGE=...].
	@if [ -z "$(CHART_REGISTRY)" ] || [ -z "$(COSIGN_KEY)" ]; then echo "Set CHART_REGISTRY=oci://<registry>/<path> and COSIGN_KEY=<key file>"; exit 1; fi
	$(GO_ENV) go run ./cmd/release push --dir $(RELEASE_DIR) --version $(VERSION) --created $(SOURCE_DATE_EPOCH) \
		--image $(IMAGE) --chart-repo $(CHART_REGISTRY) --key $(COSIGN_KEY) $(RELEASE_PUSH_ARGS)

##@ Tools

.PHONY: controlplane
controlplane: $(CONTROLPLANE_DIR)/kube-apiserver $(CONTROLPLANE_DIR)/etcd ## Build the pinned control-plane binaries into bin/k8s (once).
	@echo "KUBEBUILDER_ASSETS=$(CONTROLPLANE_DIR)"

$(CONTROLPLANE_DIR)/kube-apiserver $(CONTROLPLANE_DIR)/etcd:
	hack/controlplane.sh $(CONTROLPLANE_DIR) $(KUBERNETES_VERSION) $(ETCD_VERSION) $(CURDIR)

.PHONY: kwok
kwok: ## Build kwok (simulated nodes) into bin/kwok once, and its stages (again when hack/kwok.sh revises them).
	@hack/kwok.sh $(KWOK_DIR) $(KWOK_VERSION) $(CURDIR) $(CONTROLPLANE_DIR)/.src/k8s

.PHONY: node
node: ## Build the real node's pinned binaries (kubelet, kube-scheduler, kube-proxy, containerd, runc, CNI plugins, crictl) and pause image into bin/node, once; apt-installs nftables and libseccomp-dev if missing.
	@hack/node.sh $(NODE_DIR) $(KUBERNETES_VERSION) $(CONTAINERD_VERSION) $(RUNC_VERSION) $(CNI_PLUGINS_VERSION) $(CRI_TOOLS_VERSION)

.PHONY: helm4 promtool
helm4: $(HELM4) ## Build Helm 4's CLI (HELM4_VERSION) into bin/ once, for the real-node suite.

promtool: $(PROMTOOL) ## Build Prometheus' promtool (PROMETHEUS_VERSION, from test/rules/go.mod) into bin/ once, for the rule tests.

$(PROMTOOL):
	cd test/rules && go build -o $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

$(HELM4):
	GOBIN=$(LOCALBIN)/.gobin go install -ldflags "-X helm.sh/helm/v4/internal/version.version=$(HELM4_VERSION)" helm.sh/helm/v4/cmd/helm@$(HELM4_VERSION)
	mv $(LOCALBIN)/.gobin/helm $@

$(CYCLONEDX_GOMOD):
	GOBIN=$(LOCALBIN)/.gobin go install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)
	mv $(LOCALBIN)/.gobin/cyclonedx-gomod $@

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN)/.gobin go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/.gobin/controller-gen $@

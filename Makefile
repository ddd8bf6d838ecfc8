# captf. The two commands a newcomer needs:
#   make run    a local control plane and node, the manager and a sample that provisions (hack/local-up.sh)
#   make test   every unit and integration test (builds the control plane first)

SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/captf/captf/pkg/version.Version=$(VERSION) -X github.com/captf/captf/pkg/version.Commit=$(COMMIT)
# Integration packages start their own control plane each; two at once fit
# this kind of 2-core machine.
INTEGRATION_PARALLEL ?= 2

.PHONY: all
all: build

.PHONY: build
build: ## Build bin/captf.
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/captf ./cmd/captf

.PHONY: control-plane
control-plane: ## Build etcd, kube-apiserver, kube-controller-manager and kubectl into bin/ (skipped when present).
	hack/build-control-plane.sh

.PHONY: capi-tools
capi-tools: ## Build Cluster API's core manager and clusterctl into bin/ and copy its CRDs to bin/capi-crds (skipped when built for the pinned version).
	hack/build-capi.sh

.PHONY: tofu
tofu: ## Build OpenTofu into bin/tofu from the Go module proxy (skipped when built for the pinned version); test/tofu needs it.
	hack/build-tofu.sh

.PHONY: terraform
terraform: ## Build HashiCorp Terraform into bin/terraform from the Go module proxy (skipped when built for the pinned version); test/tofu's SPEC K6 test needs it.
	hack/build-terraform.sh

# clusterctl (SPEC K10; docs/deploy.md, "With clusterctl"). Generated into
# out/ (git-ignored), never committed; only Go is needed.
RELEASE_VERSION ?= v0.1.0
IMAGE ?= ghcr.io/captf/captf:latest

.PHONY: release-manifests
release-manifests: ## captf's clusterctl release assets into out/release: infrastructure-components.yaml (from manifests/), metadata.yaml, cluster templates, ClusterClass. RELEASE_VERSION, IMAGE.
	RELEASE_VERSION=$(RELEASE_VERSION) IMAGE=$(IMAGE) hack/clusterctl-repository.sh --release out/release

.PHONY: clusterctl-repository
clusterctl-repository: ## A local clusterctl repository in out/repository (captf, Cluster API core and kubeadm, cert-manager's CRDs) and out/repository/clusterctl.yaml: clusterctl init and generate cluster with no network.
	RELEASE_VERSION=$(RELEASE_VERSION) IMAGE=$(IMAGE) hack/clusterctl-repository.sh --repository out/repository

.PHONY: clusterctl-modules
clusterctl-modules: ## Download the Go modules the two above use (the renderer's, Cluster API's, cert-manager's), so test/integration/clusterctl needs no network.
	hack/clusterctl-repository.sh --download

.PHONY: node-binaries
node-binaries: ## Build kubelet, kube-scheduler, kube-proxy and the image tools into bin/ (skipped when present).
	hack/build-control-plane.sh --node

.PHONY: node-prereqs
node-prereqs: ## Install the node's Debian packages (containerd, runc, CNI plugins, iptables) when missing; root.
	hack/node-prereqs.sh

.PHONY: run
run: ## Run a local control plane with a node, the manager and a sample whose Job runs, in the foreground (Ctrl-C stops all; CAPTF_NODE=0 skips the node).
	hack/local-up.sh

# The integration and end-to-end suites spend much of their time waiting
# (sync periods, Jobs, drift intervals; about half the CPU idle with either
# alone), so make test runs them side by side: about 21 minutes instead of
# 34 warm, and what keeps a cold .ci/run under an hour
# (docs/local-control-plane.md, "How long it takes"). Each suite's output
# is printed, whole, when it ends. make test-integration and make e2e run
# either alone.
.PHONY: test
test: control-plane test-unit ## Unit tests, then the integration and (as root) end-to-end tests side by side.
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-integration test-e2e-as-root

.PHONY: test-unit
test-unit: ## Unit tests (with the race detector) and the fuzz seed corpora.
	$(GO) test -race -count=1 ./cmd/... ./pkg/...

.PHONY: test-integration
test-integration: control-plane tofu terraform capi-tools clusterctl-modules ## Integration tests against a real control plane (test/tofu runs OpenTofu and Terraform built from the Go module proxy; test/integration/capi runs Cluster API's core manager; test/integration/clusterctl runs clusterctl from a local repository it writes).
	$(GO) test -count=1 -p $(INTEGRATION_PARALLEL) -timeout 40m ./test/...

# A real node (issue 12; docs/local-control-plane.md, "A node"): root, the
# Debian packages, the node binaries. Not part of make test yet.
.PHONY: test-node
test-node: control-plane node-binaries ## Pods on a real node: Job with Secrets under Pod Security restricted, in-cluster API access, clean teardown (root).
	hack/node-prereqs.sh
	CAPTF_NODE_TEST=1 $(GO) test -count=1 -v -timeout 20m -run 'TestNode|TestJanitor' ./test/node/... ./test/controlplane/

# End to end (issue 12; docs/local-control-plane.md, "How tests use it"):
# root, a node, the manager deployed in-cluster from manifests/. make test
# runs it as root (CI) and says it skipped it otherwise.
.PHONY: test-e2e-as-root
test-e2e-as-root:
	@if [[ "$$(id -u)" == 0 ]]; then $(MAKE) --no-print-directory e2e; \
	  else echo "make test: skipping make e2e: a node needs root (run make e2e as root)"; fi

.PHONY: e2e
e2e: control-plane node-binaries tofu capi-tools clusterctl-modules ## The manager in-cluster from manifests/ and a cluster's lifecycle on a real node: Jobs, rotation, revocation, destroy; Cluster API's core manager driving a Cluster and a Machine; captf installed by clusterctl init and a cluster moved to a second management cluster and back (root).
	hack/node-prereqs.sh
	CAPTF_E2E=1 $(GO) test -count=1 -v -timeout 40m ./test/e2e/...

.PHONY: verify
verify: ## gofmt, go vet, generated code up to date.
	@bad=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	  if [[ -n "$$bad" ]]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	hack/verify-codegen.sh

.PHONY: codegen
codegen: ## Regenerate deepcopy, clientset, listers, informers and CRDs.
	hack/update-codegen.sh

.PHONY: clean
clean: ## Remove built binaries, local-up state and out/ (keeps the control plane binaries).
	rm -rf bin/captf bin/captf-controlplane bin/captf-probe bin/codegen .local out

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

# Benchmark (issue 6, docs/performance.md): a real control plane, `captf
# manager` as a subprocess, a table of figures beside same-run baselines.
# Not part of `make test`, which runs the smoke variant as TestBenchSmoke.
BENCH_ARGS ?=

.PHONY: bench
bench: control-plane capi-tools ## Full benchmark: 1,000 namespaces, 10,000 unrelated Secrets, 2,000 shared objects, drift at 1,000 objects over a 30-minute interval (about 55 minutes). BENCH_ARGS adds flags.
	$(GO) run ./test/bench $(BENCH_ARGS)

.PHONY: bench-smoke
bench-smoke: control-plane capi-tools ## CI-sized benchmark: fails on incorrectness, never on a duration.
	$(GO) run ./test/bench -smoke $(BENCH_ARGS)

# Fault injection (issue 7, docs/reliability.md). make test runs the short
# variant of every fault package; this runs them at full size.
.PHONY: test-faults
test-faults: control-plane ## Fault suites at full size: restarts, kills, failover, conflict storm, flaky API, namespace deletion, bad input.
	CAPTF_FAULTS_FULL=1 $(GO) test -count=1 -v -timeout 60m ./test/faults/...

# Soak (not in CI): random rotations, revocations, re-allowances, creations
# and deletions over 50 namespaces, invariants every minute, RSS and
# goroutines over time.
SOAK_DURATION ?= 30m
.PHONY: soak
soak: control-plane ## Soak for SOAK_DURATION (default 30m): invariants every minute, RSS/goroutine table.
	CAPTF_SOAK=1 $(GO) test -count=1 -v -timeout 3h ./test/soak -run TestSoak -args -duration=$(SOAK_DURATION)

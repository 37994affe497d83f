# loop-plugins: `make dev` runs the main job, `make test` runs every test.
SHELL := /bin/bash
export GOTOOLCHAIN := local
export CARGO_TARGET_DIR ?= $(HOME)/.cache/loop-plugins/target
CARGO ?= cargo
BIN := $(CARGO_TARGET_DIR)/debug/loop-plugins

.PHONY: all build controlplane crds fmt lint test unit e2e dev bench

all: build

build:
	$(CARGO) build --workspace --bins

# Builds (or reuses) kube-apiserver, kube-controller-manager, kubectl, etcd and helm from the
# pinned upstream Go modules; the last line printed is the folder that holds them.
controlplane:
	@hack/controlplane/build.sh

# Regenerates crds/ from the Rust types.
crds: build
	$(BIN) crds > crds/loop-plugins.yaml

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace --lib --bins

test:
	@hack/test.sh

# The e2e suite alone, against a control plane it starts (built or reused by build.sh).
e2e:
	$(CARGO) test --test e2e

# GET /channel requests per second on one core (the API server pinned to CPU 0, the loader on
# CPU 1), against /healthz of the same server as the baseline; then a tool call through the
# host API against the plugin directly (p50, p99, ratios) and Pod Ready → the held call at the
# plugin. Release builds.
bench:
	$(CARGO) bench --bench api_channel
	$(CARGO) build --release -p echo-plugin --bins
	$(CARGO) bench --bench host_calls

# A local cluster until Ctrl-C: control plane, kubelet stand-in, CRDs, examples/; writes
# .dev/kubeconfig (KUBECONFIG=.dev/kubeconfig kubectl get plugins).
dev:
	@hack/dev.sh

# On a machine with Docker and kind (v0.24 or later): a kind cluster from kind-config.yaml,
# our image and the echo plugin's built and loaded into it, the chart installed with the built
# helm, then the e2e suite against that cluster instead of the local control plane: the one
# switch is LOOP_PLUGINS_E2E_CLUSTER=kind with KUBECONFIG. Reuses the cluster when it exists;
# `kind delete cluster --name loop-plugins` removes it.
KIND ?= kind
DOCKER ?= docker
KIND_CLUSTER ?= loop-plugins
KIND_KUBECONFIG ?= $(CURDIR)/.dev/kind.kubeconfig
KIND_TAG ?= kind
KIND_IMAGE := loop-plugins:$(KIND_TAG)
KIND_ECHO_IMAGE := loop-plugins-echo:$(KIND_TAG)

.PHONY: kind-e2e
kind-e2e:
	@set -euo pipefail; \
	command -v $(DOCKER) >/dev/null || { echo "make kind-e2e needs Docker" >&2; exit 1; }; \
	command -v $(KIND) >/dev/null || { echo "make kind-e2e needs kind: https://kind.sigs.k8s.io" >&2; exit 1; }; \
	bin=$$(hack/controlplane/build.sh | tail -n 1); \
	mkdir -p .dev; \
	if ! $(KIND) get clusters | grep -qx '$(KIND_CLUSTER)'; then \
	  $(KIND) create cluster --name $(KIND_CLUSTER) --config kind-config.yaml --kubeconfig $(KIND_KUBECONFIG) --wait 5m; \
	fi; \
	$(KIND) export kubeconfig --name $(KIND_CLUSTER) --kubeconfig $(KIND_KUBECONFIG); \
	$(DOCKER) build -t $(KIND_IMAGE) .; \
	$(DOCKER) build --target echo-plugin -t $(KIND_ECHO_IMAGE) .; \
	$(KIND) load docker-image --name $(KIND_CLUSTER) $(KIND_IMAGE) $(KIND_ECHO_IMAGE); \
	"$$bin/kubectl" --kubeconfig $(KIND_KUBECONFIG) apply --server-side -f deploy/namespace.yaml; \
	"$$bin/helm" upgrade --install loop-plugins charts/loop-plugins \
	  --kubeconfig $(KIND_KUBECONFIG) --namespace loop-plugins \
	  --set image.repository=loop-plugins --set image.tag=$(KIND_TAG) \
	  --set image.pullPolicy=IfNotPresent --set hostConfig.create=false \
	  --wait --timeout 5m; \
	KUBECONFIG=$(KIND_KUBECONFIG) LOOP_PLUGINS_E2E_CLUSTER=kind LOOP_PLUGINS_CONTROLPLANE="$$bin" \
	  LOOP_PLUGINS_E2E_IMAGE=$(KIND_IMAGE) LOOP_PLUGINS_E2E_ECHO_IMAGE=$(KIND_ECHO_IMAGE) \
	  $(CARGO) test --test e2e

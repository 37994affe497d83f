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

# A local cluster until Ctrl-C: control plane, kubelet stand-in, CRDs, examples/; writes
# .dev/kubeconfig (KUBECONFIG=.dev/kubeconfig kubectl get plugins).
dev:
	@hack/dev.sh

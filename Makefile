# loop-plugins: `make dev` runs the main job, `make test` runs every test.
SHELL := /bin/bash
export GOTOOLCHAIN := local
export CARGO_TARGET_DIR ?= $(shell hack/target-dir.sh)
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

# Regenerates crds/ and its copies in the chart and deploy/ from the Rust types.
crds:
	LOOP_PLUGINS_UPDATE_CRDS=1 $(CARGO) test -p loop-plugins --test crds

fmt:
	$(CARGO) fmt --all

# Import cycles, Markdown links (each lint's own test first: a lint that cannot fail protects
# nothing), formatting, clippy, and rustdoc's intra-doc links.
lint:
	python3 hack/import_cycles_test.py
	hack/import-cycles.py
	python3 hack/markdown_links_test.py
	hack/markdown-links.py
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p loop-plugins --test e2e -- -D warnings
	RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" $(CARGO) doc --workspace --no-deps

unit:
	$(CARGO) test --workspace --lib --bins

test:
	@hack/test.sh

# The bridge module for panels and cards alone (packages/loop-plugin-ui): its tests on Node's own
# runner, then its type declarations checked with TypeScript from npm; and the console's host
# end of the bridge against it (crates/server/src/console/test). Part of `make test`.
.PHONY: bridge-test
bridge-test:
	node --test --test-timeout=30000 packages/loop-plugin-ui/test/ crates/server/src/console/test/
	hack/bridge-typecheck.sh

# The e2e suite alone, against a control plane it starts (built or reused by build.sh).
e2e:
	$(CARGO) build --workspace --bins
	$(CARGO) test --test e2e

# GET /channel requests per second on one core (the API server pinned to CPU 0, the loader on
# CPU 1), against /healthz of the same server as the baseline; then a tool call through the
# host API against its floor, a bare forwarder between the same loader and the same plugin
# (issue 31): p50/p99 one call at a time; on one core (each proxy pinned to CPU 0, the loader
# and the plugin to CPU 1) calls per second and CPU-us per call from /proc over the same
# number of calls; p50/p99 in an open loop at half the forwarder's saturation; then Pod Ready
# → the held call at the plugin. `name=value` summaries, each figure with its baseline from
# the same run. Release builds, `loop-plugins` as it ships (Cargo.toml's dist profile, in the
# target folder hack/scale.sh builds it in too). Then the scale bench (make bench-scale, below,
# with a minute of steady state): converging 3,000 instances against a bare client writing the
# same objects, the Kubernetes API server's CPU seconds for each. Then cold starts in real
# containers on kind (make bench-kind, below). Knobs: the module docs of
# crates/bench/benches/{api_channel,host_calls,scale,cold_start}.rs.
bench:
	$(CARGO) build --release --workspace --bins
	CARGO_TARGET_DIR=$(CARGO_TARGET_DIR)-dist $(CARGO) build --profile dist -p loop-plugins --bin loop-plugins
	LOOP_PLUGINS_BIN=$(CARGO_TARGET_DIR)-dist/dist/loop-plugins $(CARGO) bench -p loop-plugins-bench --bench api_channel
	LOOP_PLUGINS_BIN=$(CARGO_TARGET_DIR)-dist/dist/loop-plugins $(CARGO) bench -p loop-plugins-bench --bench host_calls
	SCALE_STEADY_SECONDS=$${SCALE_STEADY_SECONDS:-60} hack/scale.sh scale
	@hack/kind-e2e.sh --bench

# Cold starts in real containers (issue 31): hack/kind-e2e.sh's kind cluster and release, then
# crates/bench/benches/cold_start.rs: 20 cold calls through the host API with the plugin's image
# on the node and 20 with it removed from every node, call → answer and each phase (Pod made,
# scheduled, running, Ready, answered), against warm calls of the same run. Needs Docker, as
# kind-e2e does.
.PHONY: bench-kind
bench-kind:
	@hack/kind-e2e.sh --bench

# The crates plugin authors depend on (loop-plugins-gate, loop-plugins-manifest, loop-plugin-sdk),
# packaged for crates.io in publishing order and each built alone from its package, as a
# publish would (make test checks the packages without building them: tests/publish.rs).
.PHONY: publish-check
publish-check:
	$(CARGO) package --offline -p loop-plugins-manifest -p loop-plugins-gate -p loop-plugin-sdk \
		--target-dir $(CARGO_TARGET_DIR)-publish

# The controller and the API at a team's size (1,000 chats, 3,000 instances), each figure with a
# baseline measured in the same run: convergence from cold against a bare client writing the
# same objects, 5 minutes of steady state (writes from the audit log, CPU seconds), peak and
# steady RSS, a HostConfig change's fan-out, GET /channel against /healthz on one core and a
# tool call through the host API against a direct one under 200 callers. Release builds
# (`loop-plugins` as it ships: dist); the summary is `name=value` lines. SCALE_QUICK=1 runs a
# tenth of it (see hack/scale.sh).
.PHONY: bench-scale
bench-scale:
	@hack/scale.sh scale

# SIGKILLs of the controller during the 3,000-instance convergence and a burst of config
# changes (one replica, then two with the Lease holder killed) and of the API server during tool
# calls and runs; then: nothing doubled or leaked, everything converged, every /done delivered
# once, no quota over-count, and each restart's time to convergence.
.PHONY: chaos
chaos:
	@hack/scale.sh chaos

# Every property test of untrusted input (crates/hostile) for longer than make test's 3 s a
# target: FUZZ_SECONDS each (60 by default), one at a time; hostile inputs found are shrunk,
# printed with their seed and saved into the target's corpus (crates/*/tests/hostile/).
.PHONY: fuzz
fuzz:
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-60} hack/fuzz.sh

# The gate's overhead: open/stat/read, create/write/unlink and fork+exec loops under the gate
# against the same loops bare, interleaved in one run, as ratios (release build).
.PHONY: bench-gate
bench-gate:
	$(CARGO) bench -p loop-plugins-gate --bench gate

# A local cluster until Ctrl-C: control plane, kubelet stand-in, CRDs, examples/; writes
# .dev/kubeconfig (KUBECONFIG=.dev/kubeconfig kubectl get plugins).
# `make dev CLUSTER=kind`: the kind cluster of kind-config.yaml instead, with real containers:
# the chart installed from our image, examples/ applied with the echo plugin's real image
# (hack/kind-e2e.sh --dev; .dev/kind.kubeconfig); Ctrl-C removes it (KEEP_CLUSTER=1 keeps it).
CLUSTER ?= local
dev:
	@CLUSTER=$(CLUSTER) hack/dev.sh

# The e2e suite on a kind cluster with real containers, from a fresh machine: starts Docker if
# none answers (installing Debian's docker.io when missing), builds kind and, where nothing can
# be pulled, the node image and every cluster image from Go modules and Debian packages (cached
# under ~/.cache/loop-plugins/kind-*), starts a local registry, pushes our image and the echo
# plugin's, installs the chart (two replicas) with the built helm, runs the suite with
# LOOP_PLUGINS_E2E_CLUSTER=kind, then removes what it made and puts back the host's sysctls.
# Settings (environment or make's command line): KIND_OFFLINE, KIND_NODE_IMAGE,
# KIND_REGISTRY_IMAGE, KIND_APP_IMAGES, KEEP_CLUSTER=1, KIND_CLUSTER, KIND_KUBECONFIG; see
# hack/kind-e2e.sh.
.PHONY: kind-e2e
kind-e2e:
	@hack/kind-e2e.sh

# The rehearsal of kind-e2e on this machine, without Docker: `loop-plugins-dev --cluster-only`
# (the local control plane and the kubelet stand-in, nothing installed), the chart installed
# into it with the built helm (API Service on node port 30080, which the stand-in's kube-proxy
# serves at 127.0.0.1:30080, as kind does), then the e2e suite with
# LOOP_PLUGINS_E2E_CLUSTER=existing against it. `hack/e2e-existing.sh --no-tests` stops before
# the suite and keeps the cluster up until Ctrl-C.
.PHONY: e2e-existing
e2e-existing:
	@hack/e2e-existing.sh

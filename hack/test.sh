#!/usr/bin/env bash
# Every test that needs no Docker: the control plane build (or reuse), lints (import cycles,
# Markdown and rustdoc links, formatting, clippy), the bridge module's tests, unit tests and the
# e2e suite against a real kube-apiserver and etcd (its browser tests in Debian's headless
# Chromium). Prints how long each phase took.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(hack/target-dir.sh)}

phases=()
phase() { # name command...
  local name=$1 start=$SECONDS; shift
  echo "==> ${name}"
  "$@"
  phases+=("$(printf '%-28s %5ss' "$name" "$((SECONDS - start))")")
}
report() { echo "==> phase times"; printf '    %s\n' "${phases[@]}"; }
trap report EXIT

controlplane_dir() { LOOP_PLUGINS_CONTROLPLANE=$(hack/controlplane/build.sh | tail -n 1); export LOOP_PLUGINS_CONTROLPLANE; }
phase "control plane binaries" controlplane_dir
import_cycles() { python3 hack/import_cycles_test.py && hack/import-cycles.py; }
phase "import cycles" import_cycles
# Every Markdown file's links: paths that exist inside the repository, anchors its headings have.
markdown_links() { python3 hack/markdown_links_test.py && hack/markdown-links.py; }
phase "markdown links" markdown_links
# The bridge module for panels and cards (packages/loop-plugin-ui) and the console's host end of
# the bridge against it (crates/server/src/console/test): Node's own test runner, no
# packages; then its type declarations, with TypeScript from npm (cached outside the repo).
phase "bridge module tests" node --test --test-timeout=30000 packages/loop-plugin-ui/test/ \
  crates/server/src/console/test/
phase "bridge module types" hack/bridge-typecheck.sh
phase "cargo fmt --check" cargo fmt --all -- --check
phase "cargo build" cargo build --workspace --all-targets
# The e2e suite is a test target with `test = false` (it needs a control plane), which
# --all-targets leaves out: it is built and linted on its own.
clippy() {
  cargo clippy --workspace --all-targets -- -D warnings
  cargo clippy -p loop-plugins --test e2e -- -D warnings
}
phase "cargo clippy" clippy
# rustdoc's links between items: a doc comment naming an item that is not there.
rustdoc_links() { RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" cargo doc --workspace --no-deps; }
phase "rustdoc links" rustdoc_links
# Headless Chromium for the browser tests (Debian's package; installed when missing), before
# the unit tests: conformance's drawing tests need it too.
chromium_binary() { LOOP_PLUGINS_CHROMIUM=$(hack/chromium.sh | tail -n 1); export LOOP_PLUGINS_CHROMIUM; }
phase "chromium" chromium_binary
phase "unit and integration tests" cargo test --workspace
phase "schemathesis venv" hack/schemathesis.sh install
phase "e2e tests" cargo test --test e2e
# The suite against the chart installed in a cluster is `make kind-e2e` (real containers; CI
# runs it after this). `make e2e-existing` rehearses that path on the local control plane
# without Docker; it is not part of this run.

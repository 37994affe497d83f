#!/usr/bin/env bash
# `make dev`: builds what is missing (the control-plane binaries, our binaries), then runs
# `loop-plugins-dev`: etcd, kube-apiserver, kube-controller-manager and the kubelet stand-in,
# our CRDs installed, examples/ applied, the kubeconfig in .dev/kubeconfig. Ctrl-C stops it all.
# Extra arguments go to `loop-plugins-dev` (see `loop-plugins-dev --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/loop-plugins/target}

LOOP_PLUGINS_CONTROLPLANE=$(hack/controlplane/build.sh | tail -n 1)
export LOOP_PLUGINS_CONTROLPLANE
cargo build --workspace --bins
mkdir -p .dev
# exec: Ctrl-C and SIGTERM reach `loop-plugins-dev`, which stops everything it started.
exec "$CARGO_TARGET_DIR/debug/loop-plugins-dev" --kubeconfig .dev/kubeconfig --run-dir .dev/run "$@"

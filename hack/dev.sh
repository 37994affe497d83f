#!/usr/bin/env bash
# `make dev`: builds what is missing (the control-plane binaries, our binaries), then runs
# `loop-plugins-dev`: etcd, kube-apiserver, kube-controller-manager and the kubelet stand-in,
# our CRDs installed, examples/ applied, the kubeconfig in .dev/kubeconfig. Ctrl-C stops it all.
# Extra arguments go to `loop-plugins-dev` (see `loop-plugins-dev --help`).
#
# CLUSTER=kind (`make dev CLUSTER=kind`): a kind cluster with real containers instead, made as
# `make kind-e2e` makes it (hack/kind-e2e.sh --dev): the chart from our image, examples/ with
# the echo plugin's real image, .dev/kind.kubeconfig; Ctrl-C removes it unless KEEP_CLUSTER=1.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${CLUSTER:-local} in
  local) ;;
  kind) exec hack/kind-e2e.sh --dev "$@" ;;
  *) echo "dev: CLUSTER=${CLUSTER}: use local (the default) or kind" >&2; exit 2 ;;
esac
export GOTOOLCHAIN=local
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(hack/target-dir.sh)}

LOOP_PLUGINS_CONTROLPLANE=$(hack/controlplane/build.sh | tail -n 1)
export LOOP_PLUGINS_CONTROLPLANE
cargo build --workspace --bins
mkdir -p .dev
# exec: Ctrl-C and SIGTERM reach `loop-plugins-dev`, which stops everything it started.
exec "$CARGO_TARGET_DIR/debug/loop-plugins-dev" --kubeconfig .dev/kubeconfig --run-dir .dev/run "$@"

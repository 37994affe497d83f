#!/usr/bin/env bash
# `make dev`: builds what is missing (the control-plane binaries, the registry, our binaries),
# then runs `loop-plugins-dev`: etcd, kube-apiserver, kube-controller-manager and the kubelet
# stand-in, a registry on 127.0.0.1 (hack/registry/build.sh's), our CRDs installed, examples/
# applied, the echo plugin's image built from examples/echo-plugin and the echo-plugin binary,
# pushed, and installed with `loop-plugins plugin install` (so what runs carries the image's
# real digest), the kubeconfig in .dev/kubeconfig. Ctrl-C stops it all.
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
# The binaries, by package and name (one place to change them).
DEV_BIN=loop-plugins-dev

say() { echo "dev: $*" >&2; }
started=$SECONDS

LOOP_PLUGINS_CONTROLPLANE=$(hack/controlplane/build.sh | tail -n 1)
export LOOP_PLUGINS_CONTROLPLANE
say "control plane binaries ready ($((SECONDS - started))s)"
LOOP_PLUGINS_REGISTRY_BIN="$(hack/registry/build.sh | tail -n 1)/registry"
export LOOP_PLUGINS_REGISTRY_BIN
say "registry binary ready ($((SECONDS - started))s)"
cargo build --workspace --bins
say "built ($((SECONDS - started))s)"
mkdir -p .dev
# exec: Ctrl-C and SIGTERM reach `loop-plugins-dev`, which stops everything it started.
exec "$CARGO_TARGET_DIR/debug/$DEV_BIN" --kubeconfig .dev/kubeconfig --run-dir .dev/run "$@"

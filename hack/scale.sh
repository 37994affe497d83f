#!/usr/bin/env bash
# `make bench-scale` and `make chaos`: builds what is missing (the control-plane binaries, our
# release binaries, for the scale bench `loop-plugins` as it ships, and the bench), then runs crates/e2e/benches/<bench>.rs against a local
# control plane it starts. Prints how long each phase took; the bench prints its own phases,
# then a `name=value` summary on standard output.
#
#   hack/scale.sh scale     # the controller and the API at 3,000 instances, with baselines
#   hack/scale.sh chaos     # SIGKILLs of the controller and the API server, then checks
#
# SCALE_QUICK=1 runs a tenth of the world (development only); other knobs are documented at
# the top of each bench.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(hack/target-dir.sh)}

# The package that holds the benches (the product binary comes from `--workspace --bins`).
BENCH_PACKAGE=loop-plugins-e2e

bench=${1:?usage: hack/scale.sh scale|chaos}
case "$bench" in
  scale|chaos) ;;
  *) echo "hack/scale.sh: unknown bench $bench (scale or chaos)" >&2; exit 2 ;;
esac

phases=()
phase() { # name command...
  local name=$1 start=$SECONDS; shift
  echo "==> ${name} (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$@"
  phases+=("$(printf '%-28s %5ss' "$name" "$((SECONDS - start))")")
}
report() { echo "==> phase times" >&2; printf '    %s\n' "${phases[@]}" >&2; }
trap report EXIT

controlplane_dir() { LOOP_PLUGINS_CONTROLPLANE=$(hack/controlplane/build.sh | tail -n 1); export LOOP_PLUGINS_CONTROLPLANE; }
phase "control plane binaries" controlplane_dir
phase "release build" cargo build --release --workspace --bins
# The scale bench measures the binary that ships (its memory above all): Cargo.toml's dist
# profile. Chaos checks what kills leave behind, which does not depend on how it was linked,
# and keeps the release build (the dist link costs ~5 minutes after any change).
if [[ $bench == scale ]]; then
  phase "dist build (loop-plugins)" cargo build --profile dist -p loop-plugins-cli --bin loop-plugins
  export LOOP_PLUGINS_BIN=$CARGO_TARGET_DIR/dist/loop-plugins
fi
phase "bench build" cargo bench -p "$BENCH_PACKAGE" --bench "$bench" --no-run
phase "$bench" cargo bench -p "$BENCH_PACKAGE" --bench "$bench"

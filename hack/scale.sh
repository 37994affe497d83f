#!/usr/bin/env bash
# `make bench-scale` and `make chaos`: builds what is missing (the control-plane binaries, our
# release binaries, for the scale bench `loop-plugins` as it ships, and the bench), then runs crates/bench/benches/<bench>.rs against a local
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
BENCH_PACKAGE=loop-plugins-bench

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
# The scale bench measures the binary that ships (its memory above all): Cargo.toml's dist
# profile. Its link is mostly one core's work for ~5 minutes after any change, so it runs in a
# target folder of its own (cargo builds one thing at a time in a folder) beside the release
# and bench builds, and the bench waits for it. Chaos checks what kills leave behind, which
# does not depend on how the binary was linked, and keeps the release build.
dist_pid=
if [[ $bench == scale ]]; then
  dist_dir=$CARGO_TARGET_DIR-dist
  dist_log=$(mktemp "${TMPDIR:-/tmp}/loop-plugins-dist-build.XXXXXX")
  CARGO_TARGET_DIR=$dist_dir cargo build --profile dist -p loop-plugins --bin loop-plugins \
    >"$dist_log" 2>&1 &
  dist_pid=$!
  trap 'kill "$dist_pid" 2>/dev/null || true; rm -f "$dist_log"; report' EXIT
fi
phase "release build" cargo build --release --workspace --bins
phase "bench build" cargo bench -p "$BENCH_PACKAGE" --bench "$bench" --no-run
if [[ -n $dist_pid ]]; then
  dist_wait() {
    if ! wait "$dist_pid"; then
      cat "$dist_log" >&2
      echo "hack/scale.sh: the dist build of loop-plugins failed" >&2
      exit 1
    fi
  }
  phase "dist build (the rest of it)" dist_wait
  export LOOP_PLUGINS_BIN=$dist_dir/dist/loop-plugins
fi
phase "$bench" cargo bench -p "$BENCH_PACKAGE" --bench "$bench"

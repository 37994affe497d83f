#!/usr/bin/env bash
# make fuzz: every property test of untrusted input (the hostile-input targets of crates/hostile),
# each for FUZZ_SECONDS of generated inputs (60 by default; make test gives each 3), one at a time
# so each has the machine. A target is a #[test] that calls hostile::Target::run: in a crate's
# tests/hostile.rs, or in its library's tests under a module named hostile. An input that breaks
# a target is shrunk, printed with the seed that found it (LOOP_FUZZ_SEED repeats the run) and
# saved into the target's corpus (crates/<crate>/tests/hostile/<target>/), which every later run
# replays first: review it and commit it. Prints how long each crate's targets ran.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(hack/target-dir.sh)}
export LOOP_FUZZ_SECONDS=${FUZZ_SECONDS:-60}
export LOOP_FUZZ_SAVE=1

package() { sed -n 's/^name = "\(.*\)"/\1/p' "$1/Cargo.toml" | head -n 1; }

runs=()
for dir in crates/*; do
  # crates/hostile is the runner, with no target of its own.
  [ -f "$dir/Cargo.toml" ] && [ "$dir" != crates/hostile ] || continue
  if [ -f "$dir/tests/hostile.rs" ]; then
    runs+=("$(package "$dir") --test hostile")
  fi
  if grep -rqs 'Target::new(' "$dir/src"; then
    runs+=("$(package "$dir") --lib hostile")
  fi
done

echo "==> fuzz: ${#runs[@]} runs, each target ${LOOP_FUZZ_SECONDS}s of generated inputs"
times=()
status=0
for run in "${runs[@]}"; do
  read -r pkg rest <<<"$run"
  start=$SECONDS
  echo "==> cargo test -p $pkg $rest"
  # shellcheck disable=SC2086 # $rest is the target's arguments
  if ! cargo test -q -p "$pkg" $rest -- --nocapture --test-threads=1; then
    status=1
  fi
  times+=("$(printf '%-48s %5ss' "$pkg $rest" "$((SECONDS - start))")")
done
echo "==> fuzz times"
printf '    %s\n' "${times[@]}"
new=$(git status --porcelain -- 'crates/*/tests/hostile' | wc -l)
[ "$new" -eq 0 ] || echo "==> ${new} new corpus inputs: git status crates/*/tests/hostile"
exit "$status"

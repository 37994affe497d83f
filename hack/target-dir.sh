#!/usr/bin/env bash
# The cargo target folder for this checkout: outside the clone so it survives a fresh clone of
# the same folder, and keyed by the checkout's path because cargo bakes paths into what it
# builds (env!("CARGO_MANIFEST_DIR") in tests) without rebuilding when the checkout moves: two
# checkouts sharing one folder would run each other's paths.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd -P)
key=$(printf '%s' "$root" | sha256sum | cut -c1-12)
echo "${XDG_CACHE_HOME:-$HOME/.cache}/loop-plugins/target-${key}"

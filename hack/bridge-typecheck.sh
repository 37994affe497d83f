#!/usr/bin/env bash
# Type-checks packages/loop-plugin-ui/index.d.ts against a panel's use of it
# (packages/loop-plugin-ui/test/usage.ts, which also holds misuses that must not compile), with
# TypeScript from npm installed outside the repository (~/.cache/loop-plugins/npm) unless the
# pinned version is there already. The module itself needs no build: this only checks its types.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=5.9.3
PREFIX=${LOOP_PLUGINS_NPM:-${XDG_CACHE_HOME:-$HOME/.cache}/loop-plugins/npm}
TSC=$PREFIX/node_modules/typescript/bin/tsc

installed() {
  [[ -f $TSC ]] && [[ "$(node "$TSC" --version 2>/dev/null)" == "Version $VERSION" ]]
}

if ! installed; then
  echo "bridge-typecheck: installing typescript@$VERSION into $PREFIX" >&2
  mkdir -p "$PREFIX"
  npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error "typescript@$VERSION" >&2
  installed || { echo "bridge-typecheck: $TSC is not version $VERSION after installing" >&2; exit 1; }
fi

node "$TSC" --noEmit --strict --exactOptionalPropertyTypes \
  --target es2022 --module es2022 --moduleResolution bundler --lib es2022,dom \
  --skipLibCheck false \
  packages/loop-plugin-ui/test/usage.ts packages/loop-plugin-ui/index.d.ts
echo "bridge-typecheck: index.d.ts and test/usage.ts check with typescript $VERSION"

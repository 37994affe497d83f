#!/usr/bin/env bash
# Headless Chromium for the browser tests (tests/e2e/browser.rs, driven by
# crates/testkit/src/browser.rs over the DevTools protocol): Debian's `chromium` package,
# installed with apt when /usr/bin/chromium is missing (root, as CI runs). Quiet when it is
# there already; prints the binary's path last either way, for LOOP_PLUGINS_CHROMIUM.
set -euo pipefail

BINARY=${LOOP_PLUGINS_CHROMIUM:-/usr/bin/chromium}

if [[ ! -x $BINARY ]]; then
  if [[ $BINARY != /usr/bin/chromium ]]; then
    echo "chromium: LOOP_PLUGINS_CHROMIUM=$BINARY is not an executable" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null; then
    echo "chromium: $BINARY is missing and there is no apt-get to install Debian's chromium" >&2
    exit 1
  fi
  sudo=()
  if [[ $(id -u) != 0 ]]; then
    sudo=(sudo)
  fi
  echo "chromium: installing Debian's chromium package" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq >&2
  "${sudo[@]}" apt-get install -y -qq chromium >&2
  [[ -x $BINARY ]] || { echo "chromium: $BINARY is missing after installing chromium" >&2; exit 1; }
fi
echo "$BINARY"

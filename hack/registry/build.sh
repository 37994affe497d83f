#!/usr/bin/env bash
# Builds the OCI registry (github.com/distribution/distribution/v3's cmd/registry, pinned in
# go.mod) statically with CGO off into a cache folder outside the repository and prints that
# folder as its last line; the binary is `registry` in it. Used by crates/oci's tests (a real
# registry on 127.0.0.1), the e2e suite, `make dev` and kind's local registry.
# The folder's name carries a hash of go.mod, go.sum, this script and the Go version, so a warm
# run finds it complete and does nothing.
# Regenerate go.mod for another release with:
#   rm go.mod go.sum; go mod init github.com/loop-plugins/loop-plugins/hack/registry
#   go get -tool github.com/distribution/distribution/v3/cmd/registry@vX.Y.Z; go mod tidy
set -euo pipefail
cd "$(dirname "$0")"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

DISTRIBUTION=$(sed -n 's/^\s*github\.com\/distribution\/distribution\/v3 \(v[0-9.]*\).*/\1/p' go.mod)
key=$( { cat go.mod go.sum build.sh; go version; } | sha256sum | cut -c1-16)
cache_root=${LOOP_PLUGINS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loop-plugins}
out="$cache_root/registry-${key}"

if [ -x "$out/registry" ]; then
  echo "registry: up to date (distribution ${DISTRIBUTION})" >&2
  echo "$out"
  exit 0
fi

mkdir -p "$out"
start=$SECONDS
echo "registry: building distribution ${DISTRIBUTION} cmd/registry" >&2
go build -trimpath \
  -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=${DISTRIBUTION}" \
  -o "$out/registry.tmp" github.com/distribution/distribution/v3/cmd/registry
mv "$out/registry.tmp" "$out/registry"
echo "registry: built in $((SECONDS - start))s" >&2
echo "$out"

#!/usr/bin/env bash
# Makes (or reuses) the local registry's image from the registry binary hack/registry/build.sh
# builds (distribution's Go module, static), and prints its name as the last line:
# loop-plugins.local/registry:<distribution version>-<key>. Nothing is pulled.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kind/lib.sh
source "$here/../lib.sh"
KIND_LOG_PREFIX=kind-registry
docker=${DOCKER:-docker}

bin=$("$here/../../registry/build.sh" | tail -n 1)
version=$(sed -n 's/^\s*github\.com\/distribution\/distribution\/v3 \(v[0-9.]*\).*/\1/p' "$here/../../registry/go.mod")
key=$(content_key --words "$(basename "$bin")" "$here/Dockerfile" "$here/config.yml" "$here/image.sh")
image=loop-plugins.local/registry:$version-$key
if "$docker" image inspect "$image" >/dev/null 2>&1; then
  say "up to date ($image)"
  echo "$image"
  exit 0
fi
"$docker" buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0
ctx=$(mktemp -d "${TMPDIR:-/tmp}/loop-plugins-registry.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
cp "$bin/registry" "$here/Dockerfile" "$here/config.yml" "$ctx/"
mkdir -p "$ctx/storage/var/lib/registry"
if ! "$docker" build -t "$image" "$ctx" >"$ctx/build.log" 2>&1; then
  tail -n 20 "$ctx/build.log" >&2
  die "building $image failed"
fi
say "built $image"
echo "$image"

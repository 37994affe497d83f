#!/usr/bin/env bash
# Builds our two images, loop-plugins and the echo plugin's, pushes them to a registry and
# prints each as <repository>@sha256:<digest> (the last two lines: ours, then the echo
# plugin's), since Plugin resources and the chart take images pinned by digest.
#
# Two ways, the same images:
#   prebuilt    (default) the binaries are built here, statically linked against glibc, or
#               taken from the cache of the same sources (hack/kind/static-bins.sh), then
#               Dockerfile.prebuilt assembles the images FROM scratch: no base image, no
#               pull, Docker's legacy builder is enough.
#   dockerfile  ./Dockerfile as it is (BuildKit, its Rust and distroless base images pulled).
#
# Usage: hack/kind/app-images.sh <registry> <tag>   e.g. localhost:5001 kind
# Environment: KIND_APP_IMAGES (prebuilt or dockerfile), DOCKER, CARGO_TARGET_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=hack/kind/lib.sh
source "$here/lib.sh"
KIND_LOG_PREFIX=kind-app-images
docker=${DOCKER:-docker}
registry=${1:?registry host:port}
tag=${2:?tag}
how=${KIND_APP_IMAGES:-prebuilt}

# The binaries and their packages (one place, for the workspace split).
APP_PACKAGE=loop-plugins
APP_BIN=loop-plugins
ECHO_PACKAGE=echo-plugin
ECHO_BIN=echo-plugin

image=$registry/loop-plugins
echo_image=$registry/loop-plugins-echo

case $how in
  dockerfile)
    start=$SECONDS
    (cd "$root" && "$docker" build -t "$image:$tag" . && "$docker" build --target echo-plugin -t "$echo_image:$tag" .) >&2
    say "built both images from ./Dockerfile in $((SECONDS - start))s"
    ;;
  prebuilt)
    # The static binaries, from static-bins.sh's cache when these sources built them before.
    bins=$("$here/static-bins.sh" | tail -n 1)
    app=$bins/$APP_BIN
    echo_bin=$bins/$ECHO_BIN
    ctx=$(mktemp -d "${TMPDIR:-/tmp}/loop-plugins-app-images.XXXXXX")
    trap 'rm -rf "$ctx"' EXIT
    cp "$app" "$ctx/loop-plugins"
    cp "$echo_bin" "$ctx/echo-plugin"
    strip "$ctx/loop-plugins" "$ctx/echo-plugin"
    mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/loop-plugin" "$ctx/data/data"
    chmod 1777 "$ctx/rootfs/tmp"
    printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
      'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$ctx/rootfs/etc/passwd"
    printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' >"$ctx/rootfs/etc/group"
    echo 'hosts: files dns' >"$ctx/rootfs/etc/nsswitch.conf"
    if [[ -s /etc/ssl/certs/ca-certificates.crt ]]; then
      cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/"
    else
      say "no /etc/ssl/certs/ca-certificates.crt here: the image has no CA certificates"
    fi
    cp "$root/examples/echo-plugin/plugin.json" "$ctx/loop-plugin/"
    cp -r "$root/examples/echo-plugin/ui" "$ctx/loop-plugin/ui"
    cp "$root/Dockerfile.prebuilt" "$ctx/Dockerfile"
    "$docker" buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0
    start=$SECONDS
    if ! { "$docker" build -t "$image:$tag" "$ctx" && "$docker" build --target echo-plugin -t "$echo_image:$tag" "$ctx"; } >"$ctx/build.log" 2>&1; then
      tail -n 20 "$ctx/build.log" >&2
      die "docker build -f Dockerfile.prebuilt failed"
    fi
    say "assembled both images with Dockerfile.prebuilt in $((SECONDS - start))s"
    ;;
  *) die "KIND_APP_IMAGES=$how: use prebuilt or dockerfile" ;;
esac

start=$SECONDS
for i in "$image" "$echo_image"; do
  "$docker" push -q "$i:$tag" >/dev/null || die "docker push $i:$tag failed"
done
pinned() { # repository → repository@sha256:<digest>, as the registry knows it
  "$docker" inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$1:$tag" |
    grep -m1 "^$1@sha256:" || die "no digest of $1 after the push"
}
image_pinned=$(pinned "$image")
echo_pinned=$(pinned "$echo_image")
say "pushed in $((SECONDS - start))s: $image_pinned, $echo_pinned"
echo "$image_pinned"
echo "$echo_pinned"

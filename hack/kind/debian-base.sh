#!/usr/bin/env bash
# Makes (or reuses) the Debian image the node image and the small Debian-based images start
# from, without pulling: `debootstrap --variant=minbase` of hack/kind/versions.sh's suite from
# the host's Debian mirror, imported into Docker. Prints the image's name as its last line.
#
# The rootfs tarball is cached under ~/.cache/loop-plugins/kind-debian-<key>/ (key: the suite,
# the mirror and this script), so a Docker engine without the image loads it again instead of
# bootstrapping. Environment: DEBIAN_MIRROR (default: the host's first deb.debian.org-style
# URI from /etc/apt, else http://deb.debian.org/debian), DOCKER.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kind/lib.sh
source "$here/lib.sh"
# shellcheck source=hack/kind/versions.sh
source "$here/versions.sh"
KIND_LOG_PREFIX=kind-debian
docker=${DOCKER:-docker}

host_mirror() {
  local uri
  uri=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list 2>/dev/null |
    grep -v security | sed -E 's/^URIs:\s*//; s/^deb (\[[^]]*\] )?//' | awk '{print $1}' | head -n 1)
  echo "${uri:-http://deb.debian.org/debian}"
}
mirror=${DEBIAN_MIRROR:-$(host_mirror)}
key=$(content_key --words "$DEBIAN_SUITE $mirror" "$here/debian-base.sh")
image=loop-plugins.local/debian:$DEBIAN_SUITE-$key
cache="$(kind_cache_root)/kind-debian-$key"

if "$docker" image inspect "$image" >/dev/null 2>&1; then
  say "up to date ($image)"
  echo "$image"
  exit 0
fi
if [[ ! -s $cache/rootfs.tar.gz ]]; then
  need_debian_packages "a Debian root filesystem for the images" debootstrap
  rootfs=$(mktemp -d "${TMPDIR:-/tmp}/loop-plugins-debootstrap.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  start=$SECONDS
  say "debootstrap --variant=minbase $DEBIAN_SUITE from $mirror"
  if ! debootstrap --variant=minbase "$DEBIAN_SUITE" "$rootfs" "$mirror" >"$rootfs.log" 2>&1; then
    tail -n 20 "$rootfs.log" >&2
    die "debootstrap failed (log: $rootfs.log)"
  fi
  rm -f "$rootfs.log"
  # As Debian's own container images are: no package lists or caches, apt told not to keep
  # downloads, and a sources list with the updates.
  printf 'deb %s %s main\ndeb %s %s-updates main\n' "$mirror" "$DEBIAN_SUITE" "$mirror" "$DEBIAN_SUITE" \
    >"$rootfs/etc/apt/sources.list"
  echo 'APT::Install-Recommends "false"; APT::Install-Suggests "false";' >"$rootfs/etc/apt/apt.conf.d/90-loop-plugins"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log
  mkdir -p "$cache"
  tar -C "$rootfs" --numeric-owner -czf "$cache/rootfs.tar.gz.tmp" .
  mv "$cache/rootfs.tar.gz.tmp" "$cache/rootfs.tar.gz"
  say "bootstrapped in $((SECONDS - start))s ($(du -h "$cache/rootfs.tar.gz" | cut -f1) compressed)"
fi
start=$SECONDS
"$docker" import --change 'CMD ["/bin/bash"]' "$cache/rootfs.tar.gz" "$image" >/dev/null
say "imported $image in $((SECONDS - start))s"
echo "$image"

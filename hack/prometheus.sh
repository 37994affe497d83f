#!/usr/bin/env bash
# Brings Debian's prometheus package (prometheus and promtool) into the cache, unpacked and
# never installed: nothing on the host changes. Prints the folder holding both binaries (the
# last line). The chart's alert rules are checked with this promtool (tests/chart.rs), and
# the alert test runs this prometheus.
#
# Environment: LOOP_PLUGINS_PROMETHEUS_DEB, a .deb to unpack instead of `apt-get download`.
set -euo pipefail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/loop-plugins
say() { echo "prometheus: $*" >&2; }

version=$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')
if [[ -n ${LOOP_PLUGINS_PROMETHEUS_DEB:-} ]]; then
  version=$(dpkg-deb -f "$LOOP_PLUGINS_PROMETHEUS_DEB" Version)
fi
[[ -n $version && $version != "(none)" ]] || {
  say "apt knows no prometheus package (apt-get update first?)"
  exit 1
}
dir=$cache/prometheus-${version//[^A-Za-z0-9.+-]/_}
if [[ -x $dir/usr/bin/promtool && -x $dir/usr/bin/prometheus ]]; then
  echo "$dir/usr/bin"
  exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/loop-plugins-prometheus.XXXXXX")
trap 'rm -rf "$work"' EXIT
deb=${LOOP_PLUGINS_PROMETHEUS_DEB:-}
if [[ -z $deb ]]; then
  say "downloading Debian's prometheus $version"
  # apt's sandbox user cannot write a root-owned temporary folder; the download is the same.
  chmod 755 "$work"
  (cd "$work" && apt-get download "prometheus=$version" >&2 2> >(grep -v 'unsandboxed' >&2))
  deb=$(ls "$work"/prometheus_*.deb)
fi
mkdir -p "$work/x"
dpkg-deb -x "$deb" "$work/x"
"$work/x/usr/bin/promtool" --version >/dev/null
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp/usr/bin"
cp "$work/x/usr/bin/promtool" "$work/x/usr/bin/prometheus" "$dir.tmp/usr/bin/"
rm -rf "$dir" && mv "$dir.tmp" "$dir"
say "promtool and prometheus $version in $dir/usr/bin"
echo "$dir/usr/bin"

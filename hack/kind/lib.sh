# Shared helpers of the hack/kind/ scripts (sourced): messages with timings, the cache root,
# content keys. No side effects when sourced.
# shellcheck shell=bash

# Where built things live, outside the clone: ~/.cache/loop-plugins/<thing>-<key>.
kind_cache_root() { echo "${LOOP_PLUGINS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loop-plugins}"; }

# `say what` on stderr, prefixed with the script's name (KIND_LOG_PREFIX).
say() { echo "${KIND_LOG_PREFIX:-kind}: $*" >&2; }
die() { say "error: $*"; exit 1; }

# 16 hex digits naming the content of the given files plus any extra words (versions, the Go
# version): a cache folder or image tag with this key is what these inputs build.
content_key() { # [--words "..."] file...
  local words=""
  if [[ ${1:-} == --words ]]; then words=$2; shift 2; fi
  { printf '%s\n' "$words"; for f in "$@"; do printf '== %s\n' "${f##*/}"; cat "$f"; done; } |
    sha256sum | cut -c1-16
}

# `timed name command...`: runs the command, then says how long it took.
timed() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  if ((status == 0)); then
    say "$name: $((SECONDS - start))s"
  else
    say "$name: failed after $((SECONDS - start))s"
  fi
  return "$status"
}

# `need_debian_packages why pkg...`: installs the Debian packages that are missing, saying so,
# when running as root on Debian; anywhere else, names them and stops.
need_debian_packages() {
  local why=$1 missing=() p
  shift
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [[ $(id -u) == 0 ]] && grep -qs '^ID=debian' /etc/os-release; then
    say "installing Debian packages ${missing[*]} ($why)"
    local log
    log=$(mktemp "${TMPDIR:-/tmp}/loop-plugins-apt.XXXXXX")
    if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; }; } >"$log" 2>&1; then
      tail -n 20 "$log" >&2
      die "apt-get install ${missing[*]} failed (log: $log)"
    fi
    rm -f "$log"
  else
    die "needs ${missing[*]} ($why): install them (Debian: apt-get install ${missing[*]})"
  fi
}

#!/usr/bin/env bash
# The static binaries a kind run's images carry, built once per content of what builds them:
#
#   loop-plugins   release for the suite (KIND_STATIC_PROFILE=release, the default),
#                  compiled incrementally: after a change in one crate CI's next run
#                  recompiles only what moved (measured: 31 s for a change in crates/server,
#                  against 164 s without, each time in the shared cargo folder); the
#                  profile that ships (dist, whole-program LTO) for the cold-start bench
#                  (kind-e2e.sh --bench sets KIND_STATIC_PROFILE=dist). The same sources: dist's
#                  single-unit LTO link alone took minutes of one core in every CI run, for a
#                  suite that tests what the code does, not how it was optimized
#   echo-plugin    release: the chart's example plugin image, and the suite's plugin images
#   quiz-plugin    release: the suite's plugin images
#
# Statically linked against glibc (RUSTFLAGS=-C target-feature=+crt-static, with --target so
# build scripts are left alone; checked with readelf), so images FROM scratch run them.
# They are kept in a cache folder outside the clone whose name is a key of every file that
# builds them (the workspace's tracked and untracked files but docs, hack/, tests and
# Markdown; this script; rustc's version; RUSTFLAGS): a fresh clone or a re-run of the same
# sources copies them instead of compiling and linking again (the dist link alone is minutes of
# one core). Prints the folder as its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=hack/kind/lib.sh
source "$here/lib.sh"
KIND_LOG_PREFIX=kind-static-bins
TARGET=x86_64-unknown-linux-gnu
flags="${RUSTFLAGS:-} -C target-feature=+crt-static"
profile=${KIND_STATIC_PROFILE:-release}
case $profile in release | dist) ;; *) die "KIND_STATIC_PROFILE is release or dist, not $profile" ;; esac

sources_key() {
  (cd "$root" && git ls-files -z --cached --others --exclude-standard -- . \
    ':!:docs/' ':!:hack/' ':(exclude,glob)**/tests/**' ':(exclude,glob)**/*.md' |
    sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16
}
key=$(content_key --words "$(rustc -vV) $flags $profile $(sources_key)" "$here/static-bins.sh")
out="$(kind_cache_root)/static-bins-$key"
bins=(loop-plugins echo-plugin quiz-plugin)

complete() { local b; for b in "${bins[@]}"; do [[ -x $out/$b ]] || return 1; done; }
if complete; then
  say "up to date ($out)"
  echo "$out"
  exit 0
fi

start=$SECONDS
# One cargo folder for every clone (cargo locks it while one builds): a fresh clone, or CI's
# next run, compiles only what changed instead of every dependency again for this target.
target_dir=${KIND_STATIC_TARGET_DIR:-$(kind_cache_root)/static-target}
(cd "$root" && export RUSTFLAGS="$flags" CARGO_TARGET_DIR="$target_dir" &&
  if [[ $profile == dist ]]; then
    cargo build --profile dist --locked --target "$TARGET" -p loop-plugins --bin loop-plugins &&
      cargo build --release --locked --target "$TARGET" -p echo-plugin --bin echo-plugin \
        -p quiz-plugin --bin quiz-plugin
  else
    export CARGO_INCREMENTAL=1
    cargo build --release --locked --target "$TARGET" -p loop-plugins --bin loop-plugins \
      -p echo-plugin --bin echo-plugin -p quiz-plugin --bin quiz-plugin
  fi) >&2
say "built ${bins[*]} (static, loop-plugins in $profile) in $((SECONDS - start))s"

mkdir -p "$(kind_cache_root)"
staging=$(mktemp -d "$(kind_cache_root)/.static-bins.XXXXXX")
trap 'rm -rf "$staging"' EXIT
cp "$target_dir/$TARGET/$profile/loop-plugins" "$staging/"
cp "$target_dir/$TARGET/release/echo-plugin" "$target_dir/$TARGET/release/quiz-plugin" "$staging/"
for b in "${bins[@]}"; do
  # Static: no program interpreter, no shared libraries.
  if readelf -lW "$staging/$b" | grep -q 'Requesting program interpreter' || readelf -dW "$staging/$b" | grep -q NEEDED; then
    die "$b is not statically linked: $(readelf -dW "$staging/$b" | grep NEEDED | tr -s ' ' | tr '\n' ';')"
  fi
done
"$staging/loop-plugins" --version >/dev/null
# Folders of other keys are builds of other sources: only the newest few stay.
rm -rf "$out"
mv "$staging" "$out"
trap - EXIT
ls -dt "$(kind_cache_root)"/static-bins-* 2>/dev/null | tail -n +4 | xargs -r rm -rf
echo "$out"

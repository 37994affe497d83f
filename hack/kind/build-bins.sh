#!/usr/bin/env bash
# Builds every program a kind node and its cluster's images hold, from the Go modules and
# sources hack/kind/versions.sh pins, into a cache folder outside the clone, and prints that
# folder as its last line:
#
#   kind                                      sigs.k8s.io/kind (the CLI)
#   containerd containerd-shim-runc-v2 ctr    github.com/containerd/containerd/v2
#   runc                                      github.com/opencontainers/runc (cgo, seccomp)
#   crictl                                    sigs.k8s.io/cri-tools
#   cni/{bridge,host-local,loopback,portmap,ptp}  github.com/containernetworking/plugins
#   coredns                                   github.com/coredns/coredns
#   local-path-provisioner                    github.com/rancher/local-path-provisioner
#   kube-router                               github.com/cloudnativelabs/kube-router/v2
#   kubelet kubeadm kube-proxy kube-scheduler k8s.io/kubernetes (hack/kind/node/go.mod)
#   pause                                     build/pause/linux/pause.c of k8s.io/kubernetes
#
# Third-party programs are built with `go install <package>@<version>`, so each builds
# against its own module's go.mod as released. Everything is static except nothing: cgo
# programs (runc, pause) are linked statically too, so the node's userland does not matter.
# Arguments: the programs to make sure of (default: all of them), e.g. `build-bins.sh kind`.
# The folder's name carries a key of the versions, this script, hack/kind/node/go.{mod,sum}
# and the Go version: a warm run finds it complete and does nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kind/lib.sh
source "$here/lib.sh"
# shellcheck source=hack/kind/versions.sh
source "$here/versions.sh"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
KIND_LOG_PREFIX=kind-bins

KUBERNETES=$(sed -n 's/^\s*k8s\.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/node/go.mod")
controlplane_kubernetes=$(sed -n 's/^\s*k8s\.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/../controlplane/go.mod")
[[ $KUBERNETES == "$controlplane_kubernetes" ]] ||
  die "hack/kind/node/go.mod has k8s.io/kubernetes $KUBERNETES, hack/controlplane $controlplane_kubernetes: run hack/kind/node/gen-go-mod.sh"

key=$(content_key --words "$(go version)" "$here/versions.sh" "$here/build-bins.sh" \
  "$here/node/go.mod" "$here/node/go.sum")
out="$(kind_cache_root)/kind-bin-$key"
programs=(kind containerd containerd-shim-runc-v2 ctr runc crictl cni/bridge cni/host-local
  cni/loopback cni/portmap cni/ptp coredns local-path-provisioner kube-router kubelet kubeadm
  kube-proxy kube-scheduler pause)
if (($#)); then
  for p in "$@"; do [[ " ${programs[*]} " == *" $p "* ]] || die "no program $p: one of ${programs[*]}"; done
  programs=("$@")
fi

missing=()
for p in "${programs[@]}"; do [[ -x $out/$p ]] || missing+=("$p"); done
if ((${#missing[@]} == 0)); then
  say "up to date ($out)"
  echo "$out"
  exit 0
fi
say "building into $out: ${missing[*]}"
mkdir -p "$out/cni"
staging="$out/.gobin"
rm -rf "$staging"

# `install_go dest-dir ldflags tags cgo package@version...`: go install into a staging
# folder, then moves each program into dest-dir (so a half-built program is never there).
install_go() {
  local dest=$1 ldflags=$2 tags=$3 cgo=$4 start=$SECONDS
  shift 4
  mkdir -p "$staging"
  say "go install $* (cgo=$cgo${tags:+, tags $tags})"
  CGO_ENABLED=$cgo GOBIN=$staging go install -trimpath ${tags:+-tags "$tags"} \
    -ldflags "-s -w $ldflags" "$@"
  mv "$staging"/* "$dest/"
  say "built $(printf '%s ' "${@##*/}")in $((SECONDS - start))s"
}
want() { # any of the named programs asked for and missing?
  local p
  for p in "$@"; do
    [[ " ${programs[*]} " == *" $p "* && ! -x $out/$p ]] && return 0
  done
  return 1
}

total=$SECONDS
if want kind; then
  install_go "$out" "" "" 0 "$KIND_MODULE@$KIND_VERSION"
fi
if want containerd containerd-shim-runc-v2 ctr; then
  c=github.com/containerd/containerd/v2
  install_go "$out" "-X $c/version.Version=$CONTAINERD_VERSION -X $c/version.Package=$c" \
    "no_aufs no_zfs no_btrfs no_devmapper" 0 \
    "$c/cmd/containerd@$CONTAINERD_VERSION" "$c/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "$c/cmd/ctr@$CONTAINERD_VERSION"
fi
if want runc; then
  need_debian_packages "runc's seccomp support" libseccomp-dev pkg-config gcc libc6-dev
  install_go "$out" "-X main.version=${RUNC_VERSION#v} -extldflags -static" "seccomp netgo osusergo" 1 \
    "github.com/opencontainers/runc@$RUNC_VERSION"
fi
if want crictl; then
  install_go "$out" "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION" "" 0 \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRI_TOOLS_VERSION"
fi
if want cni/bridge cni/host-local cni/loopback cni/portmap cni/ptp; then
  p=github.com/containernetworking/plugins/plugins
  install_go "$out/cni" "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" "" 0 \
    "$p/main/bridge@$CNI_PLUGINS_VERSION" "$p/ipam/host-local@$CNI_PLUGINS_VERSION" \
    "$p/main/loopback@$CNI_PLUGINS_VERSION" "$p/meta/portmap@$CNI_PLUGINS_VERSION" \
    "$p/main/ptp@$CNI_PLUGINS_VERSION"
fi
if want coredns; then
  install_go "$out" "" "" 0 "github.com/coredns/coredns@$COREDNS_VERSION"
fi
if want local-path-provisioner; then
  install_go "$out" "-X main.VERSION=$LOCAL_PATH_VERSION" "" 0 \
    "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION"
fi
if want kube-router; then
  r=github.com/cloudnativelabs/kube-router/v2
  install_go "$out" "-X $r/pkg/version.Version=$KUBE_ROUTER_VERSION" "" 0 \
    "$r/cmd/kube-router@$KUBE_ROUTER_VERSION"
fi

# Kubernetes, as hack/controlplane/build.sh stamps it (kubeadm picks image tags and checks the
# kubelet by these versions).
minor=${KUBERNETES#v1.}
minor=${minor%%.*}
kver=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kver+=" -X ${pkg}.gitVersion=${KUBERNETES} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
  kver+=" -X ${pkg}.gitTreeState=clean"
done
for cmd in kubelet kubeadm kube-proxy kube-scheduler; do
  want "$cmd" || continue
  start=$SECONDS
  say "go build k8s.io/kubernetes/cmd/$cmd@$KUBERNETES"
  (cd "$here/node" && CGO_ENABLED=0 GOFLAGS="$GOFLAGS -mod=readonly" go build -trimpath \
    -ldflags "-s -w $kver" -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$out/$cmd.tmp" "$out/$cmd"
  say "built $cmd in $((SECONDS - start))s"
done

if want pause; then
  need_debian_packages "the pause binary" gcc libc6-dev
  src=$(cd "$here/node" && go list -mod=readonly -m -f '{{.Dir}}' k8s.io/kubernetes)
  gcc -Os -Wall -Werror -static -DVERSION="v${PAUSE_VERSION}-loop-plugins" \
    -o "$out/pause.tmp" "$src/build/pause/linux/pause.c"
  strip "$out/pause.tmp"
  mv "$out/pause.tmp" "$out/pause"
  say "built pause"
fi
rm -rf "$staging"
# Folders of other keys are stale builds of the same programs.
for old in "$(kind_cache_root)"/kind-bin-*; do
  [[ $old == "$out" || ! -d $old ]] || rm -rf "$old"
done
say "all built in $((SECONDS - total))s"
echo "$out"

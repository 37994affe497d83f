#!/usr/bin/env bash
# Builds the pinned upstream binaries (kube-apiserver, kube-controller-manager, kubectl, etcd,
# helm) into a cache folder outside the repository and prints that folder as its last line.
# The folder's name carries a hash of go.mod, go.sum, this script and the Go version, so a
# warm run finds it complete and does nothing; CI runs on the same machine reuse it.
set -euo pipefail
cd "$(dirname "$0")"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

KUBERNETES=$(sed -n 's/^\s*k8s\.io\/kubernetes \(v[0-9.]*\).*/\1/p' go.mod)
ETCD=$(sed -n 's/^\s*go\.etcd\.io\/etcd\/server\/v3 \(v[0-9.]*\).*/\1/p' go.mod)
HELM=$(sed -n 's/^\s*helm\.sh\/helm\/v4 \(v[0-9.]*\).*/\1/p' go.mod)

key=$( { cat go.mod go.sum build.sh; go version; } | sha256sum | cut -c1-16)
cache_root=${LOOP_PLUGINS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loop-plugins}
out="$cache_root/controlplane/${KUBERNETES}-${key}"
bins=(kube-apiserver kube-controller-manager kubectl etcd helm)

complete=1
for b in "${bins[@]}"; do [ -x "$out/$b" ] || complete=0; done
if [ "$complete" = 1 ]; then
  echo "controlplane: up to date (kubernetes ${KUBERNETES}, etcd ${ETCD}, helm ${HELM})" >&2
  echo "$out"
  exit 0
fi

mkdir -p "$out"
minor=${KUBERNETES#v1.}; minor=${minor%%.*}
build_date=$(date -u -d "@$(stat -c %Y go.sum)" +%Y-%m-%dT%H:%M:%SZ)
kver=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kver+=" -X ${pkg}.gitVersion=${KUBERNETES} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
  kver+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${build_date}"
done

build() { # name package ldflags
  local name=$1 pkg=$2 flags=$3 start=$SECONDS
  echo "controlplane: building ${name} from ${pkg}" >&2
  go build -trimpath -ldflags "-s -w ${flags}" -o "$out/${name}.tmp" "$pkg"
  mv "$out/${name}.tmp" "$out/${name}"
  echo "controlplane: ${name} built in $((SECONDS - start))s" >&2
}

total=$SECONDS
build etcd go.etcd.io/etcd/server/v3 ""
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kver"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kver"
build kubectl k8s.io/kubernetes/cmd/kubectl "$kver"
build helm helm.sh/helm/v4/cmd/helm "-X helm.sh/helm/v4/internal/version.version=${HELM} -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
echo "controlplane: all built in $((SECONDS - total))s" >&2
echo "$out"

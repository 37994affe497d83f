#!/usr/bin/env bash
# Makes (or reuses) the kind node image for the pinned Kubernetes with nothing pulled, and
# prints its name as the last line. `kind build node-image` cannot do this offline (it fetches
# every image but Kubernetes' own with `ctr content fetch`), so this does what it does from
# local parts:
#
#   1. the images the cluster needs, as kubeadm and the node's manifests name them:
#      kube-apiserver, kube-controller-manager, kube-scheduler, etcd, CoreDNS and pause on an
#      empty image (images/scratch-bin, coredns, pause); kube-proxy and kube-router (the CNI
#      and NetworkPolicy engine) on the Debian base with iptables (images/netbin); the
#      local-path provisioner, and its helper (the Debian base: sh, mkdir, rm);
#   2. the node's manifests: /kind/manifests/default-cni.yaml is kube-router's own
#      daemonset/generic-kuberouter.yaml (router and firewall, kube-proxy stays), and
#      default-storage.yaml is kind's local-path manifest (pkg/build/nodeimage), both taken
#      from their modules with the image names pointed at the local ones;
#   3. node/Dockerfile: kind's base image (its images/base/files, the same Debian packages)
#      with containerd, runc, crictl, the CNI plugins, kubelet, kubeadm and kubectl, the
#      images imported into containerd, and node/entrypoint.sh in front of kind's entrypoint.
#
# Arguments: the folders hack/kind/build-bins.sh and hack/controlplane/build.sh printed, and
# the image hack/kind/debian-base.sh printed. The image is tagged
# loop-plugins.local/kind-node:<kubernetes>-<key> (key: those inputs and every file this
# uses) and saved to ~/.cache/loop-plugins/kind-node-<key>/node.tar, so a Docker engine
# without it loads it instead of building (KIND_SAVE_NODE_IMAGE=0 skips the save). A new build
# removes the node images and tarballs of other keys.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kind/lib.sh
source "$here/lib.sh"
# shellcheck source=hack/kind/versions.sh
source "$here/versions.sh"
KIND_LOG_PREFIX=kind-node-image
docker=${DOCKER:-docker}
bins=${1:?the folder hack/kind/build-bins.sh printed}
controlplane=${2:?the folder hack/controlplane/build.sh printed}
base=${3:?the image hack/kind/debian-base.sh printed}

KUBERNETES=$(sed -n 's/^\s*k8s\.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/node/go.mod")
key=$(content_key --words "$(basename "$bins") $(basename "$controlplane") $base" \
  "$here/versions.sh" "$here/node-image.sh" "$here/node/Dockerfile" "$here/node/entrypoint.sh" \
  "$here"/images/*)
image=loop-plugins.local/kind-node:$KUBERNETES-$key
cache="$(kind_cache_root)/kind-node-$key"

if "$docker" image inspect "$image" >/dev/null 2>&1; then
  say "up to date ($image)"
  echo "$image"
  exit 0
fi
if [[ -s $cache/node.tar ]]; then
  start=$SECONDS
  "$docker" load -i "$cache/node.tar" >/dev/null
  say "loaded $image from $cache/node.tar in $((SECONDS - start))s"
  echo "$image"
  exit 0
fi

# The legacy builder where BuildKit's CLI part (buildx) is missing, as with Debian's docker.io.
"$docker" buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0
work=$(mktemp -d "${TMPDIR:-/tmp}/loop-plugins-node-image.XXXXXX")
built=()
cleanup() {
  rm -rf "$work"
  # The component images live on inside the node image; their tags would only name images a
  # real registry serves (registry.k8s.io/...) with local stand-ins.
  if ((${#built[@]})); then "$docker" rmi "${built[@]}" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# `build_image name [docker build options...] -- context`: builds quietly; on failure shows the
# end of the build's output.
build_image() {
  local name=$1 opts=() log
  shift
  while (($#)) && [[ $1 != -- ]]; do opts+=("$1"); shift; done
  log="$work/build-${name//[^a-zA-Z0-9.-]/_}.log"
  if ! "$docker" build --network host "${opts[@]}" -t "$name" "$2" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "building $name failed"
  fi
}

# `component name dockerfile [build-arg...] -- file...`: builds one image from a context that
# holds only the named files.
component() {
  local name=$1 dockerfile=$2 ctx args=() f
  shift 2
  while (($#)) && [[ $1 != -- ]]; do args+=(--build-arg "$1"); shift; done
  shift
  ctx=$(mktemp -d "$work/ctx.XXXXXX")
  for f in "$@"; do cp "$f" "$ctx/"; done
  cp "$here/images/$dockerfile" "$ctx/Dockerfile"
  build_image "$name" "${args[@]}" -- "$ctx"
  built+=("$name")
}

start=$SECONDS
k8s=registry.k8s.io
for b in kube-apiserver kube-controller-manager; do
  component "$k8s/$b:$KUBERNETES" scratch-bin.Dockerfile BIN=$b -- "$controlplane/$b"
done
component "$k8s/kube-scheduler:$KUBERNETES" scratch-bin.Dockerfile BIN=kube-scheduler -- "$bins/kube-scheduler"
component "$k8s/etcd:$ETCD_IMAGE_TAG" scratch-bin.Dockerfile BIN=etcd -- "$controlplane/etcd"
component "$k8s/coredns/coredns:$COREDNS_VERSION" coredns.Dockerfile -- "$bins/coredns"
component "$k8s/pause:$PAUSE_VERSION" pause.Dockerfile -- "$bins/pause"
"$docker" tag "$k8s/pause:$PAUSE_VERSION" "$k8s/pause:$PAUSE_SANDBOX_TAG"
built+=("$k8s/pause:$PAUSE_SANDBOX_TAG")
component "$k8s/kube-proxy:$KUBERNETES" netbin.Dockerfile BASE="$base" BIN=kube-proxy -- \
  "$bins/kube-proxy" "$here/images/iptables-mode.sh"
router_image=loop-plugins.local/kube-router:$KUBE_ROUTER_VERSION
component "$router_image" netbin.Dockerfile BASE="$base" BIN=kube-router -- \
  "$bins/kube-router" "$here/images/iptables-mode.sh"
provisioner_image=loop-plugins.local/local-path-provisioner:$LOCAL_PATH_VERSION
component "$provisioner_image" scratch-bin.Dockerfile BIN=local-path-provisioner -- "$bins/local-path-provisioner"
helper_image=loop-plugins.local/local-path-helper:$DEBIAN_SUITE
"$docker" tag "$base" "$helper_image"
built+=("$helper_image")
say "cluster images built in $((SECONDS - start))s"

ctx=$work/node
mkdir -p "$ctx"/{bin,sbin,cni,kube,manifests}
kind_src=$(GOFLAGS=-mod=mod go mod download -json "$KIND_MODULE@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
router_src=$(GOFLAGS=-mod=mod go mod download -json "github.com/cloudnativelabs/kube-router/v2@$KUBE_ROUTER_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[[ -d $kind_src/images/base/files && -d $router_src/daemonset ]] || die "kind or kube-router sources not found in the module cache"
cp -r "$kind_src/images/base/files" "$ctx/files"
chmod -R u+w "$ctx/files"
cp "$bins"/{containerd,containerd-shim-runc-v2,ctr,crictl} "$ctx/bin/"
cp "$here/node/entrypoint.sh" "$ctx/bin/loop-plugins-node-entrypoint"
cp "$bins/runc" "$ctx/sbin/"
cp "$bins"/cni/* "$ctx/cni/"
cp "$bins"/{kubelet,kubeadm} "$controlplane/kubectl" "$ctx/kube/"
cp "$here/node/Dockerfile" "$ctx/Dockerfile"

# kube-router's manifest: the local image, never pulled; kindnetd's requests (100m, 50Mi)
# instead of 250m and 250Mi, so that on 2 cores each worker keeps room for plugin pods.
sed -e "s#image: docker.io/cloudnativelabs/kube-router.*#image: $router_image#" \
  -e 's#imagePullPolicy: Always#imagePullPolicy: IfNotPresent#' \
  -e 's#cpu: 250m#cpu: 100m#' -e 's#memory: 250Mi#memory: 50Mi#' \
  "$router_src/daemonset/generic-kuberouter.yaml" >"$ctx/manifests/default-cni.yaml"
grep -q "image: $router_image" "$ctx/manifests/default-cni.yaml" || die "kube-router's manifest names no image to replace"
grep -q "cpu: 100m" "$ctx/manifests/default-cni.yaml" || die "kube-router's manifest has no cpu request to lower"
# kind's storage manifest is a Go string with the image names spliced in.
awk '/^const defaultStorageManifest = `/{on=1; next} on && /^`/{exit} on' \
  "$kind_src/pkg/build/nodeimage/const_storage.go" |
  sed -e "s#\` + storageProvisionerImage + \`#$provisioner_image#" \
    -e "s#\` + storageHelperImage + \`#$helper_image#" >"$ctx/manifests/default-storage.yaml"
grep -q "image: $provisioner_image" "$ctx/manifests/default-storage.yaml" || die "kind's storage manifest was not found in const_storage.go"
! grep -q '` +' "$ctx/manifests/default-storage.yaml" || die "kind's storage manifest has a Go expression left"

start=$SECONDS
"$docker" save -o "$ctx/images.tar" "${built[@]}"
say "saved the cluster images ($(du -h "$ctx/images.tar" | cut -f1)) in $((SECONDS - start))s"
start=$SECONDS
build_image "$image" --build-arg BASE="$base" --build-arg KUBERNETES="$KUBERNETES" -- "$ctx"
# The import stage holds the images' tarball: gigabytes no image needs once the node is built.
"$docker" image prune -f --filter label=dev.loop-plugins.stage=kind-node-images >/dev/null || true
say "built $image in $((SECONDS - start))s"
if [[ ${KIND_SAVE_NODE_IMAGE:-1} == 1 ]]; then
  start=$SECONDS
  mkdir -p "$cache"
  "$docker" save -o "$cache/node.tar.tmp" "$image"
  mv "$cache/node.tar.tmp" "$cache/node.tar"
  say "saved to $cache/node.tar ($(du -h "$cache/node.tar" | cut -f1)) in $((SECONDS - start))s"
fi
# Node images of other keys are 1.6 GB each, in Docker and in the cache: only this one stays.
for old in $("$docker" images --format '{{.Repository}}:{{.Tag}}' loop-plugins.local/kind-node); do
  [[ $old == "$image" ]] || "$docker" rmi "$old" >/dev/null 2>&1 || true
done
for old in "$(kind_cache_root)"/kind-node-*; do
  [[ $old == "$cache" || ! -d $old ]] || rm -rf "$old"
done
echo "$image"

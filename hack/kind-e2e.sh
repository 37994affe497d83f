#!/usr/bin/env bash
# `make kind-e2e`: the e2e suite against a kind cluster with the chart installed, on a machine
# with Docker and kind (v0.24 or later). The suite's side of it is LOOP_PLUGINS_E2E_CLUSTER=kind
# (tests/e2e/support/target.rs); this script makes the cluster it expects:
#
#   1. the local registry of kind's docs (https://kind.sigs.k8s.io/docs/user/local-registry/):
#      a registry:2 container `kind-registry` published on 127.0.0.1:5001, started or reused;
#   2. the kind cluster of kind-config.yaml, created or reused (kept after the run;
#      `kind delete cluster --name loop-plugins` removes it), with containerd on each node told
#      that localhost:5001 is the registry container, the registry on the `kind` network, and
#      the `local-registry-hosting` ConfigMap that documents it;
#   3. our image (the Dockerfile's default target) and the echo plugin's (`--target
#      echo-plugin`) built, pushed to localhost:5001 and named by the digests the push gave;
#   4. the chart installed with the built helm: that image by digest, one replica (the breaker
#      test needs one API replica's breaker), no HostConfig (the tests own it), and the API
#      Service on node port 30080, which kind-config.yaml maps to the host's 127.0.0.1:30080;
#   5. `cargo test --test e2e -- "$@"` against it.
#
# Environment (all optional): KIND, DOCKER (the programs), KIND_CLUSTER (loop-plugins),
# KIND_KUBECONFIG (.dev/kind.kubeconfig), KIND_REGISTRY_IMAGE (registry:2),
# LOOP_PLUGINS_E2E_RELEASE and LOOP_PLUGINS_E2E_RELEASE_NAMESPACE (both loop-plugins).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/loop-plugins/target}

KIND=${KIND:-kind}
DOCKER=${DOCKER:-docker}
cluster=${KIND_CLUSTER:-loop-plugins}
kubeconfig=${KIND_KUBECONFIG:-$PWD/.dev/kind.kubeconfig}
release=${LOOP_PLUGINS_E2E_RELEASE:-loop-plugins}
namespace=${LOOP_PLUGINS_E2E_RELEASE_NAMESPACE:-loop-plugins}
# The registry as kind's docs make it; the name and port are what the nodes' hosts.toml and
# every image reference below use.
reg_name=kind-registry
reg_port=5001
reg_image=${KIND_REGISTRY_IMAGE:-registry:2}
registry=localhost:$reg_port
# kind-config.yaml's extraPortMappings: node port 30080 is the host's 127.0.0.1:30080.
node_port=30080
api_url=http://127.0.0.1:$node_port
tag=kind

say() { echo "kind-e2e: $*" >&2; }
die() { say "$*"; exit 1; }
started=$SECONDS
elapsed() { echo "$((SECONDS - started))s"; }

command -v "$DOCKER" >/dev/null ||
  die "needs Docker (https://docs.docker.com/engine/install/); without it, run make e2e-existing"
"$DOCKER" info >/dev/null 2>&1 ||
  die "$DOCKER is installed but its engine does not answer ($DOCKER info fails): start Docker"
command -v "$KIND" >/dev/null ||
  die "needs kind v0.24 or later (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)"
command -v curl >/dev/null || die "needs curl (to wait for the API)"
# `command`: when DOCKER=docker, "$DOCKER" would otherwise name this function again.
docker() { command "$DOCKER" "$@"; }
kind() { command "$KIND" "$@"; }

bin=$(hack/controlplane/build.sh | tail -n 1)
export LOOP_PLUGINS_CONTROLPLANE=$bin
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
helm() { "$bin/helm" --kubeconfig "$kubeconfig" "$@"; }
# The suite first: a compile error shows before minutes of image builds.
cargo test --test e2e --no-run

# 1. The registry, unless it runs already.
case "$(docker inspect -f '{{.State.Running}}' "$reg_name" 2>/dev/null || echo missing)" in
  true) ;;
  false) docker start "$reg_name" >/dev/null ;;
  *)
    docker run -d --restart=always -p "127.0.0.1:$reg_port:5000" --network bridge \
      --name "$reg_name" "$reg_image" >/dev/null
    ;;
esac

# 2. The cluster, unless it exists (kind-config.yaml carries the containerd registry patch and
# the port mapping; a cluster made from an older kind-config.yaml has neither).
mkdir -p "$(dirname "$kubeconfig")"
if ! kind get clusters | grep -qx "$cluster"; then
  kind create cluster --name "$cluster" --config kind-config.yaml --kubeconfig "$kubeconfig" --wait 5m
fi
kind export kubeconfig --name "$cluster" --kubeconfig "$kubeconfig"
mapped=$(docker port "$cluster-control-plane" "$node_port/tcp" 2>/dev/null || true)
grep -qx "127.0.0.1:$node_port" <<<"$mapped" ||
  die "cluster $cluster does not map 127.0.0.1:$node_port to its node port $node_port (made from an older kind-config.yaml?): kind delete cluster --name $cluster, then run again"

# Each node's containerd sends localhost:5001 to the registry container: localhost in a node
# is the node's own, so the same name works for `docker push` here and pulls there.
registry_dir=/etc/containerd/certs.d/$registry
for node in $(kind get nodes --name "$cluster"); do
  docker exec "$node" mkdir -p "$registry_dir"
  printf '[host."http://%s:5000"]\n' "$reg_name" |
    docker exec -i "$node" cp /dev/stdin "$registry_dir/hosts.toml"
done
# On the `kind` network, so nodes reach it by name.
if [[ $(docker inspect -f '{{json .NetworkSettings.Networks.kind}}' "$reg_name") == null ]]; then
  docker network connect kind "$reg_name"
fi
# The local registry, documented where tools look for it (KEP-1755).
kubectl apply --server-side -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-registry-hosting
  namespace: kube-public
data:
  localRegistryHosting.v1: |
    host: "$registry"
    help: "https://kind.sigs.k8s.io/docs/user/local-registry/"
EOF
say "cluster $cluster and registry $registry ready ($(elapsed))"

# 3. The images, pushed and named by digest (Plugin resources refuse unpinned images, and the
# chart's CronJobs and gate run the same image as its Deployment).
image=$registry/loop-plugins
echo_image=$registry/loop-plugins-echo
docker build -t "$image:$tag" .
docker build --target echo-plugin -t "$echo_image:$tag" .
docker push "$image:$tag"
docker push "$echo_image:$tag"
pinned() { # repository → repository@sha256:<digest>, as the registry knows it
  local digests
  digests=$(docker inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$1:$tag")
  grep -m1 "^$1@sha256:" <<<"$digests" || die "no digest of $1 after the push"
}
image_pinned=$(pinned "$image")
echo_pinned=$(pinned "$echo_image")
say "pushed $image_pinned and $echo_pinned ($(elapsed))"

# 4. The release namespace (deploy/namespace.yaml: restricted Pod Security), then the chart.
if [[ $namespace == loop-plugins ]]; then
  kubectl apply --server-side -f deploy/namespace.yaml >/dev/null
else
  kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
  kubectl label --overwrite namespace "$namespace" \
    app.kubernetes.io/part-of=loop-plugins pod-security.kubernetes.io/enforce=restricted >/dev/null
fi
helm upgrade --install "$release" charts/loop-plugins --namespace "$namespace" \
  --set image.repository="$image" --set image.digest="${image_pinned#*@}" \
  --set replicas=1 --set hostConfig.create=false \
  --set service.type=NodePort --set service.nodePort="$node_port" \
  --wait --timeout 5m
# kube-proxy may take a moment after the Service.
deadline=$((SECONDS + 60))
until curl -fsS --max-time 3 "$api_url/healthz" >/dev/null 2>&1; do
  ((SECONDS < deadline)) || die "$api_url/healthz does not answer (the chart's Service on node port $node_port)"
  sleep 1
done
say "chart installed; the API answers at $api_url ($(elapsed))"

# 5. The suite, against this cluster.
export KUBECONFIG=$kubeconfig
export LOOP_PLUGINS_E2E_CLUSTER=kind
export LOOP_PLUGINS_E2E_RELEASE=$release LOOP_PLUGINS_E2E_RELEASE_NAMESPACE=$namespace
export LOOP_PLUGINS_E2E_ECHO_IMAGE=$echo_pinned
export LOOP_PLUGINS_E2E_API_URL=$api_url
cargo test --test e2e -- "$@"
say "done ($(elapsed))"

#!/usr/bin/env bash
# `make kind-e2e`: the e2e suite against a kind cluster with the chart installed, from a fresh
# machine: nothing needs to be installed first but Go, Rust and (on Debian, as root) apt.
# Where no image can be pulled (here), every image is built locally from Go modules and Debian
# packages; on a machine with internet the same steps take kind's default node image and
# registry:2 instead (KIND_OFFLINE). Phases, each timed (a table at the end):
#
#   engine        a Docker engine that answers: the running one, or dockerd started (Debian's
#                 docker.io installed first when missing; root on Debian only); stopped again
#                 at the end when this run started it
#   controlplane  hack/controlplane/build.sh: kubectl, helm, kube-apiserver, etcd, ...
#   e2e build     the suite and the binaries it runs compiled first, so a compile error shows
#                 before the image builds
#   kind          hack/kind/build-bins.sh: kind from its Go module (offline: every program of
#                 the node too, see that script)
#   node image    offline: hack/kind/debian-base.sh and hack/kind/node-image.sh, cached under
#                 ~/.cache/loop-plugins/kind-* and in Docker; online: kind's default node image
#   cluster       kind-config.yaml's cluster (1 control plane, 2 workers, node port 30080 on
#                 127.0.0.1:30080); where the host cannot grant --privileged, kind runs through
#                 hack/kind/docker-privileged.sh. A cluster of that name is reused only when a
#                 run kept it (KEEP_CLUSTER=1 writes ~/.cache/loop-plugins/kind-kept/<name>); one
#                 left by a run killed before its cleanup is deleted and made anew
#   registry      the local registry `kind-registry` on the `kind` network and 127.0.0.1:5001
#                 (offline: distribution's registry built by hack/registry/build.sh, in an
#                 image of its own; online: registry:2), each node's containerd sending
#                 localhost:5001 to it
#   images        hack/kind/app-images.sh: our image and the echo plugin's, pushed there and
#                 named by digest
#   chart         charts/loop-plugins with the built helm: two replicas (spread over the
#                 workers), the API Service on node port 30080 with ClientIP session affinity
#                 (the suite's calls reach one replica, whose breaker the breaker test counts),
#                 no HostConfig (the tests own it)
#   e2e           cargo test --test e2e -- "$@" with LOOP_PLUGINS_E2E_CLUSTER=kind
#   cleanup       unless KEEP_CLUSTER=1: the cluster, the registry, the `kind` network and new
#                 volumes removed (only what this run made); the engine stopped if this run
#                 started it; the host-wide sysctls the kubelets set put back; /lib/modules
#                 removed if Docker made it for kind
#
# Usage: hack/kind-e2e.sh [--dev | --bench] [-- e2e arguments...]
#   --dev   (make dev CLUSTER=kind) instead of the suite: the chart with its HostConfig off,
#           examples/ applied with the echo plugin's pinned image, then wait until Ctrl-C
#   --bench (make bench-kind) instead of the suite: the cold-start bench
#           (crates/bench/benches/cold_start.rs) against the release, its figures printed
# Environment (all optional):
#   KIND_OFFLINE          auto (default: offline unless registry-1.docker.io answers), 1 or 0
#   KIND_NODE_IMAGE       the node image to use (default: built offline, kind's own online)
#   KIND_REGISTRY_IMAGE   the registry's image (default: built offline, registry:2 online)
#   KIND_APP_IMAGES       prebuilt or dockerfile (hack/kind/app-images.sh; default: dockerfile
#                         online when BuildKit's buildx is there, else prebuilt)
#   KIND_STATIC_PROFILE   release (default) or dist: the profile our image's binary is built
#                         with (--bench: dist, as it ships); hack/kind/static-bins.sh
#   KEEP_CLUSTER=1        keep the cluster, the registry and the engine after the run
#   KIND_LOG_LEVEL        the release's log filter (default: our crates at debug, so that
#                         the logs kept after a failure show what the replicas did)
#   KIND_CLUSTER (loop-plugins), KIND_KUBECONFIG (.dev/kind.kubeconfig),
#   LOOP_PLUGINS_E2E_RELEASE, LOOP_PLUGINS_E2E_RELEASE_NAMESPACE (both loop-plugins), DOCKER
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export GOTOOLCHAIN=local
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(hack/target-dir.sh)}
# shellcheck source=hack/kind/lib.sh
source hack/kind/lib.sh
# shellcheck source=hack/kind/host.sh
source hack/kind/host.sh
# shellcheck source=hack/kind/versions.sh
source hack/kind/versions.sh
KIND_LOG_PREFIX=kind-e2e

dev=0
bench=0
case ${1:-} in
  --dev) dev=1 && shift ;;
  --bench) bench=1 && shift ;;
esac
[[ ${1:-} == -- ]] && shift
# The bench measures our image as it ships (dist); the suite takes the release build of the
# same sources (hack/kind/static-bins.sh).
((bench)) && export KIND_STATIC_PROFILE=${KIND_STATIC_PROFILE:-dist}

DOCKER=${DOCKER:-docker}
export DOCKER
cluster=${KIND_CLUSTER:-loop-plugins}
kubeconfig=${KIND_KUBECONFIG:-$root/.dev/kind.kubeconfig}
release=${LOOP_PLUGINS_E2E_RELEASE:-loop-plugins}
namespace=${LOOP_PLUGINS_E2E_RELEASE_NAMESPACE:-loop-plugins}
keep=${KEEP_CLUSTER:-0}
# Written when KEEP_CLUSTER=1 keeps the cluster: only a cluster kept on purpose is reused.
kept_marker=$(kind_cache_root)/kind-kept/$cluster
# The registry as kind's docs make it: the name and port the nodes' hosts.toml and every image
# reference use; localhost:5001 works for `docker push` here and, through hosts.toml, in nodes.
reg_name=kind-registry
reg_port=5001
registry=localhost:$reg_port
# kind-config.yaml's extraPortMappings: node port 30080 is the host's 127.0.0.1:30080.
node_port=30080
api_url=http://127.0.0.1:$node_port
tag=kind

KIND_HOST_STATE=$(mktemp -d "${TMPDIR:-/tmp}/loop-plugins-kind.XXXXXX")
export KIND_HOST_STATE
docker() { command "$DOCKER" "$@"; }

# --- phases, timed -------------------------------------------------------------------------
phases=()
started=$SECONDS
current="" current_start=0
phase() { # name function args... (a failure ends the run: set -e; finish names the phase)
  current=$1 current_start=$SECONDS
  shift
  say "==> $current"
  "$@"
  phases+=("$(printf '%-14s %5ss' "$current" "$((SECONDS - current_start))")")
  current=""
}
report() {
  say "phase times (total $((SECONDS - started))s):"
  printf '    %s\n' "${phases[@]}" >&2
}

# --- cleanup: only what this run made ------------------------------------------------------
made_cluster=0 made_registry=0 made_network=0
volumes_before=""
finish() {
  local status=$?
  trap - EXIT INT TERM
  local job
  for job in $(jobs -p); do kill "$job" 2>/dev/null || true; done
  [[ -n $current ]] && phases+=("$(printf '%-14s %5ss  FAILED' "$current" "$((SECONDS - current_start))")")
  local start=$SECONDS
  if [[ $keep == 1 ]]; then
    mkdir -p "$(dirname "$kept_marker")" && date -u +%FT%TZ >"$kept_marker"
    say "KEEP_CLUSTER=1: cluster $cluster, registry $reg_name and the engine stay; KUBECONFIG=$kubeconfig"
    say "  remove them with: kind delete cluster --name $cluster; docker rm -f $reg_name; docker network rm kind"
    rm -f "$KIND_HOST_STATE/engine-started"
  elif docker info >/dev/null 2>&1; then
    if ((made_cluster)); then
      with_kind_docker "$kind_bin" delete cluster --name "$cluster" >/dev/null 2>&1 ||
        say "could not delete cluster $cluster"
    fi
    if ((made_registry)); then docker rm -f -v "$reg_name" >/dev/null 2>&1 || true; fi
    if ((made_network)); then docker network rm kind >/dev/null 2>&1 || true; fi
    local v
    for v in $(docker volume ls -q 2>/dev/null); do
      grep -qx "$v" <<<"$volumes_before" || docker volume rm "$v" >/dev/null 2>&1 || true
    done
  fi
  engine_down
  if [[ $keep != 1 ]]; then
    host_restore
  else
    host_restore --keep-engine
  fi
  rm -rf "$KIND_HOST_STATE"
  phases+=("$(printf '%-14s %5ss' cleanup "$((SECONDS - start))")")
  report
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- what the phases do --------------------------------------------------------------------
kind_bin=""
bins=""
kind_path=""
# kind, with the `docker` it must call on this host first on its PATH.
with_kind_docker() {
  if [[ -n $kind_path ]]; then PATH="$kind_path:$PATH" "$@"; else "$@"; fi
}
kind() { with_kind_docker "$kind_bin" "$@"; }

decide_offline() {
  case ${KIND_OFFLINE:-auto} in
    1 | true) offline=1 ;;
    0 | false) offline=0 ;;
    auto)
      local code
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 https://registry-1.docker.io/v2/ 2>/dev/null || true)
      if [[ $code == 200 || $code == 401 ]]; then offline=0; else offline=1; fi
      ;;
    *) die "KIND_OFFLINE=${KIND_OFFLINE}: use auto, 1 or 0" ;;
  esac
  if ((offline)); then
    say "offline: every image is built here (KIND_OFFLINE=0 takes kind's node image and registry:2)"
  else
    say "online: kind's default node image and registry:2 are pulled (KIND_OFFLINE=1 builds them)"
  fi
}

engine() {
  host_snapshot
  engine_up
  volumes_before=$(docker volume ls -q)
  kind_path=$(privileged_docker_dir)
}

controlplane() {
  bin=$(hack/controlplane/build.sh | tail -n 1)
  export LOOP_PLUGINS_CONTROLPLANE=$bin
}
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
helm() { "$bin/helm" --kubeconfig "$kubeconfig" "$@"; }

# The suite runs the `loop-plugins` binary beside it (the CLI's `plugin install`), so it is
# built here too: a fresh clone has no other step that builds it.
e2e_build() {
  cargo build --workspace --bins
  if ((bench)); then
    cargo bench -p loop-plugins-bench --bench cold_start --no-run
  else
    cargo test --test e2e --no-run
  fi
}

kind_programs() {
  if ((offline)); then
    bins=$(hack/kind/build-bins.sh | tail -n 1)
  else
    bins=$(hack/kind/build-bins.sh kind | tail -n 1)
  fi
  kind_bin=$bins/kind
}

node_image=""
node() {
  if [[ -n ${KIND_NODE_IMAGE:-} ]]; then
    node_image=$KIND_NODE_IMAGE
  elif ((offline)); then
    local base
    base=$(hack/kind/debian-base.sh | tail -n 1)
    node_image=$(hack/kind/node-image.sh "$bins" "$bin" "$base" | tail -n 1)
  fi
  say "node image: ${node_image:-the default of kind $KIND_VERSION}"
}

create_cluster() {
  mkdir -p "$(dirname "$kubeconfig")"
  docker network inspect kind >/dev/null 2>&1 || made_network=1
  local exists=0
  kind get clusters 2>/dev/null | grep -qx "$cluster" && exists=1
  if ((exists)) && [[ ! -f $kept_marker ]]; then
    # Not kept on purpose: left by a run that was killed before its cleanup (or made by hand).
    # Its state (namespaces of unfinished tests, pods still reconciled, a node restarted with
    # the engine) is not the clean cluster the suite assumes, so it goes.
    say "cluster $cluster was left by a run that did not finish (no KEEP_CLUSTER=1 marker $kept_marker): deleting it"
    kind delete cluster --name "$cluster" >&2 ||
      die "could not delete the leftover cluster $cluster: kind delete cluster --name $cluster, then run again"
    exists=0
  fi
  if ((exists)); then
    say "reusing cluster $cluster (kept by KEEP_CLUSTER=1 at $(cat "$kept_marker"): it stays)"
  else
    rm -f "$kept_marker"
    made_cluster=1
    kind create cluster --name "$cluster" --config kind-config.yaml --kubeconfig "$kubeconfig" \
      ${node_image:+--image "$node_image"} --wait 5m
  fi
  kind export kubeconfig --name "$cluster" --kubeconfig "$kubeconfig" 2>/dev/null
  local mapped
  mapped=$(docker port "$cluster-control-plane" "$node_port/tcp" 2>/dev/null || true)
  grep -qx "127.0.0.1:$node_port" <<<"$mapped" ||
    die "cluster $cluster does not map 127.0.0.1:$node_port to its node port $node_port (made from an older kind-config.yaml?): kind delete cluster --name $cluster, then run again"
  # A kept cluster whose engine restarted comes back with its API server: until its RBAC
  # caches fill, even the admin is Forbidden.
  local deadline=$((SECONDS + 180))
  until kubectl get nodes -o wide >&2 2>/dev/null; do
    ((SECONDS < deadline)) || die "cluster $cluster does not answer kubectl get nodes after 3 minutes: kind delete cluster --name $cluster, then run again"
    sleep 2
  done
  if ! kubectl wait --for=condition=Ready nodes --all --timeout=180s >&2; then
    # Why, before the cluster goes: each node's conditions and the kube-system Pods.
    kubectl describe nodes 2>&1 | grep -E '^Name:|^  [A-Za-z]+ +(True|False|Unknown) ' >&2 || true
    kubectl -n kube-system get pods -o wide >&2 || true
    die "the nodes of cluster $cluster are not Ready"
  fi
}

local_registry() {
  local image=${KIND_REGISTRY_IMAGE:-}
  if [[ -z $image ]]; then
    if ((offline)); then image=$(hack/kind/registry/image.sh | tail -n 1); else image=registry:2; fi
  fi
  case "$(docker inspect -f '{{.State.Running}}' "$reg_name" 2>/dev/null || echo missing)" in
    true) say "reusing the running registry $reg_name" ;;
    false) docker start "$reg_name" >/dev/null ;;
    *)
      made_registry=1
      docker run -d --network kind -p "127.0.0.1:$reg_port:5000" --name "$reg_name" "$image" >/dev/null
      ;;
  esac
  if [[ $(docker inspect -f '{{json .NetworkSettings.Networks.kind}}' "$reg_name") == null ]]; then
    docker network connect kind "$reg_name"
  fi
  # Each node's containerd sends localhost:5001 to the registry container (localhost in a node
  # is the node's own).
  local node dir=/etc/containerd/certs.d/$registry
  for node in $(kind get nodes --name "$cluster"); do
    docker exec "$node" mkdir -p "$dir"
    printf '[host."http://%s:5000"]\n' "$reg_name" | docker exec -i "$node" cp /dev/stdin "$dir/hosts.toml"
  done
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
  local deadline=$((SECONDS + 30))
  until curl -fsS --max-time 2 "http://$registry/v2/" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "the registry does not answer at http://$registry/v2/"
    sleep 0.5
  done
  say "registry $reg_name ($image) answers at $registry"
}

image_pinned=""
echo_pinned=""
chart_runner=""
app_images() {
  local how=${KIND_APP_IMAGES:-}
  if [[ -z $how ]]; then
    if ((!offline)) && docker buildx version >/dev/null 2>&1; then how=dockerfile; else how=prebuilt; fi
  fi
  local out
  out=$(KIND_APP_IMAGES=$how hack/kind/app-images.sh "$registry" "$tag")
  image_pinned=$(tail -n 2 <<<"$out" | head -n 1)
  echo_pinned=$(tail -n 1 <<<"$out")
}

chart() {
  # The release namespace (deploy/namespace.yaml: restricted Pod Security).
  if [[ $namespace == loop-plugins ]]; then
    kubectl apply --server-side -f deploy/namespace.yaml >/dev/null
  else
    kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
    kubectl label --overwrite namespace "$namespace" \
      app.kubernetes.io/part-of=loop-plugins pod-security.kubernetes.io/enforce=restricted >/dev/null
  fi
  # A release already there (a kept cluster): its CRDs as the upgrade in docs/install.md says,
  # since Helm installs them on the first install only.
  if helm status "$release" --namespace "$namespace" >/dev/null 2>&1; then
    kubectl apply --server-side --force-conflicts -f charts/loop-plugins/crds/ >/dev/null
  fi
  local image=${image_pinned%@*} digest=${image_pinned#*@}
  local log_level=${KIND_LOG_LEVEL:-info,loop_plugins_controller=debug,loop_plugins_server=debug,kube=warn}
  # helm's --set splits at commas.
  log_level=${log_level//,/\\,}
  if ! helm upgrade --install "$release" charts/loop-plugins --namespace "$namespace" \
    --set image.repository="$image" --set image.digest="$digest" \
    --set-string controller.logLevel="$log_level" --set-string api.logLevel="$log_level" \
    --set replicas=2 --set hostConfig.create=false \
    --set service.type=NodePort --set service.nodePort="$node_port" \
    --set service.sessionAffinity=ClientIP \
    --wait --timeout 5m; then
    kubectl -n "$namespace" get pods -o wide >&2 || true
    kubectl -n "$namespace" describe pods >&2 || true
    die "helm install did not finish"
  fi
  kubectl -n "$namespace" get pods -o wide >&2
  # kube-proxy may take a moment after the Service.
  local deadline=$((SECONDS + 60))
  until curl -fsS --max-time 3 "$api_url/healthz" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$api_url/healthz does not answer (the chart's Service on node port $node_port)"
    sleep 1
  done
  say "the API answers at $api_url"
  # The runner this chart names for agent runs (hostConfig.runner's defaults, with the release's
  # image): the suites write HostConfig themselves (hostConfig.create=false above), and their
  # agent runs on kind run with this runner, so they run as a Helm install would run them.
  chart_runner=$(helm template "$release" charts/loop-plugins --namespace "$namespace" \
    --set image.repository="$image" --set image.digest="$digest" \
    --show-only templates/hostconfig.yaml |
    kubectl create --dry-run=client -o jsonpath='{.spec.runner}' -f -)
  [[ -n $chart_runner ]] || die "the chart's HostConfig names no runner (hostConfig.runner)"
  say "the chart's runner: $chart_runner"
}

suite_env() {
  export KUBECONFIG=$kubeconfig
  export LOOP_PLUGINS_E2E_CLUSTER=kind
  export LOOP_PLUGINS_E2E_RELEASE=$release LOOP_PLUGINS_E2E_RELEASE_NAMESPACE=$namespace
  export LOOP_PLUGINS_E2E_ECHO_IMAGE=$echo_pinned
  # Our real image (the chart's): the agent runs' tests name it as HostConfig's runner, whose
  # Pods run its loop-plugins agent in a real container.
  export LOOP_PLUGINS_E2E_SELF_IMAGE=$image_pinned
  export LOOP_PLUGINS_E2E_CHART_RUNNER=${chart_runner:-}
  export LOOP_PLUGINS_E2E_API_URL=$api_url
  # The suite pushes each test plugin's image to the local registry; the nodes pull
  # localhost:5001 through containerd's hosts.toml, the controller (in a Pod, where localhost
  # is the Pod) reaches it by the registry container's name on the kind network.
  export LOOP_PLUGINS_E2E_REGISTRY=$registry
  export LOOP_PLUGINS_E2E_REGISTRY_MIRROR="$registry=$reg_name:5000"
  # Where Pods reach this machine: the kind network's gateway (IPv4). The agent runs' tests
  # serve their scripted model here, for the runner Pods.
  LOOP_PLUGINS_E2E_HOST_FROM_PODS=$(docker network inspect kind \
    --format '{{range .IPAM.Config}}{{.Gateway}} {{end}}' | tr ' ' '\n' | grep -m1 -E '^[0-9.]+$' || true)
  [[ -n $LOOP_PLUGINS_E2E_HOST_FROM_PODS ]] || die "the kind network has no IPv4 gateway for Pods to reach this machine by"
  export LOOP_PLUGINS_E2E_HOST_FROM_PODS
  # The browser tests' Chromium (installed by `make test` already in CI; alone, here).
  LOOP_PLUGINS_CHROMIUM=$(hack/chromium.sh | tail -n 1)
  export LOOP_PLUGINS_CHROMIUM
  # The echo and quiz binaries the suite's plugin images carry: static, as real containers
  # run them FROM scratch (app-images.sh's prebuilt way made them already, or they come from
  # the cache of these sources).
  local bins
  bins=$(hack/kind/static-bins.sh | tail -n 1)
  export LOOP_PLUGINS_E2E_ECHO_BINARY=$bins/echo-plugin
  export LOOP_PLUGINS_E2E_QUIZ_BINARY=$bins/quiz-plugin
}
e2e() {
  suite_env
  cargo test --test e2e -- "$@" && return 0
  local status=$?
  release_logs
  return "$status"
}

# make bench-kind: the cold-start bench against the release, the echo plugin from its pinned
# image (its module docs say what it measures); the release's logs kept when it fails.
bench_cold() {
  export KUBECONFIG=$kubeconfig KIND_CLUSTER=$cluster
  export LOOP_PLUGINS_E2E_API_URL=$api_url LOOP_PLUGINS_E2E_ECHO_IMAGE=$echo_pinned
  export LOOP_PLUGINS_E2E_REGISTRY_MIRROR="$registry=$reg_name:5000"
  export LOOP_PLUGINS_E2E_RELEASE_NAMESPACE=$namespace
  export LOOP_PLUGINS_BIN=$CARGO_TARGET_DIR/debug/loop-plugins
  cargo bench -p loop-plugins-bench --bench cold_start && return 0
  local status=$?
  release_logs
  return "$status"
}

# After a failure, before the cluster goes: what the release's replicas logged (each
# container, its previous run too), the Lease and the Events of the release's namespace.
release_logs() {
  local dir pod container
  dir=$(mktemp -d "${TMPDIR:-/tmp}/loop-plugins-kind-logs.XXXXXX")
  for pod in $(kubectl -n "$namespace" get pods -l "app.kubernetes.io/instance=$release" -o name 2>/dev/null); do
    for container in $(kubectl -n "$namespace" get "$pod" -o jsonpath='{.spec.containers[*].name}' 2>/dev/null); do
      kubectl -n "$namespace" logs "$pod" -c "$container" --timestamps >"$dir/${pod#pod/}.$container.log" 2>&1 || true
      kubectl -n "$namespace" logs "$pod" -c "$container" --timestamps --previous \
        >"$dir/${pod#pod/}.$container.previous.log" 2>/dev/null || rm -f "$dir/${pod#pod/}.$container.previous.log"
    done
  done
  kubectl -n "$namespace" get pods,lease -o wide >"$dir/release.txt" 2>&1 || true
  kubectl -n "$namespace" get events --sort-by=.lastTimestamp >"$dir/events.txt" 2>&1 || true
  say "the release's logs are kept in $dir"
}

# make dev CLUSTER=kind: examples/ applied, HostConfig told how the controller reaches the local
# registry, and the echo plugin installed from its image with `loop-plugins plugin install`
# (pinned to its real digest), until Ctrl-C.
dev_examples() {
  local f
  # Files that make namespaces first.
  for f in $(grep -l '^kind: Namespace' examples/*.yaml) $(grep -L '^kind: Namespace' examples/*.yaml); do
    kubectl apply --server-side --force-conflicts -f "$f" >&2
  done
  kubectl patch hostconfig default --type merge -p \
    "{\"spec\":{\"plugins\":{\"registry\":{\"mirrors\":[{\"registry\":\"$registry\",\"address\":\"$reg_name:5000\",\"plainHttp\":true}]}}}}" >&2
  cargo build -p loop-plugins --bin loop-plugins >&2
  KUBECONFIG=$kubeconfig "$CARGO_TARGET_DIR/debug/loop-plugins" plugin install "$echo_pinned" \
    --approve-all --controller-namespace "$namespace" >&2 ||
    die "loop-plugins plugin install $echo_pinned failed"
  say "examples/ applied, the echo plugin installed from $echo_pinned"
  say "in another shell: export KUBECONFIG=$kubeconfig PATH=$bin:\$PATH; kubectl get plugins,plugininstances -A"
  say "Ctrl-C stops it all (KEEP_CLUSTER=1 keeps the cluster)"
  trap 'exit 0' INT TERM
  # In the background, so a signal runs the trap at once.
  while true; do
    sleep 3600 &
    wait $!
  done
}

# --- the run -------------------------------------------------------------------------------
command -v curl >/dev/null || need_debian_packages "talking to the registry and the API" curl
decide_offline
phase engine engine
phase controlplane controlplane
((dev)) || phase "e2e build" e2e_build
phase kind kind_programs
phase "node image" node
phase cluster create_cluster
phase registry local_registry
phase images app_images
phase chart chart
if ((dev)); then
  dev_examples
elif ((bench)); then
  phase bench bench_cold
else
  phase e2e e2e "$@"
fi

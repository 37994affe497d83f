#!/usr/bin/env bash
# `make e2e-existing`: the rehearsal, on this machine, of what `make kind-e2e` does on a machine
# with Docker. The e2e suite runs against an existing cluster with the chart installed
# (LOOP_PLUGINS_E2E_CLUSTER=existing); here that cluster is `loop-plugins-dev --cluster-only`
# (the local control plane and the kubelet stand-in, nothing installed), and the chart goes in
# with the built helm, as on kind:
#
#   1. build our binaries, the echo plugin and (unless --no-tests) the e2e test binary;
#   2. start `loop-plugins-dev --cluster-only` in the background (stopped with SIGTERM on exit;
#      its folder is kept on failure, and the script says where), with a registry on
#      127.0.0.1:$registry_port holding our image (the chart's image, by its real digest) and
#      the plugin images the suite pushes (LOOP_PLUGINS_E2E_REGISTRY); the stand-in plays both
#      repositories with the binaries built here;
#   3. create the release namespace (restricted Pod Security, as on kind) and
#      `helm install` the chart: our image as pushed to the registry, one replica, no
#      HostConfig, and the API Service on node port 30080 (service.type=NodePort), as
#      hack/kind-e2e.sh does;
#   4. wait until the Deployment is Available and the API answers /healthz at
#      http://127.0.0.1:30080, the URL it has on kind (kind-config.yaml maps node port 30080
#      to the host's 127.0.0.1:30080). Here the stand-in's minimal kube-proxy listens there
#      and forwards to the Service's ready Pod (crates/devcluster/src/kubelet/nodeports.rs), so the
#      URL names the Service, not a Pod: when the Pod is replaced (a test that restarts the
#      controller deletes it) the same URL reaches the new one once it is Ready. The suite and
#      the plugin Pods (local processes too) both use it;
#   5. run `cargo test --test e2e -- "$@"` against it.
#
# Usage: hack/e2e-existing.sh [--no-tests] [-- e2e arguments...]
#   --no-tests   stop after step 4, leaving the cluster up until Ctrl-C (for a look around)
# Environment: LOOP_PLUGINS_E2E_RELEASE (default loop-plugins),
# LOOP_PLUGINS_E2E_RELEASE_NAMESPACE (default loop-plugins), E2E_EXISTING_TIMEOUT (seconds
# for each wait, default 180).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(hack/target-dir.sh)}

release=${LOOP_PLUGINS_E2E_RELEASE:-loop-plugins}
namespace=${LOOP_PLUGINS_E2E_RELEASE_NAMESPACE:-loop-plugins}
timeout=${E2E_EXISTING_TIMEOUT:-180}
# The registry `loop-plugins-dev` runs for the run: our image and the suite's plugin images.
registry_port=${E2E_EXISTING_REGISTRY_PORT:-5151}
registry=127.0.0.1:$registry_port
# The API Service's node port, and the URL it has on this machine (as on kind).
node_port=30080
api_url=http://127.0.0.1:$node_port

run_tests=1
if [[ ${1:-} == --no-tests ]]; then
  run_tests=0
  shift
fi
[[ ${1:-} == -- ]] && shift

say() { echo "e2e-existing: $*" >&2; }
die() { say "$*"; exit 1; }
started=$SECONDS
elapsed() { echo "$((SECONDS - started))s"; }

LOOP_PLUGINS_CONTROLPLANE=$(hack/controlplane/build.sh | tail -n 1)
export LOOP_PLUGINS_CONTROLPLANE
bin=$LOOP_PLUGINS_CONTROLPLANE
LOOP_PLUGINS_REGISTRY_BIN="$(hack/registry/build.sh | tail -n 1)/registry"
export LOOP_PLUGINS_REGISTRY_BIN
cargo build --workspace --bins
if ((run_tests)); then
  cargo test --test e2e --no-run
fi
say "built ($(elapsed))"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/loop-plugins-e2e-existing.XXXXXX")
kubeconfig=$tmp/kubeconfig
export HELM_CACHE_HOME=$tmp/helm/cache HELM_CONFIG_HOME=$tmp/helm/config HELM_DATA_HOME=$tmp/helm/data
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
helm() { "$bin/helm" --kubeconfig "$kubeconfig" "$@"; }

dev_pid=
finish() {
  local status=$?
  if [[ -n $dev_pid ]] && kill -0 "$dev_pid" 2>/dev/null; then
    # SIGTERM: `loop-plugins-dev` stops the pods' processes, then the control plane.
    kill -TERM "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
  fi
  if ((status == 0)); then
    rm -rf "$tmp"
  else
    say "failed after $(elapsed); kept $tmp:"
    say "  dev.log (loop-plugins-dev), run/logs (control plane), run/kubelet/logs/<ns>/<pod>/<container>.log (pods)"
  fi
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The node port must be ours: were another cluster's proxy (or anything else) on it, the suite
# would talk to that instead, and the stand-in would only warn that it cannot listen.
if (exec 3<>"/dev/tcp/127.0.0.1/$node_port") 2>/dev/null; then
  die "something already listens on 127.0.0.1:$node_port (another dev cluster or kind?): stop it first"
fi

# Step 2: the cluster, with nothing installed.
"$CARGO_TARGET_DIR/debug/loop-plugins-dev" --cluster-only \
  --controlplane "$bin" \
  --kubeconfig "$kubeconfig" --run-dir "$tmp/run" \
  --registry-bin "$LOOP_PLUGINS_REGISTRY_BIN" --registry-port "$registry_port" \
  --image "$registry/e2e/echo=$CARGO_TARGET_DIR/debug/echo-plugin" \
  >"$tmp/dev.log" 2>&1 &
dev_pid=$!

# `dev` writes the kubeconfig once the control plane and the stand-in are up.
deadline=$((SECONDS + timeout))
until [[ -s $kubeconfig ]]; do
  kill -0 "$dev_pid" 2>/dev/null || { tail -n 30 "$tmp/dev.log" >&2; die "loop-plugins-dev exited"; }
  ((SECONDS < deadline)) || { tail -n 30 "$tmp/dev.log" >&2; die "no kubeconfig after ${timeout}s"; }
  sleep 0.5
done
until kubectl get --raw /readyz >/dev/null 2>&1; do
  ((SECONDS < deadline)) || die "the API server is not ready after ${timeout}s"
  sleep 0.5
done
say "cluster up ($(elapsed)): KUBECONFIG=$kubeconfig"
# Our image as pushed to the run's registry (SELF_IMAGE=<repository>@sha256:<digest>).
until [[ -s $tmp/run/registry.env ]]; do
  kill -0 "$dev_pid" 2>/dev/null || { tail -n 30 "$tmp/dev.log" >&2; die "loop-plugins-dev exited"; }
  ((SECONDS < deadline)) || die "no registry.env after ${timeout}s"
  sleep 0.2
done
self_image=$(sed -n 's/^SELF_IMAGE=//p' "$tmp/run/registry.env")
self_repository=${self_image%%@*}
self_repository=${self_repository%:*}
digest=${self_image##*@}
say "our image: $self_image"

# Step 3: the release namespace (deploy/namespace.yaml: restricted Pod Security), as
# hack/kind-e2e.sh makes it, then the chart.
if [[ $namespace == loop-plugins ]]; then
  kubectl apply --server-side -f deploy/namespace.yaml >/dev/null
else
  kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply --server-side -f - >/dev/null
  kubectl label --overwrite namespace "$namespace" \
    app.kubernetes.io/part-of=loop-plugins pod-security.kubernetes.io/enforce=restricted >/dev/null
fi
if [[ $release == *loop-plugins* ]]; then fullname=$release; else fullname=$release-loop-plugins; fi
show_pods() {
  kubectl -n "$namespace" get pods -o wide >&2 || true
  local log
  for log in "$tmp"/run/kubelet/logs/"$namespace"/*/*.log; do
    [[ -f $log ]] || continue
    say "last lines of $log:"
    tail -n 5 "$log" >&2
  done
}
if ! helm upgrade --install "$release" charts/loop-plugins --namespace "$namespace" \
  --set image.repository="$self_repository" --set image.digest="$digest" \
  --set replicas=1 --set hostConfig.create=false \
  --set service.type=NodePort --set service.nodePort="$node_port" \
  --wait --timeout "${timeout}s"; then
  show_pods
  die "helm install did not finish"
fi
if ! kubectl -n "$namespace" rollout status "deployment/$fullname" --timeout "${timeout}s"; then
  show_pods
  die "deployment/$fullname is not Available"
fi
say "chart installed, deployment/$fullname Available ($(elapsed))"

# Step 4: the API Service at its node port, through the stand-in's kube-proxy.
deadline=$((SECONDS + timeout))
until curl -fsS --max-time 3 "$api_url/healthz" >/dev/null 2>&1; do
  if ((SECONDS >= deadline)); then
    show_pods
    grep -i 'node port' "$tmp/dev.log" >&2 || true
    die "$api_url/healthz does not answer (the chart's Service on node port $node_port)"
  fi
  sleep 0.5
done
say "the API answers at $api_url/healthz ($(elapsed))"

export KUBECONFIG=$kubeconfig
export LOOP_PLUGINS_E2E_CLUSTER=existing
export LOOP_PLUGINS_E2E_RELEASE=$release LOOP_PLUGINS_E2E_RELEASE_NAMESPACE=$namespace
export LOOP_PLUGINS_E2E_REGISTRY=$registry
export LOOP_PLUGINS_E2E_API_URL=$api_url LOOP_PLUGINS_E2E_PLUGIN_API_URL=$api_url

if ((!run_tests)); then
  say "--no-tests: the cluster stays up until Ctrl-C; in another shell:"
  say "  export PATH=$bin:\$PATH KUBECONFIG=$KUBECONFIG"
  say "  LOOP_PLUGINS_E2E_CLUSTER=existing LOOP_PLUGINS_E2E_REGISTRY=$registry LOOP_PLUGINS_E2E_API_URL=$api_url LOOP_PLUGINS_E2E_PLUGIN_API_URL=$api_url cargo test --test e2e"
  # Ctrl-C here is how the rehearsal ends, not a failure.
  trap 'exit 0' INT TERM
  wait "$dev_pid"
  exit 0
fi

# Step 5.
cargo test --test e2e -- "$@"
say "done ($(elapsed))"

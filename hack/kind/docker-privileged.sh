#!/usr/bin/env bash
# The `docker` kind calls on a host whose capability bounding set lacks capabilities (here
# CAP_SYS_RESOURCE): Docker 20.10 asks runc for every capability on --privileged and runc
# fails ("unable to apply caps: operation not permitted"). kind hard-codes --privileged for
# its node containers, so for `run` and `create` this rewrites it into what --privileged gives
# otherwise: every capability but the missing ones, /sys and /proc unmasked and writable
# (systempaths=unconfined), no SELinux label, every device allowed (cgroup rule) and the two
# devices kind's nodes use. For `exec` it is dropped: the process gets the container's own
# capability set. The node's entrypoint then makes the cgroup mounts writable
# (hack/kind/node/entrypoint.sh), which --privileged would have done.
#
# Environment (set by host.sh's privileged_docker_dir): KIND_REAL_DOCKER (the docker to run),
# KIND_DROP_CAPS (the missing capabilities, space-separated names without CAP_).
set -euo pipefail
real=${KIND_REAL_DOCKER:?the docker program to run}
# A name would be looked up on PATH, where this wrapper comes first.
[[ $real == /* ]] || { echo "docker-privileged: KIND_REAL_DOCKER=$real is not an absolute path" >&2; exit 2; }
read -r -a drop <<<"${KIND_DROP_CAPS:-}"

args=()
command=""
for a in "$@"; do
  if [[ -z $command && $a != -* ]]; then command=$a; fi
  if [[ $a == --privileged || $a == --privileged=true ]]; then
    case $command in
      run | create)
        args+=(--cap-add=ALL)
        for c in "${drop[@]}"; do args+=("--cap-drop=$c"); done
        args+=(--security-opt=systempaths=unconfined --security-opt=label=disable
          "--device-cgroup-rule=a *:* rwm" --device=/dev/kmsg --device=/dev/fuse)
        ;;
      *) ;;
    esac
    continue
  fi
  args+=("$a")
done
exec "$real" "${args[@]}"

#!/bin/bash
# The node image's entrypoint: makes the cgroup mounts writable, then runs kind's own
# entrypoint (/usr/local/bin/entrypoint, from the kind module's images/base/files).
#
# kind starts nodes with --privileged. Where the host cannot grant that (its capability
# bounding set lacks some; see hack/kind/docker-privileged.sh), the node runs with every other
# capability instead, and Docker then mounts /sys and each cgroup v1 hierarchy read-only.
# systemd and the kubelet must write there, so each read-only one is bind-remounted read-write
# (a plain `remount,rw` answers EBUSY). Under a real --privileged nothing is read-only and
# this does nothing.
set -euo pipefail
if findmnt -rn -o OPTIONS /sys | grep -qE '(^|,)ro(,|$)'; then
  mount -o remount,rw /sys || echo "loop-plugins-node-entrypoint: could not make /sys writable" >&2
fi
findmnt -rn -o TARGET,OPTIONS | while read -r target options; do
  [[ $target == /sys/fs/cgroup || $target == /sys/fs/cgroup/* ]] || continue
  [[ ,$options, == *,ro,* ]] || continue
  mount -o remount,bind,rw "$target" || echo "loop-plugins-node-entrypoint: could not make $target writable" >&2
done
exec /usr/local/bin/entrypoint "$@"

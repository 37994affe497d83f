# The host side of a kind run (sourced by hack/kind-e2e.sh and hack/dev.sh): the Docker engine
# (started when none answers, installed from Debian's docker.io when missing and allowed), the
# `docker` kind must call on a host that cannot grant --privileged, and putting back what the
# run changes on the host: the sysctls the node's kubelets set host-wide, /lib/modules (Docker
# makes it for kind's bind mount), the engine's bridge and iptables rules when this run
# started the engine.
#
# State lives in the folder $KIND_HOST_STATE (one per run).
# shellcheck shell=bash

# Host-wide sysctls a kind run changes, seen here: the kubelets in the nodes set kernel.panic,
# kernel.panic_on_oops and vm.overcommit_memory (pkg/kubelet/cm setupKernelTunables); systemd
# in the nodes sets fs.file-max and fs.protected_*; dockerd sets net.ipv4.ip_forward and the
# IPv6 forwarding switches. All of them, and any other that moves, are put back; only these,
# which move on their own, are left alone:
KIND_VOLATILE_SYSCTLS='^(kernel\.(random\.|ns_last_pid|pty\.nr|sched_domain|tainted)|fs\.(dentry-state|file-nr|inode-(nr|state)|quota\.|binfmt_misc\.)|net\.netfilter\.nf_conntrack_count|net\.ipv[46]\.(route\.|neigh\.)|dev\.|vm\.stat|net\.ipv[46]\.conf\.(veth|br-|docker))'

# Records every sysctl's value and whether /lib/modules exists.
host_snapshot() {
  mkdir -p "$KIND_HOST_STATE"
  sysctl -a 2>/dev/null | sort >"$KIND_HOST_STATE/sysctls" || true
  [[ -e /lib/modules ]] && touch "$KIND_HOST_STATE/lib-modules-existed"
  return 0
}

# Puts back every recorded sysctl that moved (but the volatile ones), and removes /lib/modules
# when the run made it (and it is empty). `host_restore --keep-engine`, for a cluster that
# stays: the network ones (dockerd's forwarding, which the cluster needs) and /lib/modules (the
# nodes mount it) stay too.
host_restore() {
  [[ -s $KIND_HOST_STATE/sysctls ]] || return 0
  local keep_engine=0 line k v now file put=() failed=()
  [[ ${1:-} == --keep-engine ]] && keep_engine=1
  while IFS= read -r line; do
    k=${line%% = *} v=${line#* = }
    [[ $k =~ $KIND_VOLATILE_SYSCTLS ]] && continue
    ((keep_engine)) && [[ $k == net.* ]] && continue
    file=/proc/sys/${k//.//}
    [[ -w $file ]] || continue
    now=$(sysctl -n "$k" 2>/dev/null) || continue
    [[ $now == "$v" ]] && continue
    if printf '%s\n' "$v" >"$file" 2>/dev/null; then put+=("$k=$v"); else failed+=("$k"); fi
  done < <(sysctl -a 2>/dev/null | sort | comm -23 "$KIND_HOST_STATE/sysctls" -)
  ((${#put[@]})) && say "host: put back ${put[*]}"
  ((${#failed[@]})) && say "host: could not put back ${failed[*]}"
  if ((!keep_engine)) && [[ ! -f $KIND_HOST_STATE/lib-modules-existed && -d /lib/modules ]]; then
    if rmdir /lib/modules 2>/dev/null; then
      say "host: removed /lib/modules (made for kind's bind mount)"
    else
      say "host: /lib/modules is not empty, left in place"
    fi
  fi
  rm -f "$KIND_HOST_STATE/sysctls"
}

# --- the Docker engine -------------------------------------------------------------------

# Makes `docker info` answer: uses a running engine as it is; else starts dockerd (installing
# Debian's docker.io first when dockerd is missing and this is root on Debian), and remembers
# to stop it (engine_down).
engine_up() {
  local docker=${DOCKER:-docker}
  if command -v "$docker" >/dev/null && "$docker" info >/dev/null 2>&1; then
    say "engine: using the running Docker engine ($("$docker" version -f '{{.Server.Version}}' 2>/dev/null))"
    return 0
  fi
  if ! type -P dockerd >/dev/null || ! type -P "$docker" >/dev/null; then
    need_debian_packages "the Docker engine: none answers and dockerd is missing" docker.io
  fi
  command -v dockerd >/dev/null || die "no Docker engine answers and dockerd is not installed"
  [[ $(id -u) == 0 ]] || die "no Docker engine answers: start it (this script starts dockerd only as root)"
  # What dockerd changes on the host, to put back when it stops.
  if command -v iptables-save >/dev/null; then
    iptables-save >"$KIND_HOST_STATE/iptables" 2>/dev/null || true
  fi
  ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' >"$KIND_HOST_STATE/bridges" || true
  local log=$KIND_HOST_STATE/dockerd.log start=$SECONDS
  if [[ $(cat /proc/1/comm 2>/dev/null) == systemd ]] && systemctl cat docker.service >/dev/null 2>&1; then
    systemctl start docker.service
    echo systemd >"$KIND_HOST_STATE/engine-started"
  else
    setsid dockerd >"$log" 2>&1 </dev/null &
    echo "$!" >"$KIND_HOST_STATE/engine-started"
    # Not a job of the script: its cleanup kills what is left of those, and KEEP_CLUSTER=1
    # keeps the engine (engine_down stops it by its pid otherwise).
    disown "$!"
  fi
  until "$docker" info >/dev/null 2>&1; do
    if ((SECONDS - start > 60)); then
      tail -n 20 "$log" >&2 || true
      die "dockerd does not answer after 60s (log: $log)"
    fi
    sleep 0.5
  done
  say "engine: started dockerd $("$docker" version -f '{{.Server.Version}}') in $((SECONDS - start))s; it stops at the end"
}

# Stops the engine if engine_up started it, and takes away its bridge and iptables rules.
engine_down() {
  local started=$KIND_HOST_STATE/engine-started pid
  [[ -f $started ]] || return 0
  pid=$(cat "$started")
  if [[ $pid == systemd ]]; then
    systemctl stop docker.service docker.socket 2>/dev/null || true
  elif kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && say "engine: dockerd ($pid) still runs 60s after SIGTERM"
  fi
  rm -f "$started"
  local br
  for br in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}'); do
    grep -qx "$br" "$KIND_HOST_STATE/bridges" 2>/dev/null || ip link delete "$br" 2>/dev/null || true
  done
  if [[ -f $KIND_HOST_STATE/iptables ]] && command -v iptables-restore >/dev/null; then
    # Tables dockerd added are emptied; the ones that existed get their old rules back.
    local t
    for t in $(iptables-save 2>/dev/null | sed -n 's/^\*//p'); do
      grep -qx "\*$t" "$KIND_HOST_STATE/iptables" && continue
      iptables -t "$t" -F 2>/dev/null || true
      iptables -t "$t" -X 2>/dev/null || true
      local chain
      for chain in $(iptables-save -t "$t" 2>/dev/null | sed -n 's/^:\([A-Z]*\) [A-Z]*.*/\1/p'); do
        iptables -t "$t" -P "$chain" ACCEPT 2>/dev/null || true
      done
    done
    iptables-restore <"$KIND_HOST_STATE/iptables" 2>/dev/null || say "engine: could not restore iptables"
  fi
  say "engine: stopped dockerd (started by this run), its bridges and iptables rules removed"
}

# --- kind's `docker` on a host that cannot grant --privileged ---------------------------------

# Capabilities (by number) missing from this process's bounding set; empty when all are there.
missing_capabilities() {
  local names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
    LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER
    SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE
    SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP
    MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF
    CHECKPOINT_RESTORE)
  local bnd i out=()
  bnd=$((16#$(sed -n 's/^CapBnd:\s*//p' /proc/self/status)))
  for i in "${!names[@]}"; do
    (((bnd >> i) & 1)) || out+=("${names[$i]}")
  done
  echo "${out[*]}"
}

# When the bounding set lacks capabilities, Docker 20.10 still asks runc for all of them on
# --privileged and fails ("unable to apply caps"). Then this prints a folder to put first on
# kind's PATH: its `docker` (hack/kind/docker-privileged.sh) turns --privileged into every
# capability but the missing ones, plus what --privileged means otherwise. Prints nothing
# when --privileged works as it is.
privileged_docker_dir() {
  local missing
  missing=$(missing_capabilities)
  [[ -n $missing ]] || return 0
  local dir=$KIND_HOST_STATE/docker-bin real
  # type -P: the program, not a shell function of the same name (a wrapper calling itself).
  real=$(type -P "${DOCKER:-docker}") || die "no ${DOCKER:-docker} program on PATH"
  mkdir -p "$dir"
  cat >"$dir/docker" <<WRAP
#!/usr/bin/env bash
export KIND_REAL_DOCKER='$real' KIND_DROP_CAPS='$missing'
exec '$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/docker-privileged.sh' "\$@"
WRAP
  chmod +x "$dir/docker"
  say "host: the capability bounding set lacks $missing: kind's --privileged becomes every other capability ($dir/docker)"
  echo "$dir"
}

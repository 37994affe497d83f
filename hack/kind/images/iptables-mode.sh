#!/bin/sh
# Stands in for iptables, iptables-save, iptables-restore and their ip6tables twins in an image
# that shares the node's network namespace. On the first call it picks the backend (legacy or
# nft) the node's own rules use, points every command at it, and runs the call: the node's
# kubelet marks its choice with the KUBE-IPTABLES-HINT chain; without it the backend with more
# rules wins, as kind's node entrypoint decides (the approach of kubernetes-sigs/iptables-wrappers).
set -eu
has_hint() { "xtables-$1-multi" iptables-save -t mangle 2>/dev/null | grep -q '^:KUBE-IPTABLES-HINT'; }
rules() { { "xtables-$1-multi" iptables-save || true; "xtables-$1-multi" ip6tables-save || true; } 2>/dev/null | grep -c '^-' || true; }
if has_hint nft; then
  mode=nft
elif has_hint legacy; then
  mode=legacy
elif [ "$(rules nft)" -gt "$(rules legacy)" ]; then
  mode=nft
else
  mode=legacy
fi
for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf "xtables-$mode-multi" "/usr/sbin/$c.tmp" && mv -f "/usr/sbin/$c.tmp" "/usr/sbin/$c"
done
exec "/usr/sbin/$(basename "$0")" "$@"

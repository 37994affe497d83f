# A node-networking program (kube-proxy, kube-router) on the local Debian base with the tools
# it calls: iptables (legacy and nft), ipset, conntrack, ip. iptables-mode.sh stands in for
# the iptables commands until the first call, which picks the backend the node uses.
ARG BASE
FROM ${BASE}
RUN apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
       iptables nftables ipset conntrack kmod iproute2 ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/*.log
COPY iptables-mode.sh /usr/sbin/iptables-mode
RUN chmod 755 /usr/sbin/iptables-mode \
    && for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do \
         ln -sf iptables-mode "/usr/sbin/$c"; \
       done
ARG BIN
COPY ${BIN} /usr/local/bin/${BIN}
# ENTRYPOINT cannot name a build argument: /entrypoint is the program.
RUN ln -s "/usr/local/bin/${BIN}" /entrypoint
ENTRYPOINT ["/entrypoint"]

# CoreDNS as kubeadm's Deployment runs it: the image's entrypoint is /coredns.
FROM scratch
COPY coredns /coredns
EXPOSE 53 53/udp
ENTRYPOINT ["/coredns"]

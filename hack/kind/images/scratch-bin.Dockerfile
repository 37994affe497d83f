# One static program on an empty image, at /usr/local/bin/<BIN> and on PATH: kube-apiserver,
# kube-controller-manager, kube-scheduler and etcd as kubeadm's static Pods run them, and
# local-path-provisioner as kind's storage manifest does.
FROM scratch
ARG BIN
COPY ${BIN} /usr/local/bin/${BIN}
ENV PATH=/usr/local/bin

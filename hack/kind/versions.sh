# The pinned versions of everything `make kind-e2e` builds for a kind cluster with nothing
# pulled (sourced by the scripts in hack/kind/). Kubernetes itself (kubelet, kubeadm,
# kube-proxy, kube-scheduler here; kube-apiserver, kube-controller-manager, kubectl, etcd and
# helm in hack/controlplane) is pinned by hack/controlplane/go.mod; hack/kind/node/go.mod
# follows it (hack/kind/node/gen-go-mod.sh).
#
# Each version is one the Go module proxy serves; where kind v0.32.0's own node image uses a
# version the proxy does not serve, the nearest served one is named and the reason given.
# shellcheck shell=bash disable=SC2034

# kind itself; its default node image (kindest/node:v1.36.1) is what a machine with internet
# uses (KIND_OFFLINE=0).
KIND_MODULE=sigs.k8s.io/kind
KIND_VERSION=v0.32.0
# The node's container runtime. containerd 2.3.0 to 2.3.3 mis-resolve the pinned sandbox
# image by digest (kind-offline.md); Kubernetes 1.36 needs containerd 2.x.
CONTAINERD_VERSION=v2.3.4
RUNC_VERSION=v1.4.3
# kind v0.32.0 uses crictl v1.36.0, which the proxy does not serve.
CRI_TOOLS_VERSION=v1.37.0
CNI_PLUGINS_VERSION=v1.9.1
# What kubeadm v1.36.3 deploys (cmd/kubeadm/app/constants: CoreDNSVersion, DefaultEtcdVersion,
# PauseVersion); etcd's binary is the control plane's (hack/controlplane/go.mod pins 3.6.8).
COREDNS_VERSION=v1.14.2
ETCD_IMAGE_TAG=3.6.8-0
PAUSE_VERSION=3.10.2
# kind's containerd config names pause 3.10 as the sandbox image: the same binary, both tags.
PAUSE_SANDBOX_TAG=3.10
# The default StorageClass (local-path), as kind ships it; v0.0.30 is the newest the proxy
# serves.
LOCAL_PATH_VERSION=v0.0.30
# The CNI and NetworkPolicy engine of the offline node image. kindnetd's policy engine needs
# nfqueue, which this kernel lacks; kube-router routes pod traffic between nodes (BGP, a
# bridge per node) and enforces NetworkPolicy with iptables and ipset. v2.1.0 is the only v2
# the proxy serves (it flags it: see hack/kind/README.md, "NetworkPolicy").
KUBE_ROUTER_VERSION=v2.1.0
# The node's and the small images' Debian (systemd 252: cgroup v1 still works; 256+ refuses).
DEBIAN_SUITE=bookworm

//! End-to-end tests against a real kube-apiserver, etcd and kube-controller-manager, with the
//! kubelet stand-in running Pods as local processes. One cluster serves the whole run; each
//! test gets a fresh namespace. When the control plane cannot start, every test fails with the
//! reason.
//!
//! To add tests: write a module with `pub fn tests() -> Vec<support::E2eTest>` and list it below.

mod api;
mod chart;
mod cluster;
mod controller;
mod controller_support;
mod crds;
mod host;
mod pods;
mod support;
mod versions;

fn main() -> std::process::ExitCode {
    let modules = [
        api::tests(),
        chart::tests(),
        cluster::tests(),
        controller::tests(),
        crds::tests(),
        host::tests(),
        pods::tests(),
        versions::tests(),
    ];
    support::run(modules.into_iter().flatten().collect())
}

//! End-to-end tests against a real kube-apiserver, etcd and kube-controller-manager, with the
//! kubelet stand-in running Pods as local processes; or, with `LOOP_PLUGINS_E2E_CLUSTER=existing`
//! (alias `kind`), against a cluster with the chart installed (see `support::target`). One
//! cluster serves the whole run; each test gets a fresh namespace. When the cluster cannot
//! start, every test that needs it fails with the reason.
//!
//! To add tests: write a module with `pub fn tests() -> Vec<support::E2eTest>` and list it below.

mod admission;
mod api;
mod approvals;
mod browser;
mod browser_support;
mod chart;
mod cluster;
mod console;
mod console_support;
mod controller;
mod controller_cold;
mod controller_repair;
mod controller_support;
mod crds;
mod egress;
mod host;
mod image_conformance;
mod live;
mod operate;
mod pods;
mod runs;
mod secrets;
mod support;
mod tour;
mod traces;
mod trust;
mod ui;
mod ui_commands;
mod unreadable;
mod versions;
mod watch;
mod worktree_tasks;

fn main() -> std::process::ExitCode {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let modules = [
        vec![
            support::plain(
                "support::the_cluster_switch_reads_the_environment",
                support::target::self_check,
            ),
            support::plain(
                "support::a_lock_wait_does_not_count_against_the_time_limit",
                support::a_lock_wait_does_not_count_against_the_time_limit,
            ),
        ],
        admission::tests(),
        approvals::tests(),
        api::tests(),
        browser::tests(),
        chart::tests(),
        cluster::tests(),
        console::tests(),
        controller::tests(),
        crds::tests(),
        host::tests(),
        image_conformance::tests(),
        egress::tests(),
        live::tests(),
        operate::tests(),
        pods::tests(),
        runs::tests(),
        secrets::tests(),
        tour::tests(),
        traces::tests(),
        trust::tests(),
        ui::tests(),
        ui_commands::tests(),
        unreadable::tests(),
        versions::tests(),
        watch::tests(),
        worktree_tasks::tests(),
    ];
    support::run(modules.into_iter().flatten().collect())
}

//! The controller: makes the cluster match what is installed and what each project enables.
//!
//! Six reconcilers share one index of the cluster (crates/index, started for the controller's
//! role): Plugin (admission, purge), the Plugin's egress (its NetworkPolicy in each namespace
//! where it runs: `egress`), Channel (the chat's instances, data volumes and CronJobs),
//! PluginInstance (Secret, Pod on demand, status), Project (trust in status, from the
//! same-named ProjectTrust) and AgentRun (each run a Job of the runner, one at a time per
//! thread: `runs`). `controllers` builds them, with what wakes each (`wake` maps a
//! change to the objects it wakes). Deciding is pure (admission is a crate of its own,
//! crates/admission; here `plan`, `pod_wanted`, `pod`, `cronjob`, `instance::decide`); writing is
//! `write`'s, the one door (apply, create, delete, status, and the memory of recent writes); `retry` decides when a failed reconcile looks again. `unreadable` names, with an
//! Event and a gauge, each object the index leaves out because it does not parse.
//! The controller never calls a plugin: that is the API server's (crates/server).

mod chat;
mod context;
mod controllers;
mod egress;
mod error;
mod images;
mod instance;
pub mod metrics;
mod plugin;
mod plugin_pod;
mod pod_wanted;
mod project;
mod queue;
mod retry;
mod runs;
#[cfg(test)]
mod tests;
mod unreadable;
mod wake;
mod write;

// The pure builders the benchmarks measure against (crates/bench builds the controller's own
// objects from its own plan for a bare client's baseline, and checks convergence with it).
// Everything else here is the controller's own; the binary needs only `run` and `Options`.
pub mod cronjob;
pub mod plan;
pub mod pod;

use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use prometheus_client::registry::Registry;

use context::Context;
pub use context::Options;

use index::{Index, Roles};
use runtime::leader::LeaderArgs;
use runtime::shutdown;

/// Runs the controller until SIGTERM or Ctrl-C.
///
/// `/healthz` and `/metrics` answer from the start; the reconcilers run only while this
/// replica holds the Lease when leader election is on, so replicas > 1 are safe.
pub async fn run(
    client: Client,
    options: Options,
    metrics_addr: SocketAddr,
    leader: LeaderArgs,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = metrics::Metrics::new(&mut registry);
    let server = runtime::metrics::serve(metrics_addr, Arc::new(registry), shutdown::signal());
    tracing::info!(%metrics_addr, "serving /healthz and /metrics");
    let work = reconcile_all(client.clone(), options, metrics);
    // On SIGTERM the work stops and the Lease is released at once, so the next replica leads
    // without waiting for it to run out. The metrics server stops on the same signal.
    let led = leader.run(client, work, shutdown::signal());
    tokio::pin!(led);
    let mut server = tokio::spawn(server);
    tokio::select! {
        result = &mut led => {
            if let Some(result) = result? {
                result?;
            }
        }
        served = &mut server => {
            // It stopped on the signal, or failed to bind: the work stops on the signal too.
            served??;
            if let Some(result) = led.await? {
                result?;
            }
        }
    }
    server.abort();
    tracing::info!("controller stopped");
    Ok(())
}

/// Runs the reconcilers until SIGTERM or Ctrl-C, over an index of their own: the index
/// started, a context over it, the controllers built, then run.
async fn reconcile_all(
    client: Client,
    options: Options,
    metrics: metrics::Metrics,
) -> anyhow::Result<()> {
    // The watches stop when this returns (or is dropped, when this replica stops leading).
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let roles = Roles::controller(&options.namespace);
    let started = Index::start(client.clone(), &roles, stopped).await?;
    reconcile(client, &started.index, options, metrics).await;
    Ok(())
}

/// Runs the reconcilers over `index`, started with the controller's role (alone, or beside
/// others), until SIGTERM or Ctrl-C.
pub async fn reconcile(client: Client, index: &Index, options: Options, metrics: metrics::Metrics) {
    let ctx = Arc::new(Context::over(client, metrics, index, options));
    let feeds = &index.feeds;
    let plugins = controllers::plugin(feeds, ctx.clone());
    let egress = controllers::egress(feeds, ctx.clone());
    let chats = controllers::chat(feeds, ctx.clone());
    let instances = controllers::instance(feeds, ctx.clone());
    let projects = controllers::project(feeds, ctx.clone());
    let runs = controllers::run(feeds, ctx.clone());
    // Names what the index leaves out, for as long as the reconcilers run.
    let named = tokio::spawn(unreadable::report(index.unreadable.clone(), ctx));
    tracing::info!("reconciling");
    futures::join!(plugins, egress, chats, instances, projects, runs);
    named.abort();
}

//! The controller: makes the cluster match what is installed and what each project enables.
//!
//! Five reconcilers share one set of watches: Plugin (admission, purge), Channel (the chat's
//! instances, data volumes and CronJobs), PluginInstance (Secret, Pod on demand, status),
//! Project (trust in status) and AgentRun (`/runs/{run_id}/done`, once).
//! Deciding is pure (`admission`, `plan`, `demand`, `pod`, `cronjob`); writing is `apply`.

pub mod admission;
mod apply;
mod chat;
mod context;
pub mod cronjob;
pub mod demand;
mod done;
mod error;
mod instance;
pub mod metrics;
pub mod names;
pub mod plan;
mod plugin;
pub mod pod;
mod project;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use prometheus_client::registry::Registry;

pub use context::{Context, Settings, Stores};
pub use error::Error;

use crate::resources::{AgentRun, Channel, HostConfig, Plugin, PluginInstance, Project};

/// The time now, as conditions record it.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string()
}

/// Runs the controller until SIGTERM or Ctrl-C.
///
/// `/healthz` and `/metrics` answer from the start; the reconcilers run only while this
/// replica holds the Lease when leader election is on, so replicas > 1 are safe.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics_addr: SocketAddr,
    leader: crate::leader::LeaderArgs,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = metrics::Metrics::new(&mut registry);
    let server = serve_metrics(metrics_addr, Arc::new(registry));
    tracing::info!(%metrics_addr, "serving /healthz and /metrics");
    let work = reconcile_all(client.clone(), settings, metrics);
    // On SIGTERM the work stops and the Lease is released at once, so the next replica leads
    // without waiting for it to run out. The metrics server stops on the same signal.
    let led = leader.run(client, work, shutdown_signal());
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

/// Watches everything and runs the reconcilers until SIGTERM or Ctrl-C.
async fn reconcile_all(
    client: Client,
    settings: Settings,
    metrics: metrics::Metrics,
) -> anyhow::Result<()> {
    let managed = || watcher::Config::default().labels(names::MANAGED_SELECTOR);
    let mut host = watch::watch(
        Api::<HostConfig>::all(client.clone()),
        watcher::Config::default(),
        3,
    );
    let mut plugins = watch::watch(
        Api::<Plugin>::all(client.clone()),
        watcher::Config::default(),
        3,
    );
    let mut projects = watch::watch(
        Api::<Project>::all(client.clone()),
        watcher::Config::default(),
        2,
    );
    let mut channels = watch::watch(
        Api::<Channel>::all(client.clone()),
        watcher::Config::default(),
        2,
    );
    let mut instances = watch::watch(Api::<PluginInstance>::all(client.clone()), managed(), 2);
    let mut pods = watch::watch(Api::<Pod>::all(client.clone()), managed(), 1);
    let mut secrets = watch::watch(Api::<Secret>::all(client.clone()), managed(), 1);
    let mut claims = watch::watch(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        managed(),
        1,
    );
    let mut cronjobs = watch::watch(Api::<CronJob>::all(client.clone()), managed(), 1);

    let stores = Stores {
        host: host.store.clone(),
        plugins: plugins.store.clone(),
        projects: projects.store.clone(),
        channels: channels.store.clone(),
        instances: instances.store.clone(),
        pods: pods.store.clone(),
        secrets: secrets.store.clone(),
        claims: claims.store.clone(),
        cronjobs: cronjobs.store.clone(),
    };
    tracing::info!("waiting for the caches to fill");
    futures::try_join!(
        stores.host.wait_until_ready(),
        stores.plugins.wait_until_ready(),
        stores.projects.wait_until_ready(),
        stores.channels.wait_until_ready(),
        stores.instances.wait_until_ready(),
        stores.pods.wait_until_ready(),
        stores.secrets.wait_until_ready(),
        stores.claims.wait_until_ready(),
        stores.cronjobs.wait_until_ready(),
    )?;
    let ctx = Arc::new(Context::new(
        client.clone(),
        metrics,
        stores.clone(),
        settings,
    ));

    let all_plugins = {
        let store = stores.plugins.clone();
        move |_: HostConfig| {
            store
                .state()
                .iter()
                .map(|p| ObjectRef::from(p.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let plugin_controller = Controller::for_stream(plugins.subscribe(), stores.plugins.clone())
        .watches_stream(host.subscribe(), all_plugins)
        .shutdown_on_signal()
        .run(plugin::reconcile, error_policy("plugin"), ctx.clone())
        .for_each(log_result("plugin"));

    let all_channels = |store: kube::runtime::reflector::Store<Channel>| {
        move || {
            store
                .state()
                .iter()
                .map(|c| ObjectRef::from(c.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let channels_of_project = {
        let store = stores.channels.clone();
        move |project: Project| {
            store
                .state()
                .iter()
                .filter(|c| {
                    c.namespace() == project.namespace() && c.spec.project == project.name_any()
                })
                .map(|c| ObjectRef::from(c.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let on_plugin = all_channels(stores.channels.clone());
    let on_host = all_channels(stores.channels.clone());
    let chat_controller = Controller::for_stream(channels.subscribe(), stores.channels.clone())
        .owns_stream(instances.subscribe())
        .owns_stream(claims.subscribe())
        .owns_stream(cronjobs.subscribe())
        .watches_stream(plugins.subscribe(), move |_| on_plugin())
        .watches_stream(host.subscribe(), move |_| on_host())
        .watches_stream(projects.subscribe(), channels_of_project)
        .shutdown_on_signal()
        .run(chat::reconcile, error_policy("chat"), ctx.clone())
        .for_each(log_result("chat"));

    let instances_of_plugin = {
        let store = stores.instances.clone();
        move |plugin: Plugin| {
            store
                .state()
                .iter()
                .filter(|i| i.spec.plugin == plugin.name_any())
                .map(|i| ObjectRef::from(i.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let instances_of_channel = {
        let store = stores.instances.clone();
        move |channel: Channel| {
            store
                .state()
                .iter()
                .filter(|i| {
                    i.namespace() == channel.namespace() && i.spec.channel == channel.name_any()
                })
                .map(|i| ObjectRef::from(i.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let every_instance = {
        let store = stores.instances.clone();
        move |_: HostConfig| {
            store
                .state()
                .iter()
                .map(|i| ObjectRef::from(i.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let instance_controller =
        Controller::for_stream(instances.subscribe(), stores.instances.clone())
            .owns_stream(pods.subscribe())
            .owns_stream(secrets.subscribe())
            .watches_stream(plugins.subscribe(), instances_of_plugin)
            .watches_stream(channels.subscribe(), instances_of_channel)
            .watches_stream(host.subscribe(), every_instance)
            .shutdown_on_signal()
            .run(instance::reconcile, error_policy("instance"), ctx.clone())
            .for_each(log_result("instance"));

    let run_controller = Controller::new(
        Api::<AgentRun>::all(client.clone()),
        watcher::Config::default(),
    )
    .shutdown_on_signal()
    .run(done::reconcile, error_policy("run"), ctx.clone())
    .for_each(log_result("run"));

    let project_controller = Controller::for_stream(projects.subscribe(), stores.projects.clone())
        .shutdown_on_signal()
        .run(project::reconcile, error_policy("project"), ctx.clone())
        .for_each(log_result("project"));

    tracing::info!("reconciling");
    futures::future::join5(
        plugin_controller,
        chat_controller,
        instance_controller,
        project_controller,
        run_controller,
    )
    .await;
    Ok(())
}

/// Counts a failed reconcile by category and looks again soon.
fn error_policy<K>(controller: &'static str) -> impl Fn(Arc<K>, &Error, Arc<Context>) -> Action {
    move |_, err, ctx| {
        ctx.metrics
            .failures
            .get_or_create(&metrics::FailureLabels {
                controller,
                category: err.category(),
            })
            .inc();
        tracing::warn!(controller, error = %err, "reconcile failed");
        Action::requeue(RETRY)
    }
}

fn log_result<T: std::fmt::Debug, E: std::fmt::Display>(
    controller: &'static str,
) -> impl FnMut(Result<T, E>) -> futures::future::Ready<()> {
    move |result| {
        match result {
            Ok(object) => tracing::debug!(controller, ?object, "reconciled"),
            Err(err) => tracing::debug!(controller, %err, "reconcile error"),
        }
        futures::future::ready(())
    }
}

/// Times and counts each reconcile.
pub struct Timer<'a> {
    ctx: &'a Context,
    controller: &'static str,
    start: Instant,
}

impl<'a> Timer<'a> {
    pub fn start(ctx: &'a Context, controller: &'static str) -> Self {
        ctx.metrics
            .reconciles
            .get_or_create(&metrics::ControllerLabels { controller })
            .inc();
        Self {
            ctx,
            controller,
            start: Instant::now(),
        }
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.ctx
            .metrics
            .duration
            .get_or_create(&metrics::ControllerLabels {
                controller: self.controller,
            })
            .observe(self.start.elapsed().as_secs_f64());
    }
}

async fn serve_metrics(addr: SocketAddr, registry: Arc<Registry>) -> anyhow::Result<()> {
    let app = crate::metrics::router(registry);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// How long before a reconcile looks again at an object it could not finish.
pub const RETRY: Duration = Duration::from_secs(5);

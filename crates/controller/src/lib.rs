//! The controller: makes the cluster match what is installed and what each project enables.
//!
//! Four reconcilers share one set of watches: Plugin (admission, purge), Channel (the chat's
//! instances, data volumes and CronJobs), PluginInstance (Secret, Pod on demand, status) and
//! Project (trust in status, from the same-named ProjectTrust). Deciding is pure (`admission`, `plan`, `demand`, `pod`,
//! `cronjob`); writing is `apply`; `retry` decides when a failed reconcile looks again.
//! The controller never calls a plugin: that is the API server's (crates/server).

pub mod admission;
mod apply;
mod chat;
pub mod conflicts;
mod context;
pub mod cronjob;
pub mod demand;
mod drift;
mod error;
pub mod gate_policy;
pub mod images;
mod instance;
mod merge_patch;
pub mod metrics;
pub mod plan;
mod plugin;
pub mod plugin_pod;
pub mod pod;
mod project;
mod retry;
#[cfg(test)]
mod tests;
mod wake;
mod written;

/// How the index keeps the children the controller watches in bulk, and its manifest cache,
/// under the names the controller's files use.
pub use index::{manifests, slim};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use prometheus_client::registry::Registry;
use tracing::Instrument;

pub use context::{Context, Settings, Stores};
pub use error::Error;
use index::{Feed, Slim, Watch};

use model::names;
use model::resources::{Channel, HostConfig, Plugin, PluginInstance, Project, ProjectTrust};
use runtime::leader::LeaderArgs;
use runtime::shutdown;

/// Runs the controller until SIGTERM or Ctrl-C.
///
/// `/healthz` and `/metrics` answer from the start; the reconcilers run only while this
/// replica holds the Lease when leader election is on, so replicas > 1 are safe.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics_addr: SocketAddr,
    leader: LeaderArgs,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = metrics::Metrics::new(&mut registry);
    let server = runtime::metrics::serve(metrics_addr, Arc::new(registry), shutdown::signal());
    tracing::info!(%metrics_addr, "serving /healthz and /metrics");
    let work = reconcile_all(client.clone(), settings, metrics);
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

/// Watches everything and runs the reconcilers until SIGTERM or Ctrl-C.
async fn reconcile_all(
    client: Client,
    settings: Settings,
    metrics: metrics::Metrics,
) -> anyhow::Result<()> {
    // The watches stop when this returns (or is dropped, when this replica stops leading).
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let managed = || watcher::Config::default().labels(names::MANAGED_SELECTOR);
    let (host_store, host) = watch(
        Api::<HostConfig>::all(client.clone()),
        watcher::Config::default(),
        &stopped,
    );
    let (plugins_store, plugins) = watch(
        Api::<Plugin>::all(client.clone()),
        watcher::Config::default(),
        &stopped,
    );
    let (projects_store, projects) = watch(
        Api::<Project>::all(client.clone()),
        watcher::Config::default(),
        &stopped,
    );
    let (project_trusts_store, project_trusts) = watch(
        Api::<ProjectTrust>::all(client.clone()),
        watcher::Config::default(),
        &stopped,
    );
    let (channels_store, channels) = watch(
        Api::<Channel>::all(client.clone()),
        watcher::Config::default(),
        &stopped,
    );
    let (instances_store, instances) = watch(
        Api::<PluginInstance>::all(client.clone()),
        managed(),
        &stopped,
    );
    let (pods_store, pods) = watch(Api::<Pod>::all(client.clone()), managed(), &stopped);
    // The children there are thousands of are kept slim (see `slim`).
    let (secrets_store, secrets) = watch(
        Api::<Slim<Secret>>::all(client.clone()),
        managed(),
        &stopped,
    );
    let (claims_store, claims) = watch(
        Api::<Slim<PersistentVolumeClaim>>::all(client.clone()),
        managed(),
        &stopped,
    );
    let (cronjobs_store, cronjobs) = watch(
        Api::<Slim<CronJob>>::all(client.clone()),
        managed(),
        &stopped,
    );
    // HostConfig's registry credentials live in the controller's own namespace.
    let (registry_secrets_store, registry_secrets) = watch(
        Api::<Secret>::namespaced(client.clone(), &settings.namespace),
        watcher::Config::default(),
        &stopped,
    );

    let stores = Stores {
        host: host_store,
        plugins: plugins_store,
        projects: projects_store,
        project_trusts: project_trusts_store,
        channels: channels_store,
        instances: instances_store,
        pods: pods_store,
        secrets: secrets_store,
        claims: claims_store,
        cronjobs: cronjobs_store,
        registry_secrets: registry_secrets_store,
    };
    tracing::info!("waiting for the caches to fill");
    futures::try_join!(
        stores.host.wait_until_ready(),
        stores.plugins.wait_until_ready(),
        stores.projects.wait_until_ready(),
        stores.project_trusts.wait_until_ready(),
        stores.channels.wait_until_ready(),
        stores.instances.wait_until_ready(),
        stores.pods.wait_until_ready(),
        stores.secrets.wait_until_ready(),
        stores.claims.wait_until_ready(),
        stores.cronjobs.wait_until_ready(),
        stores.registry_secrets.wait_until_ready(),
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
    // Names are held first come, first served: a change to one Plugin can change the
    // admission of those sharing a name with it, and of those refused at the Names stage.
    let plugins_sharing_names = {
        let store = stores.plugins.clone();
        move |changed: Plugin| {
            let names = conflicts::declared_names(&changed);
            store
                .state()
                .iter()
                .filter(|p| p.name_any() != changed.name_any())
                .filter(|p| {
                    p.status.as_ref().and_then(|s| s.stage.as_deref()) == Some("Names")
                        || conflicts::declared_names(p)
                            .iter()
                            .any(|n| names.contains(n))
                })
                .map(|p| ObjectRef::from(p.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let plugins_on_secret = {
        let store = stores.plugins.clone();
        move |_: Secret| {
            store
                .state()
                .iter()
                .map(|p| ObjectRef::from(p.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let concurrency = ctx.settings.concurrency;
    let config = || kube::runtime::controller::Config::default().concurrency(concurrency);
    let plugin_controller = Controller::for_stream(plugins.subscribe(), stores.plugins.clone())
        .watches_stream(host.subscribe(), all_plugins)
        .watches_stream(plugins.subscribe(), plugins_sharing_names)
        .watches_stream(registry_secrets.subscribe(), plugins_on_secret)
        .with_config(config())
        .shutdown_on_signal()
        .run(
            traced("plugin", plugin::reconcile),
            error_policy("plugin"),
            ctx.clone(),
        )
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
    // The chats of a project, by its namespace and name (a ProjectTrust has its Project's).
    let channels_of = |store: kube::runtime::reflector::Store<Channel>| {
        move |namespace: Option<String>, project: String| {
            store
                .state()
                .iter()
                .filter(|c| c.metadata.namespace == namespace && c.spec.project == project)
                .map(|c| ObjectRef::from(c.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let of_project = channels_of(stores.channels.clone());
    let channels_of_project = move |p: Project| of_project(p.namespace(), p.name_any());
    let of_trust = channels_of(stores.channels.clone());
    let channels_of_trust = move |t: ProjectTrust| of_trust(t.namespace(), t.name_any());
    let on_plugin = all_channels(stores.channels.clone());
    let on_host = all_channels(stores.channels.clone());
    // A child wakes its chat only when something the chat sets on it changed (see `wake`).
    let chat_controller = Controller::for_stream(channels.subscribe(), stores.channels.clone())
        .owns_stream(instances.subscribe_on_change(wake::Fingerprint::fingerprint))
        .owns_stream(claims.subscribe_on_change(wake::Fingerprint::fingerprint))
        .owns_stream(cronjobs.subscribe_on_change(wake::Fingerprint::fingerprint))
        .watches_stream(plugins.subscribe(), move |_| on_plugin())
        .watches_stream(host.subscribe(), move |_| on_host())
        .watches_stream(projects.subscribe(), channels_of_project)
        .watches_stream(project_trusts.subscribe(), channels_of_trust)
        .with_config(config())
        .shutdown_on_signal()
        .run(
            traced("chat", chat::reconcile),
            error_policy("chat"),
            ctx.clone(),
        )
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
        let instances = stores.instances.clone();
        let channels = stores.channels.clone();
        move |channel: Channel| {
            wake::instances_of_chat(
                &channel,
                channels.state().iter().map(|c| c.as_ref()),
                instances.state().iter().map(|i| i.as_ref()),
            )
        }
    };
    // A project's settings show on its instances (the values left out).
    let instances_of_project = {
        let store = stores.instances.clone();
        move |project: Project| {
            let (namespace, name) = (&project.metadata.namespace, project.metadata.name.as_ref());
            store
                .state()
                .iter()
                .filter(|i| i.metadata.namespace == *namespace && Some(&i.spec.project) == name)
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
    // An instance's status is the instance reconciler's own output (and the API server's
    // demand, which comes with its own version): the echo of its write wakes nothing.
    let own_echo = {
        let ctx = ctx.clone();
        move |instance: &PluginInstance| apply::is_status_echo(&ctx, instance)
    };
    let instance_controller = Controller::for_stream(
        instances.subscribe_without_echoes(own_echo),
        stores.instances.clone(),
    )
    .owns_stream(pods.subscribe())
    .owns_stream(secrets.subscribe())
    .watches_stream(plugins.subscribe(), instances_of_plugin)
    .watches_stream(
        channels.subscribe_on_change(wake::Fingerprint::fingerprint),
        instances_of_channel,
    )
    .watches_stream(projects.subscribe(), instances_of_project)
    .watches_stream(host.subscribe(), every_instance)
    .with_config(config())
    .shutdown_on_signal()
    .run(
        traced("instance", instance::reconcile),
        error_policy("instance"),
        ctx.clone(),
    )
    .for_each(log_result("instance"));

    let project_of_trust = |t: ProjectTrust| {
        let project = ObjectRef::<Project>::new(&t.name_any());
        Some(match t.namespace() {
            Some(ns) => project.within(&ns),
            None => project,
        })
    };
    let project_controller = Controller::for_stream(projects.subscribe(), stores.projects.clone())
        .watches_stream(project_trusts.subscribe(), project_of_trust)
        .with_config(config())
        .shutdown_on_signal()
        .run(
            traced("project", project::reconcile),
            error_policy("project"),
            ctx.clone(),
        )
        .for_each(log_result("project"));

    tracing::info!("reconciling");
    futures::future::join4(
        plugin_controller,
        chat_controller,
        instance_controller,
        project_controller,
    )
    .await;
    Ok(())
}

/// Starts watching what `api` and `config` select until `stop`: its store and its subscribers.
fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> (Store<K>, Feed<K>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let feed = Feed::new(store.clone());
    Watch::new(api, config).feeding(&feed).spawn(writer, stop);
    (store, feed)
}

/// Wraps a reconciler: a span per reconcile naming the object, its count and duration in the
/// metrics, and the object's backoff forgotten once it reconciles.
fn traced<K, F, Fut>(
    controller: &'static str,
    reconcile: F,
) -> impl FnMut(Arc<K>, Arc<Context>) -> futures::future::BoxFuture<'static, Result<Action, Error>>
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + Copy + 'static,
    Fut: std::future::Future<Output = Result<Action, Error>> + Send + 'static,
{
    move |object: Arc<K>, ctx: Arc<Context>| {
        let key = retry::key(object.as_ref());
        let span = tracing::info_span!(
            "reconcile",
            controller,
            namespace = object.namespace().unwrap_or_default(),
            name = object.name_any(),
        );
        Box::pin(
            async move {
                ctx.metrics
                    .reconciles
                    .get_or_create(&metrics::ControllerLabels { controller })
                    .inc();
                let start = Instant::now();
                let result = reconcile(object, ctx.clone()).await;
                ctx.metrics
                    .duration
                    .get_or_create(&metrics::ControllerLabels { controller })
                    .observe(start.elapsed().as_secs_f64());
                if result.is_ok() {
                    ctx.backoff.forget(&key);
                }
                result
            }
            .instrument(span),
        )
    }
}

/// Counts a failed reconcile by category; a transient failure looks again after a backoff
/// that doubles with each failure in a row (capped), a permanent one waits for a change.
fn error_policy<K>(controller: &'static str) -> impl Fn(Arc<K>, &Error, Arc<Context>) -> Action
where
    K: Resource<DynamicType = ()>,
{
    move |object, err, ctx| {
        ctx.metrics
            .failures
            .get_or_create(&metrics::FailureLabels {
                controller,
                category: err.category(),
            })
            .inc();
        if err.is_permanent() {
            tracing::warn!(controller, name = %object.name_any(), error = %err, "reconcile failed; waiting for a change");
            return Action::await_change();
        }
        let after = ctx.backoff.next(retry::key(object.as_ref()));
        tracing::warn!(controller, name = %object.name_any(), error = %err, retry_in = ?after, "reconcile failed");
        Action::requeue(after)
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

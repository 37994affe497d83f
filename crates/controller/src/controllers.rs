//! The five controllers, each a kube `Controller` over the index's feeds: what it reconciles,
//! which changes wake it, and how its reconciles run (a span and metrics each, the backoff of
//! a failing object). Which objects a change wakes is `wake`'s.
//!
//! | controller | reconciles | its children (woken on) | also woken by |
//! |---|---|---|---|
//! | plugin | Plugin | | HostConfig (every Plugin), a Secret of the controller's namespace (every Plugin), a Plugin (those sharing a name) |
//! | chat | Channel | instances, /data claims, CronJobs (a change of what it sets) | a Plugin or HostConfig (every chat), a Project or ProjectTrust (its chats) |
//! | instance | PluginInstance, but the echo of its own status write | Pods, Secrets (any change) | a Plugin, a chat's spec, a Project (their instances), HostConfig (every instance) |
//! | project | Project | | its ProjectTrust |
//! | run | AgentRun | its Job and prompt Secret (any change) | a run (the others of its thread), HostConfig (every run) |

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tracing::Instrument;

use super::context::Context;
use super::error::Error;
use super::wake::{self, Fingerprint};
use super::{apply, chat, instance, metrics, plugin, project, retry, runs};
use index::Feeds;

/// Admission and purge of each Plugin.
pub fn plugin(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let plugins = stores.plugins.clone();
    Controller::for_stream(feeds.plugins.subscribe(), stores.plugins.clone())
        .watches_stream(feeds.host.subscribe(), waking_every(&stores.plugins))
        .watches_stream(feeds.plugins.subscribe(), move |changed| {
            wake::plugins_sharing_names(&changed, plugins.state().iter().map(|p| p.as_ref()))
        })
        .watches_stream(
            feeds.registry_secrets.subscribe(),
            waking_every(&stores.plugins),
        )
        .with_config(config(&ctx))
        .shutdown_on_signal()
        .run(
            traced("plugin", plugin::reconcile),
            error_policy("plugin"),
            ctx.clone(),
        )
        .for_each(log_result("plugin"))
}

/// Each chat's instances, data volumes and CronJobs. A child wakes its chat only when
/// something the chat sets on it changed (see `wake`).
pub fn chat(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let (on_project, on_trust) = (stores.channels.clone(), stores.channels.clone());
    Controller::for_stream(feeds.channels.subscribe(), stores.channels.clone())
        .owns_stream(
            feeds
                .instances
                .subscribe_on_change(Fingerprint::fingerprint),
        )
        .owns_stream(feeds.claims.subscribe_on_change(Fingerprint::fingerprint))
        .owns_stream(feeds.cronjobs.subscribe_on_change(Fingerprint::fingerprint))
        .watches_stream(feeds.plugins.subscribe(), waking_every(&stores.channels))
        .watches_stream(feeds.host.subscribe(), waking_every(&stores.channels))
        .watches_stream(feeds.projects.subscribe(), move |project| {
            let chats = on_project.state();
            let chats = chats.iter().map(|c| c.as_ref());
            wake::chats_of_project(project.namespace().as_deref(), &project.name_any(), chats)
        })
        .watches_stream(feeds.project_trusts.subscribe(), move |trust| {
            let chats = on_trust.state();
            let chats = chats.iter().map(|c| c.as_ref());
            wake::chats_of_project(trust.namespace().as_deref(), &trust.name_any(), chats)
        })
        .with_config(config(&ctx))
        .shutdown_on_signal()
        .run(
            traced("chat", chat::reconcile),
            error_policy("chat"),
            ctx.clone(),
        )
        .for_each(log_result("chat"))
}

/// Each instance's Secret, its Pod on demand, and its status. An instance's status is this
/// controller's own output (and the API server's demand, which comes with its own version):
/// the echo of its write wakes nothing.
pub fn instance(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let (on_plugin, on_chat, on_project) = (
        stores.instances.clone(),
        stores.instances.clone(),
        stores.instances.clone(),
    );
    let chats = stores.channels.clone();
    let own_echo = {
        let ctx = ctx.clone();
        move |instance: &_| apply::is_status_echo(&ctx, instance)
    };
    Controller::for_stream(
        feeds.instances.subscribe_without_echoes(own_echo),
        stores.instances.clone(),
    )
    .owns_stream(feeds.pods.subscribe())
    .owns_stream(feeds.owned_secrets.subscribe())
    .watches_stream(feeds.plugins.subscribe(), move |plugin| {
        wake::instances_of_plugin(&plugin, on_plugin.state().iter().map(|i| i.as_ref()))
    })
    .watches_stream(
        feeds.channels.subscribe_on_change(Fingerprint::fingerprint),
        move |chat| {
            wake::instances_of_chat(
                &chat,
                chats.state().iter().map(|c| c.as_ref()),
                on_chat.state().iter().map(|i| i.as_ref()),
            )
        },
    )
    .watches_stream(feeds.projects.subscribe(), move |project| {
        wake::instances_of_project(&project, on_project.state().iter().map(|i| i.as_ref()))
    })
    .watches_stream(feeds.host.subscribe(), waking_every(&stores.instances))
    .with_config(config(&ctx))
    .shutdown_on_signal()
    .run(
        traced("instance", instance::reconcile),
        error_policy("instance"),
        ctx.clone(),
    )
    .for_each(log_result("instance"))
}

/// Each project's trust in its status, from the same-named ProjectTrust.
pub fn project(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    Controller::for_stream(feeds.projects.subscribe(), ctx.stores.projects.clone())
        .watches_stream(feeds.project_trusts.subscribe(), |trust| {
            Some(wake::project_of_trust(&trust))
        })
        .with_config(config(&ctx))
        .shutdown_on_signal()
        .run(
            traced("project", project::reconcile),
            error_policy("project"),
            ctx.clone(),
        )
        .for_each(log_result("project"))
}

/// Each agent run: its turn in its thread, its Job, its status following the Job. A run's
/// change (it ended, say) wakes the others of its thread, so the next starts.
pub fn run(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let thread = stores.runs.clone();
    Controller::for_stream(feeds.runs.subscribe(), stores.runs.clone())
        .owns_stream(feeds.jobs.subscribe())
        .watches_stream(feeds.runs.subscribe(), move |changed| {
            let runs = thread.state();
            runs.iter()
                .filter(|r| r.name_any() != changed.name_any() && runs::same_thread(r, &changed))
                .map(|r| ObjectRef::from_obj(r.as_ref()))
                .collect::<Vec<_>>()
        })
        .watches_stream(feeds.host.subscribe(), waking_every(&stores.runs))
        .with_config(config(&ctx))
        .shutdown_on_signal()
        .run(
            traced("run", runs::reconcile),
            error_policy("run"),
            ctx.clone(),
        )
        .for_each(log_result("run"))
}

/// A mapping that wakes every object of `store`, whatever changed.
fn waking_every<K, Changed>(
    store: &Store<K>,
) -> impl Fn(Changed) -> Vec<ObjectRef<K>> + Send + Sync + 'static + use<K, Changed>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let store = store.clone();
    move |_| wake::every(store.state().iter().map(|o| o.as_ref()))
}

/// Reconciles each controller runs at once.
fn config(ctx: &Context) -> Config {
    Config::default().concurrency(ctx.settings.concurrency)
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

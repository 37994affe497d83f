//! The six controllers, each a kube `Controller` over the index's feeds: what it reconciles,
//! which changes wake it, and how its reconciles run (a span and metrics each; a failure
//! counted by its category, told in a Warning Event whose reason is that category, and looked
//! at again after a backoff). Which objects a change wakes is `wake`'s.
//!
//! | controller | reconciles | its children (woken on) | also woken by |
//! |---|---|---|---|
//! | plugin | Plugin | | HostConfig (every Plugin), a Secret of the controller's namespace (every Plugin), a Plugin (those sharing a name) |
//! | egress | Plugin | its NetworkPolicies (any change, by their owner reference) | another NetworkPolicy (the plugins with instances in its namespace), an instance coming or going (its plugin), HostConfig (every Plugin) |
//! | chat | Channel | instances, /data claims, CronJobs (a change of what it sets) | a Plugin or HostConfig (every chat), a Project or ProjectTrust (its chats) |
//! | instance | PluginInstance, but the echo of its own status write | Pods, Secrets (any change) | a Plugin, a chat's spec, a Project, a NetworkPolicy (their instances), HostConfig (every instance) |
//! | project | Project | | its ProjectTrust |
//! | run | AgentRun | its Job and prompt Secret (any change) | a run (the others of its thread), HostConfig (every run) |

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::controller::{Action, Config, Controller, Error as ControllerError};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tracing::Instrument;

use super::context::Context;
use super::error::Error;
use super::queue::{self, Queue};
use super::wake::{self, Fingerprint};
use super::{chat, egress, instance, metrics, plugin, project, retry, runs};
use index::Feeds;
use model::resources::{AgentRun, Channel, Plugin, PluginInstance, Project, ProjectTrust};

/// Admission and purge of each Plugin.
pub fn plugin(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let plugins = stores.plugins.clone();
    let q = queue_of(&ctx, "plugin");
    Controller::for_stream(q.objects(feeds.plugins.subscribe()), stores.plugins.clone())
        .watches_stream(
            feeds.host.subscribe(),
            q.mapped(waking_every(&stores.plugins)),
        )
        .watches_stream(
            feeds.plugins.subscribe(),
            q.mapped(move |changed| {
                wake::plugins_sharing_names(&changed, plugins.state().iter().map(|p| p.as_ref()))
            }),
        )
        .watches_stream(
            feeds.registry_secrets.subscribe(),
            q.mapped(waking_every(&stores.plugins)),
        )
        .with_config(config(&ctx))
        .shutdown_on_signal()
        .run(
            traced("plugin", q.clone(), plugin::reconcile),
            error_policy("plugin"),
            ctx.clone(),
        )
        .for_each(log_result("plugin", q))
}

/// Each Plugin's egress: its NetworkPolicy in each namespace where it runs and one is due.
/// Its policies wake it by their owner reference (kube's `owns` looks for a cluster-wide owner
/// in its child's namespace, so the mapping is `wake`'s); another policy wakes the plugins
/// running in its namespace; an instance coming or going, its plugin.
pub fn egress(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let instances = stores.instances.clone();
    let q = queue_of(&ctx, "egress");
    let plugin_of = |instance: &PluginInstance| {
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&instance.spec.plugin, &mut hasher);
        std::hash::Hasher::finish(&hasher)
    };
    Controller::for_stream(q.objects(feeds.plugins.subscribe()), stores.plugins.clone())
        .watches_stream(
            feeds.network_policies.subscribe(),
            q.mapped(move |policy| {
                wake::plugins_of_policy(&policy, instances.state().iter().map(|i| i.as_ref()))
            }),
        )
        .watches_stream(
            feeds.instances.subscribe_on_change(plugin_of),
            q.mapped(|instance: PluginInstance| Some(ObjectRef::new(&instance.spec.plugin))),
        )
        .watches_stream(
            feeds.host.subscribe(),
            q.mapped(waking_every(&stores.plugins)),
        )
        .with_config(config(&ctx))
        .shutdown_on_signal()
        .run(
            traced("egress", q.clone(), egress::reconcile),
            error_policy("egress"),
            ctx.clone(),
        )
        .for_each(log_result("egress", q))
}

/// Each chat's instances, data volumes and CronJobs. A child wakes its chat only when
/// something the chat sets on it changed (see `wake`).
pub fn chat(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let (on_project, on_trust) = (stores.channels.clone(), stores.channels.clone());
    let q = queue_of(&ctx, "chat");
    Controller::for_stream(
        q.objects(feeds.channels.subscribe()),
        stores.channels.clone(),
    )
    .owns_stream(
        q.owners::<Channel, _, _>(
            feeds
                .instances
                .subscribe_on_change(Fingerprint::fingerprint),
        ),
    )
    .owns_stream(
        q.owners::<Channel, _, _>(feeds.claims.subscribe_on_change(Fingerprint::fingerprint)),
    )
    .owns_stream(
        q.owners::<Channel, _, _>(feeds.cronjobs.subscribe_on_change(Fingerprint::fingerprint)),
    )
    .watches_stream(
        feeds.plugins.subscribe(),
        q.mapped(waking_every(&stores.channels)),
    )
    .watches_stream(
        feeds.host.subscribe(),
        q.mapped(waking_every(&stores.channels)),
    )
    .watches_stream(
        feeds.projects.subscribe(),
        q.mapped(move |project: Project| {
            let chats = on_project.state();
            let chats = chats.iter().map(|c| c.as_ref());
            wake::chats_of_project(project.namespace().as_deref(), &project.name_any(), chats)
        }),
    )
    .watches_stream(
        feeds.project_trusts.subscribe(),
        q.mapped(move |trust: ProjectTrust| {
            let chats = on_trust.state();
            let chats = chats.iter().map(|c| c.as_ref());
            wake::chats_of_project(trust.namespace().as_deref(), &trust.name_any(), chats)
        }),
    )
    .with_config(config(&ctx))
    .shutdown_on_signal()
    .run(
        traced("chat", q.clone(), chat::reconcile),
        error_policy("chat"),
        ctx.clone(),
    )
    .for_each(log_result("chat", q))
}

/// Each instance's Secret, its Pod on demand, and its status. An instance's status is this
/// controller's own output (and the API server's demand, which comes with its own version):
/// the echo of its write wakes nothing.
pub fn instance(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let (on_plugin, on_chat, on_project, on_policy) = (
        stores.instances.clone(),
        stores.instances.clone(),
        stores.instances.clone(),
        stores.instances.clone(),
    );
    let chats = stores.channels.clone();
    let own_echo = {
        let ctx = ctx.clone();
        move |instance: &_| ctx.writes.is_status_echo(instance)
    };
    let q = queue_of(&ctx, "instance");
    Controller::for_stream(
        q.objects(feeds.instances.subscribe_without_echoes(own_echo)),
        stores.instances.clone(),
    )
    .owns_stream(q.owners::<PluginInstance, _, _>(feeds.pods.subscribe()))
    .owns_stream(q.owners::<PluginInstance, _, _>(feeds.owned_secrets.subscribe()))
    .watches_stream(
        feeds.plugins.subscribe(),
        q.mapped(move |plugin: Plugin| {
            wake::instances_of_plugin(&plugin, on_plugin.state().iter().map(|i| i.as_ref()))
        }),
    )
    .watches_stream(
        feeds.channels.subscribe_on_change(Fingerprint::fingerprint),
        q.mapped(move |chat: Channel| {
            wake::instances_of_chat(
                &chat,
                chats.state().iter().map(|c| c.as_ref()),
                on_chat.state().iter().map(|i| i.as_ref()),
            )
        }),
    )
    .watches_stream(
        feeds.projects.subscribe(),
        q.mapped(move |project: Project| {
            wake::instances_of_project(&project, on_project.state().iter().map(|i| i.as_ref()))
        }),
    )
    .watches_stream(
        feeds.network_policies.subscribe(),
        q.mapped(move |policy| {
            wake::instances_of_policy(&policy, on_policy.state().iter().map(|i| i.as_ref()))
        }),
    )
    .watches_stream(
        feeds.host.subscribe(),
        q.mapped(waking_every(&stores.instances)),
    )
    .with_config(config(&ctx))
    .shutdown_on_signal()
    .run(
        traced("instance", q.clone(), instance::reconcile),
        error_policy("instance"),
        ctx.clone(),
    )
    .for_each(log_result("instance", q))
}

/// Each project's trust in its status, from the same-named ProjectTrust.
pub fn project(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let q = queue_of(&ctx, "project");
    Controller::for_stream(
        q.objects(feeds.projects.subscribe()),
        ctx.stores.projects.clone(),
    )
    .watches_stream(
        feeds.project_trusts.subscribe(),
        q.mapped(|trust: ProjectTrust| Some(wake::project_of_trust(&trust))),
    )
    .with_config(config(&ctx))
    .shutdown_on_signal()
    .run(
        traced("project", q.clone(), project::reconcile),
        error_policy("project"),
        ctx.clone(),
    )
    .for_each(log_result("project", q))
}

/// Each agent run: its turn in its thread, its Job, its status following the Job. A run's
/// change (it ended, say) wakes the others of its thread, so the next starts.
pub fn run(feeds: &Feeds, ctx: Arc<Context>) -> impl Future<Output = ()> + use<> {
    let stores = &ctx.stores;
    let thread = stores.runs.clone();
    let q = queue_of(&ctx, "run");
    Controller::for_stream(q.objects(feeds.runs.subscribe()), stores.runs.clone())
        .owns_stream(q.owners::<AgentRun, _, _>(feeds.jobs.subscribe()))
        .watches_stream(
            feeds.runs.subscribe(),
            q.mapped(move |changed: AgentRun| {
                let runs = thread.state();
                runs.iter()
                    .filter(|r| {
                        r.name_any() != changed.name_any() && runs::same_thread(r, &changed)
                    })
                    .map(|r| ObjectRef::from_obj(r.as_ref()))
                    .collect::<Vec<_>>()
            }),
        )
        .watches_stream(feeds.host.subscribe(), q.mapped(waking_every(&stores.runs)))
        .with_config(config(&ctx))
        .shutdown_on_signal()
        .run(
            traced("run", q.clone(), runs::reconcile),
            error_policy("run"),
            ctx.clone(),
        )
        .for_each(log_result("run", q))
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

/// The queue whose depth `controller`'s gauge shows.
fn queue_of(ctx: &Context, controller: &'static str) -> Arc<Queue> {
    Queue::new(
        ctx.metrics
            .queue_depth
            .get_or_create(&metrics::ControllerLabels { controller })
            .clone(),
    )
}

/// Reconciles each controller runs at once.
fn config(ctx: &Context) -> Config {
    Config::default().concurrency(ctx.options.concurrency)
}

/// Wraps a reconciler: a span per reconcile naming the object, its count and duration in the
/// metrics, the object out of the queue, and the object's backoff forgotten once it
/// reconciles. A failure is told on the object: a Warning Event whose reason is its category
/// (the metric's label, see `error`), saying what failed.
fn traced<K, F, Fut>(
    controller: &'static str,
    queue: Arc<Queue>,
    reconcile: F,
) -> impl FnMut(Arc<K>, Arc<Context>) -> futures::future::BoxFuture<'static, Result<Action, Error>>
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<Context>) -> Fut + Send + Sync + Copy + 'static,
    Fut: std::future::Future<Output = Result<Action, Error>> + Send + 'static,
{
    move |object: Arc<K>, ctx: Arc<Context>| {
        queue.started(&queue::key(
            object.namespace().as_deref(),
            &object.name_any(),
        ));
        let key = retry::key(object.as_ref());
        let reference = object.object_ref(&());
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
                match &result {
                    Ok(_) => ctx.backoff.forget(&key),
                    Err(err) => {
                        let (reason, note) = (err.category(), err.summary());
                        ctx.event_on(&reference, true, reason, "Reconcile", note)
                            .await
                    }
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

/// What became of each reconcile, at debug level; an object woken but gone leaves the queue.
fn log_result<T: std::fmt::Debug, E: std::error::Error, Q: std::error::Error>(
    controller: &'static str,
    queue: Arc<Queue>,
) -> impl FnMut(Result<T, ControllerError<E, Q>>) -> futures::future::Ready<()> {
    move |result| {
        match result {
            Ok(object) => tracing::debug!(controller, ?object, "reconciled"),
            Err(err) => {
                if let ControllerError::ObjectNotFound(object) = &err {
                    queue.gone(object);
                }
                tracing::debug!(controller, %err, "reconcile error")
            }
        }
        futures::future::ready(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tests::fixtures::{NS, World, path, to_json};
    use crate::tests::verifier::{Answer, Call};

    // The failure of a step is told on the object, its category as the Event's reason: the
    // same name the failures metric counts it by.
    #[tokio::test]
    async fn a_failed_reconcile_is_told_in_an_event_named_by_its_category() {
        let world = World::echo();
        let (ctx, server) = world.context();
        let verifier = server.expect(vec![
            Call::status(path("projects", "proj"), to_json(&world.projects[0]))
                .answer(Answer::Fail(409, "Conflict")),
            Call::event(NS, "status").body(|b| {
                assert_eq!(b["type"], "Warning");
                assert_eq!(b["action"], "Reconcile");
                assert_eq!(
                    b["note"],
                    "writing the status of Project proj: refused: Conflict (409)"
                );
            }),
        ]);
        let q = queue_of(&ctx, "project");
        let mut reconcile = traced("project", q, project::reconcile);
        let err = reconcile(Arc::new(world.projects[0].clone()), ctx)
            .await
            .expect_err("the status write was refused");
        assert_eq!(err.category(), "status");
        verifier.done().await;
    }
}

//! The Channel reconciler: keeps one PluginInstance (and its /data claim) per plugin the chat's
//! project enables, and the CronJobs of a desktop channel's scheduled actions.
//!
//! A reconcile is a pipeline of named steps, as the instance's is; the deciding and building
//! ones are pure (`desired`, `status`, and `plan` beneath them), the ones in this file read the
//! stores or write:
//!
//! 0. [`auto_delete`]: a worktree task's thread whose Auto-delete time has come is deleted
//!    (`model::task::expiry` decides), with an Event on its channel; one whose time is to
//!    come is looked at again then;
//! 1. [`gather`]: what the chat depends on, from the stores (HostConfig, its Project and trust,
//!    the installed plugins, its instances, claims, CronJobs and their Pods, and its status as
//!    last written); nothing is written;
//! 2. `desired::plan`: the plugins enabled here, the tasks to apply and keep, the entries to
//!    record; a chat whose enabled plugins await admission's verdict waits for it;
//! 3. `desired::desired`: its children, built, each beside what the cache shows;
//! 4. [`sync`]: the claims and instances written, those of plugins no longer enabled deleted
//!    (with their Pods), the CronJobs written and those not kept deleted, each with its Event;
//! 5. [`write_status`]: the status `status::desired_status` derives from the plan and what the
//!    writes did, written when it changed, with an Event for a condition that turned False.
//!
//! Every write is tried: one that fails (a CronJob the API server refuses, a conflict) does not
//! stop the others or the status, which names it; the reconcile then fails with it, so it is
//! tried again (see `error::Failures`).

mod desired;
mod status;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::CronJob;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::context::Context;
use super::error::{Failures, GatherError, Result};
use super::plan::PluginFacts;
use super::write::StatusWrite;
#[cfg(test)]
pub(crate) use desired::desired_instance;
use desired::{Desired, Facts};
use index::compact;
use model::names;
use model::resources::{Channel, ChannelStatus, Project, ProjectTrust};
use model::task::Expiry;
use model::time::rfc3339;

/// How long a chat waiting for admission's verdict waits before it looks again anyway.
const WAIT_FOR_ADMISSION: std::time::Duration = std::time::Duration::from_secs(60);

pub async fn reconcile(channel: Arc<Channel>, ctx: Arc<Context>) -> Result<Action> {
    let ns = channel
        .namespace()
        .ok_or_else(|| GatherError::NoNamespace(channel.name_any()))?;
    if channel.meta().deletion_timestamp.is_some() {
        // Owner references take what hung from it.
        ctx.writes.forget_status(channel.as_ref());
        return Ok(Action::await_change());
    }
    let now = jiff::Timestamp::now();
    let requeue = match auto_delete(&ctx, &channel, now).await? {
        None => return Ok(Action::await_change()),
        Some(requeue) => requeue,
    };
    let facts = gather(&ctx, &channel, &ns)?;
    let plan = desired::plan(&facts, now);
    if plan.waits() {
        tracing::debug!(awaiting = ?plan.awaiting, "waiting for admission's verdict on enabled plugins");
        // The verdict brings the chat back; the requeue is for a verdict that never comes.
        return Ok(Action::requeue(WAIT_FOR_ADMISSION));
    }
    let desired = desired::desired(&facts, &plan);
    let mut failures = Failures::default();
    let not_applied = sync(&ctx, &channel, &desired, &mut failures).await;
    let applied = status::applied(&plan, &facts.status.applied_schedules, &not_applied);
    let status = status::desired_status(
        &channel,
        &facts.status,
        &plan,
        applied,
        &failures,
        &rfc3339(now),
    );
    write_status(&ctx, &channel, &ns, &facts.status, &status).await?;
    failures.into_result()?;
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// Step 0: deletes a worktree task's thread whose Auto-delete time has come (None: deleted,
/// nothing more to do); otherwise when to look again for it, if ever.
async fn auto_delete(
    ctx: &Context,
    channel: &Channel,
    now: jiff::Timestamp,
) -> Result<Option<Option<std::time::Duration>>> {
    match model::task::expiry(channel, now) {
        Expiry::Never => Ok(Some(None)),
        Expiry::At(at) => {
            let wait = at.duration_since(now).unsigned_abs();
            Ok(Some(Some(wait + std::time::Duration::from_millis(200))))
        }
        Expiry::Due => {
            ctx.writes.delete(channel).await?;
            let task = channel
                .labels()
                .get(model::task::LABEL_TASK)
                .cloned()
                .unwrap_or_default();
            let note = format!(
                "the worktree thread {} of task {task} was deleted: its Auto-delete time came",
                channel.name_any()
            );
            tracing::info!(thread = %channel.name_any(), %task, "auto-delete");
            // Said on the channel the thread belongs to, which outlives it.
            let mut regarding = channel.object_ref(&());
            if let Some(parent) = &channel.spec.parent {
                regarding.name = Some(parent.clone());
                regarding.uid = None;
                regarding.resource_version = None;
            }
            ctx.event_on(&regarding, false, "AutoDeleted", "DeleteThread", note)
                .await;
            Ok(None)
        }
    }
}

/// Reads what the chat's reconcile decides from, from the stores.
fn gather<'a>(ctx: &'a Context, channel: &'a Channel, ns: &'a str) -> Result<Facts<'a>> {
    let stores = &ctx.stores;
    let name = channel.name_any();
    let host = ctx.host();
    let project = stores
        .projects
        .get(&ObjectRef::<Project>::new(&channel.spec.project).within(ns));
    let trust = stores
        .project_trusts
        .get(&ObjectRef::<ProjectTrust>::new(&channel.spec.project).within(ns));
    let installed = stores.plugins.state();
    let plugins =
        PluginFacts::installed(&host, installed.iter().map(|p| p.as_ref()), &ctx.manifests);
    let instances: Vec<_> = stores
        .instances
        .state()
        .into_iter()
        .filter(|i| i.metadata.namespace.as_deref() == Some(ns) && i.spec.channel == name)
        .collect();
    // By name: a claim whose owner was edited away is still found, and put right.
    let mut claims = BTreeMap::new();
    for plugin in &plugins {
        let claim_name = names::data_claim_name(&plugin.name, &name);
        if let Some(claim) = compact::get(&stores.claims, &claim_name, ns)? {
            claims.insert(claim_name, claim);
        }
    }
    let cronjobs: Vec<CronJob> = stores
        .cronjobs
        .state()
        .into_iter()
        .filter(|c| {
            c.meta().namespace.as_deref() == Some(ns)
                && c.owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.kind == "Channel" && o.name == name)
        })
        .map(|c| c.typed())
        .collect::<Result<_, _>>()?;
    let instance_names: BTreeSet<String> = instances.iter().map(|i| i.name_any()).collect();
    let pods = stores
        .pods
        .state()
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns)
                && p.labels()
                    .get(names::LABEL_INSTANCE)
                    .is_some_and(|i| instance_names.contains(i))
        })
        .collect();
    // What the cache holds, unless it still shows the very version this controller last wrote
    // over: then what it wrote. Without this, a reconcile right after a status write could
    // miss the schedule entries it just recorded and apply a CronJob someone deleted by hand
    // again.
    let status: ChannelStatus = ctx
        .writes
        .kept_status(channel)
        .unwrap_or_else(|| channel.status.clone().unwrap_or_default());
    let api_url = ctx.api_url(&host);
    Ok(Facts {
        channel,
        namespace: ns,
        host,
        project,
        trust,
        plugins,
        instances,
        claims,
        cronjobs,
        pods,
        status,
        self_image: &ctx.options.self_image,
        api_url,
    })
}

/// Writes the chat's children: each enabled plugin's claim and instance, the instances of
/// plugins no longer enabled deleted (their Pods too), the CronJobs applied and those not kept
/// deleted. A failed write is kept in `failures` and the others go on. Returns the (plugin,
/// action) of the CronJobs that could not be applied.
async fn sync(
    ctx: &Context,
    channel: &Channel,
    desired: &Desired<'_>,
    failures: &mut Failures,
) -> BTreeSet<(String, String)> {
    // Each plugin's claim and instance are independent of the others': they are written at
    // once (the write door's turns still bound what is in flight).
    let writes = desired.plugins.iter().map(|p| async move {
        let (claim, instance) = futures::join!(
            ctx.writes.apply(&p.claim, p.live_claim),
            ctx.writes.apply(&p.instance, p.live_instance),
        );
        (
            p.plugin,
            claim,
            instance.map(|w| w && p.live_instance.is_none()),
        )
    });
    let mut made = Vec::new();
    for (plugin, claim, made_instance) in futures::future::join_all(writes).await {
        failures.check(claim);
        if failures.check(made_instance) == Some(true) {
            made.push(plugin);
        }
    }
    // One Event for the plugins that start running here, not one each: at a cold start every
    // chat gets its plugins at once, and each Event is a write.
    if !made.is_empty() {
        let note = match made.as_slice() {
            [one] => format!("plugin {one} runs in this chat"),
            many => format!("plugins {} run in this chat", many.join(", ")),
        };
        ctx.event(channel, false, "PluginEnabled", "CreateInstance", note)
            .await;
    }
    for (instance, pods) in &desired.gone {
        if failures.check(ctx.writes.delete(*instance).await) != Some(true) {
            continue;
        }
        for pod in pods {
            failures.check(ctx.writes.delete(*pod).await);
        }
        let note = format!(
            "plugin {} no longer runs in this chat",
            instance.spec.plugin
        );
        ctx.event(channel, false, "PluginDisabled", "DeleteInstance", note)
            .await;
    }
    let writes = desired
        .tasks
        .iter()
        .map(|task| async move { (&task.key, ctx.writes.apply(&task.desired, task.live).await) });
    let mut not_applied = BTreeSet::new();
    for (key, result) in futures::future::join_all(writes).await {
        if failures.check(result).is_none() {
            not_applied.insert(key.clone());
        }
    }
    for cronjob in &desired.stale {
        failures.check(ctx.writes.delete(*cronjob).await);
    }
    not_applied
}

/// Writes `status` unless the part of the live status we own already is it (`before`); an
/// Event for each condition that turned False (or changed its message while False).
async fn write_status(
    ctx: &Context,
    channel: &Channel,
    ns: &str,
    before: &ChannelStatus,
    status: &ChannelStatus,
) -> Result<()> {
    let api: Api<Channel> = Api::namespaced(ctx.client.clone(), ns);
    ctx.writes
        .status(&api, channel, Some(before), status, StatusWrite::Kept)
        .await?;
    for (kind, warning, action) in [
        ("SchedulesValid", true, "ApplySchedules"),
        ("Applied", true, "Apply"),
    ] {
        if let Some(condition) = status::turned_false(before, status, kind) {
            ctx.event(
                channel,
                warning,
                &condition.reason,
                action,
                condition.message.clone(),
            )
            .await;
        }
    }
    Ok(())
}

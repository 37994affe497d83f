//! The Channel reconciler: keeps one PluginInstance (and its /data claim) per plugin the chat's
//! project enables, and the CronJobs of a desktop channel's scheduled actions.
//!
//! Every write is tried: one that fails (a CronJob the API server refuses, a conflict) does not
//! stop the others or the status, which names it; the reconcile then fails with it, so it is
//! tried again (see `error::Failures`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::CronJob;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::Context;
use super::cronjob::{CronJobInputs, build_cronjob, existing_task};
use super::error::{Error, Failures, Result};
use super::plan::{ChatInputs, ChatPlan, ExistingTask, PluginFacts, PluginView, plan_chat};
use super::pod::build_data_claim;
use index::compact;
use model::names;
use model::resources::{
    AppliedSchedule, Channel, ChannelStatus, Condition, ConditionStatus, PluginInstance,
    PluginInstanceSpec, Project, ProjectTrust, set_condition,
};
use model::time::rfc3339;

/// How long a chat waiting for admission's verdict waits before it looks again anyway.
const WAIT_FOR_ADMISSION: std::time::Duration = std::time::Duration::from_secs(60);

pub async fn reconcile(channel: Arc<Channel>, ctx: Arc<Context>) -> Result<Action> {
    let ns = channel
        .namespace()
        .ok_or_else(|| Error::NoNamespace(channel.name_any()))?;
    let name = channel.name_any();
    if channel.meta().deletion_timestamp.is_some() {
        // Owner references take what hung from it.
        ctx.writes.forget_status(channel.as_ref());
        return Ok(Action::await_change());
    }
    let host = ctx.host();
    let project = ctx
        .stores
        .projects
        .get(&ObjectRef::<Project>::new(&channel.spec.project).within(&ns));
    let trust = ctx
        .stores
        .project_trusts
        .get(&ObjectRef::<ProjectTrust>::new(&channel.spec.project).within(&ns));

    let plugins = ctx.stores.plugins.state();
    let facts = PluginFacts::installed(&host, plugins.iter().map(|p| p.as_ref()), &ctx.manifests);
    let views: Vec<PluginView> = facts.iter().map(PluginFacts::view).collect();

    let cronjobs: Vec<CronJob> = ctx
        .stores
        .cronjobs
        .state()
        .into_iter()
        .filter(|c| {
            c.meta().namespace.as_deref() == Some(ns.as_str())
                && c.owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.kind == "Channel" && o.name == name)
        })
        .map(|c| c.typed())
        .collect::<Result<_, _>>()?;
    let existing: BTreeMap<(String, String), ExistingTask> =
        cronjobs.iter().filter_map(existing_task).collect();
    // What the cache holds, unless it still shows the very version this controller last wrote
    // over: then what it wrote. Without this, a reconcile right after a status write could
    // miss the schedule entries it just recorded and apply a CronJob someone deleted by hand
    // again.
    let current_status: ChannelStatus = ctx
        .writes
        .kept_status(channel.as_ref())
        .unwrap_or_else(|| channel.status.clone().unwrap_or_default());
    let now = jiff::Timestamp::now();
    let plan = plan_chat(&ChatInputs {
        channel: &channel.spec,
        project: project
            .as_deref()
            .map(|p| model::resolve::ProjectView::new(p, trust.as_deref())),
        host: &host,
        plugins: &views,
        existing_cronjobs: &existing,
        applied: &current_status.applied_schedules,
        now,
    });

    if plan.waits() {
        tracing::debug!(awaiting = ?plan.awaiting, "waiting for admission's verdict on enabled plugins");
        // The verdict brings the chat back; the requeue is for a verdict that never comes.
        return Ok(Action::requeue(WAIT_FOR_ADMISSION));
    }
    let mut failures = Failures::default();
    sync_instances(&ctx, &channel, &ns, &plan, &mut failures).await;
    let applied = sync_tasks(
        &ctx,
        &channel,
        &ns,
        &plan,
        &cronjobs,
        &current_status.applied_schedules,
        &mut failures,
    )
    .await;

    let status = desired_status(
        &channel,
        &current_status,
        &plan,
        applied,
        &failures,
        &rfc3339(now),
    );
    let api: Api<Channel> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.writes
        .status_kept(&api, channel.as_ref(), Some(&current_status), &status)
        .await?;
    for (kind, warning, action) in [
        ("SchedulesValid", true, "ApplySchedules"),
        ("Applied", true, "Apply"),
    ] {
        if let Some(condition) = turned_false(&current_status, &status, kind) {
            ctx.event(
                channel.as_ref(),
                warning,
                &condition.reason,
                action,
                condition.message.clone(),
            )
            .await;
        }
    }
    failures.into_result()?;
    Ok(Action::await_change())
}

/// One PluginInstance and one /data claim per enabled plugin; instances of plugins no longer
/// enabled go, with their containers.
async fn sync_instances(
    ctx: &Context,
    channel: &Channel,
    ns: &str,
    plan: &ChatPlan,
    failures: &mut Failures,
) {
    let name = channel.name_any();
    let owner = channel
        .controller_owner_ref(&())
        .expect("channels have a uid");
    let project = &channel.spec.project;
    let instances: Vec<Arc<PluginInstance>> = ctx
        .stores
        .instances
        .state()
        .into_iter()
        .filter(|i| i.metadata.namespace.as_deref() == Some(ns) && i.spec.channel == name)
        .collect();
    // Each plugin's claim and instance are independent of the others': they are written at
    // once (the controller's write limit still bounds what is in flight, see `Context`).
    let writes = plan.enabled.iter().map(|plugin| {
        let owner = owner.clone();
        let name = &name;
        let instances = &instances;
        async move {
            let claim = build_data_claim(plugin, project, name, ns, owner.clone());
            let claim_name = names::data_claim_name(plugin, name);
            let instance = desired_instance(plugin, project, name, ns, owner);
            let live = instances
                .iter()
                .find(|i| i.name_any() == instance.name_any());
            let (claim, wrote) = futures::join!(
                async {
                    let live = compact::get(&ctx.stores.claims, &claim_name, ns)?;
                    ctx.writes.apply(&claim, live.as_ref()).await
                },
                ctx.writes.apply(&instance, live.map(|i| i.as_ref())),
            );
            (plugin.as_str(), claim, wrote.map(|w| w && live.is_none()))
        }
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
    for instance in &instances {
        if plan.enabled.contains(&instance.spec.plugin) {
            continue;
        }
        if failures.check(ctx.writes.delete(instance.as_ref()).await) != Some(true) {
            continue;
        }
        // Stop its container now rather than when garbage collection gets to it.
        for pod in ctx.stores.pods.state() {
            if pod.metadata.namespace.as_deref() == Some(ns)
                && pod.labels().get(names::LABEL_INSTANCE) == Some(&instance.name_any())
            {
                failures.check(ctx.writes.delete(pod.as_ref()).await);
            }
        }
        ctx.event(
            channel,
            false,
            "PluginDisabled",
            "DeleteInstance",
            format!(
                "plugin {} no longer runs in this chat",
                instance.spec.plugin
            ),
        )
        .await;
    }
}

/// Applies the planned CronJobs and deletes those not kept. Returns the entries to record as
/// applied: the plan's, except that an entry whose CronJob could not be applied keeps the
/// record it had, so it is applied again rather than counted as done.
async fn sync_tasks(
    ctx: &Context,
    channel: &Channel,
    ns: &str,
    plan: &ChatPlan,
    cronjobs: &[CronJob],
    applied_before: &[AppliedSchedule],
    failures: &mut Failures,
) -> Vec<AppliedSchedule> {
    let name = channel.name_any();
    let owner = channel
        .controller_owner_ref(&())
        .expect("channels have a uid");
    let host = ctx.host();
    let api_url = ctx.api_url(&host);
    let writes = plan.schedules.iter().map(|schedule| {
        let desired = build_cronjob(&CronJobInputs {
            plugin: &schedule.plugin,
            project: &channel.spec.project,
            channel: &name,
            namespace: ns,
            action: &schedule.action,
            timing: &schedule.timing,
            suspend: schedule.suspend,
            entry_hash: &schedule.entry_hash,
            entry_enabled: schedule.entry_enabled,
            self_image: &ctx.options.self_image,
            api_url: &api_url,
            owner: owner.clone(),
        });
        let live = cronjobs
            .iter()
            .find(|c| c.metadata.name == desired.metadata.name);
        async move {
            let result = ctx.writes.apply(&desired, live).await;
            (schedule, result)
        }
    });
    let mut not_applied = BTreeSet::new();
    for (schedule, result) in futures::future::join_all(writes).await {
        if failures.check(result).is_none() {
            not_applied.insert((schedule.plugin.clone(), schedule.action.clone()));
        }
    }
    for cronjob in cronjobs {
        if existing_task(cronjob)
            .map(|(key, _)| key)
            .is_none_or(|key| !plan.keep.contains(&key))
        {
            failures.check(ctx.writes.delete(cronjob).await);
        }
    }
    let key = |r: &AppliedSchedule| (r.plugin.clone(), r.action.clone());
    let mut applied: Vec<AppliedSchedule> = plan
        .applied
        .iter()
        .filter(|r| !not_applied.contains(&key(r)))
        .chain(
            applied_before
                .iter()
                .filter(|r| not_applied.contains(&key(r))),
        )
        .cloned()
        .collect();
    applied.sort();
    applied.dedup();
    applied
}

/// The chat's status: the plugins that run in it, the entries applied, whether every entry
/// is valid, and whether every write went through.
fn desired_status(
    channel: &Channel,
    current: &ChannelStatus,
    plan: &ChatPlan,
    applied: Vec<AppliedSchedule>,
    failures: &Failures,
    now: &str,
) -> ChannelStatus {
    let mut conditions = current.conditions.clone();
    let condition = |r#type: &str, ok: bool, reason: &str, message: String| Condition {
        r#type: r#type.into(),
        status: if ok {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        observed_generation: channel.metadata.generation,
        last_transition_time: now.into(),
        reason: reason.into(),
        message,
    };
    set_condition(
        &mut conditions,
        if plan.problems.is_empty() {
            condition(
                "SchedulesValid",
                true,
                "SchedulesApplied",
                "every schedule entry is applied".into(),
            )
        } else {
            condition(
                "SchedulesValid",
                false,
                "InvalidSchedule",
                plan.problems.join("; "),
            )
        },
    );
    set_condition(
        &mut conditions,
        if failures.is_empty() {
            condition(
                "Applied",
                true,
                "Applied",
                "every instance, data volume and task of this chat is as planned".into(),
            )
        } else {
            condition("Applied", false, "ApplyFailed", failures.to_string())
        },
    );
    ChannelStatus {
        observed_generation: channel.metadata.generation,
        plugins: plan.enabled.clone(),
        applied_schedules: applied,
        conditions,
    }
}

/// The condition of type `kind` when it turned False or its message changed while False.
fn turned_false<'a>(
    before: &ChannelStatus,
    after: &'a ChannelStatus,
    kind: &str,
) -> Option<&'a Condition> {
    let find = |s: &ChannelStatus| s.conditions.iter().find(|c| c.r#type == kind).cloned();
    let now = after.conditions.iter().find(|c| c.r#type == kind)?;
    let was = find(before);
    (now.status == ConditionStatus::False
        && was.is_none_or(|w| w.status != ConditionStatus::False || w.message != now.message))
    .then_some(now)
}

pub(crate) fn desired_instance(
    plugin: &str,
    project: &str,
    channel: &str,
    ns: &str,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> PluginInstance {
    let mut instance = PluginInstance::new(
        &names::instance_name(plugin, channel),
        PluginInstanceSpec {
            plugin: plugin.into(),
            channel: channel.into(),
            project: project.into(),
        },
    );
    instance.metadata.namespace = Some(ns.into());
    instance.metadata.labels = Some(names::labels(plugin, project, channel, "instance"));
    instance.metadata.owner_references = Some(vec![owner]);
    instance
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fixtures;
    use index::manifests::Manifests;
    use model::resources::Plugin;

    const T1: &str = "2026-01-01T10:00:00Z";

    /// The plan of `general` in [`fixtures::World::echo`], with `plugin` installed.
    fn plan(plugin: Plugin) -> ChatPlan {
        let host = fixtures::host().spec;
        let (project, trust) = (fixtures::project(true), fixtures::trust(true));
        let channel = fixtures::channel("general");
        let facts = PluginFacts::installed(&host, [&plugin], &Manifests::default());
        let views: Vec<PluginView> = facts.iter().map(PluginFacts::view).collect();
        plan_chat(&ChatInputs {
            channel: &channel.spec,
            project: Some(model::resolve::ProjectView::new(&project, Some(&trust))),
            host: &host,
            plugins: &views,
            existing_cronjobs: &BTreeMap::new(),
            applied: &[],
            now: T1.parse().expect("a timestamp"),
        })
    }

    /// The chat's status, whole, as a reviewer reads it (`src/snapshots/`): echo running with
    /// its task applied; then echo without its `schedule` capability approved, and a write
    /// the API server refused.
    #[test]
    fn the_status_snapshot() {
        let channel = fixtures::channel("general");
        let applied = plan(fixtures::echo_plugin());
        let status = desired_status(
            &channel,
            &ChannelStatus::default(),
            &applied,
            applied.applied.clone(),
            &Failures::default(),
            T1,
        );
        insta::assert_yaml_snapshot!("channel_status_applied", status);

        let unscheduled = plan(fixtures::plugin_with(
            fixtures::echo_manifest(),
            &["ui.composer_switch"],
        ));
        let mut failures = Failures::default();
        failures.check::<()>(Err(Error::Create {
            kind: "PluginInstance",
            name: "echo-general".into(),
            source: kube::Error::Api(
                kube::core::Status::failure("refused: Invalid", "Invalid")
                    .with_code(422)
                    .boxed(),
            ),
        }));
        insta::assert_yaml_snapshot!(
            "channel_status_not_applied",
            desired_status(
                &channel,
                &status,
                &unscheduled,
                unscheduled.applied.clone(),
                &failures,
                "2026-01-01T11:00:00Z",
            )
        );
    }
}

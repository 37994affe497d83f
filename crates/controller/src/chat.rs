//! The Channel reconciler: keeps one PluginInstance (and its /data claim) per plugin the chat's
//! project enables, and the CronJobs of a desktop channel's scheduled actions.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::CronJob;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::Context;
use super::admission;
use super::apply;
use super::cronjob::{CronJobInputs, build_cronjob};
use super::error::{Error, Result};
use super::plan::{ChatInputs, PluginView, plan_chat};
use super::pod::{build_data_claim, with_applied_hash};
use model::manifest::Manifest;
use model::names;
use model::resources::{
    Channel, ChannelStatus, Condition, ConditionStatus, PluginInstance, PluginInstanceSpec,
    Project, ProjectTrust, set_condition,
};
use model::time::now_rfc3339;

pub async fn reconcile(channel: Arc<Channel>, ctx: Arc<Context>) -> Result<Action> {
    let ns = channel
        .namespace()
        .ok_or_else(|| Error::NoNamespace(channel.name_any()))?;
    let name = channel.name_any();
    if channel.meta().deletion_timestamp.is_some() {
        // Owner references take what hung from it.
        ctx.forget_chat(&channel);
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

    // Installed plugins; one being deleted counts as removed.
    let plugins: Vec<_> = ctx
        .stores
        .plugins
        .state()
        .into_iter()
        .filter(|p| p.meta().deletion_timestamp.is_none())
        .collect();
    let admissions: Vec<(String, Option<Manifest>, bool)> = plugins
        .iter()
        .map(|p| {
            let parsed = model::manifest::from_value(&p.spec.manifest.to_json()).ok();
            let admitted = admission::admit(&host, p).is_ok();
            (p.name_any(), parsed, admitted)
        })
        .collect();
    let views: Vec<PluginView> = admissions
        .iter()
        .map(|(name, manifest, admitted)| PluginView {
            name,
            manifest: manifest.as_ref(),
            admitted: *admitted,
        })
        .collect();

    let mine = |labels: &std::collections::BTreeMap<String, String>, object_ns: Option<String>| {
        object_ns.as_deref() == Some(ns.as_str()) && labels.get(names::LABEL_CHANNEL) == Some(&name)
    };
    let cronjobs: Vec<Arc<CronJob>> = ctx
        .stores
        .cronjobs
        .state()
        .into_iter()
        .filter(|c| mine(c.labels(), c.namespace()))
        .collect();
    let existing: BTreeSet<(String, String)> =
        cronjobs.iter().filter_map(|c| cronjob_key(c)).collect();
    let current_status = ctx.chat_status(&channel);
    let plan = plan_chat(&ChatInputs {
        channel: &channel.spec,
        project: project
            .as_deref()
            .map(|p| model::resolve::ProjectView::new(p, trust.as_deref())),
        host: &host,
        plugins: &views,
        existing_cronjobs: &existing,
        applied: &current_status.applied_schedules,
    });

    let chat_owner = channel
        .controller_owner_ref(&())
        .expect("channels have a uid");
    let project_name = &channel.spec.project;

    // Instances and their data volumes.
    let instances: Vec<Arc<PluginInstance>> = ctx
        .stores
        .instances
        .state()
        .into_iter()
        .filter(|i| i.namespace().as_deref() == Some(&ns) && i.spec.channel == name)
        .collect();
    for plugin in &plan.enabled {
        let claim = build_data_claim(plugin, project_name, &name, &ns, chat_owner.clone());
        let live_claim = ctx
            .stores
            .claims
            .get(&ObjectRef::new(&names::data_claim_name(plugin, &name)).within(&ns));
        apply::apply(&ctx, &claim, live_claim.as_deref()).await?;

        let instance = desired_instance(plugin, project_name, &name, &ns, chat_owner.clone());
        let live = instances
            .iter()
            .find(|i| i.name_any() == instance.name_any());
        if apply::apply(&ctx, &instance, live.map(|i| i.as_ref())).await? && live.is_none() {
            ctx.event(
                channel.as_ref(),
                false,
                "PluginEnabled",
                "CreateInstance",
                format!("plugin {plugin} runs in this chat"),
            )
            .await;
        }
    }
    for instance in &instances {
        if !plan.enabled.contains(&instance.spec.plugin) {
            if !apply::delete(&ctx, instance.as_ref()).await? {
                continue;
            }
            // Stop its container now rather than when garbage collection gets to it.
            for pod in ctx.stores.pods.state() {
                if pod.namespace().as_deref() == Some(&ns)
                    && pod.labels().get(names::LABEL_INSTANCE) == Some(&instance.name_any())
                {
                    apply::delete(&ctx, pod.as_ref()).await?;
                }
            }
            ctx.event(
                channel.as_ref(),
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

    // CronJobs.
    let api_url = ctx.api_url(&host);
    for schedule in &plan.schedules {
        let desired = build_cronjob(&CronJobInputs {
            plugin: &schedule.plugin,
            project: project_name,
            channel: &name,
            namespace: &ns,
            action: &schedule.action,
            cron: &schedule.cron,
            suspend: schedule.suspend,
            entry_hash: &schedule.entry_hash,
            self_image: &ctx.settings.self_image,
            api_url: &api_url,
            owner: chat_owner.clone(),
        });
        let live = cronjobs
            .iter()
            .find(|c| c.metadata.name == desired.metadata.name);
        apply::apply(&ctx, &desired, live.map(|c| c.as_ref())).await?;
    }
    for cronjob in &cronjobs {
        if cronjob_key(cronjob).is_none_or(|key| !plan.keep.contains(&key)) {
            apply::delete(&ctx, cronjob.as_ref()).await?;
        }
    }

    // Status.
    let mut conditions = current_status.conditions.clone();
    let (status, reason, message) = if plan.problems.is_empty() {
        (
            ConditionStatus::True,
            "SchedulesApplied",
            "every schedule entry is applied".to_string(),
        )
    } else {
        (
            ConditionStatus::False,
            "InvalidSchedule",
            plan.problems.join("; "),
        )
    };
    let flipped_to_invalid = !plan.problems.is_empty()
        && !conditions.iter().any(|c| {
            c.r#type == "SchedulesValid"
                && c.status == ConditionStatus::False
                && c.message == message
        });
    set_condition(
        &mut conditions,
        Condition {
            r#type: "SchedulesValid".into(),
            status,
            observed_generation: channel.metadata.generation,
            last_transition_time: now_rfc3339(),
            reason: reason.into(),
            message: message.clone(),
        },
    );
    let status = ChannelStatus {
        observed_generation: channel.metadata.generation,
        plugins: plan.enabled.clone(),
        applied_schedules: plan.applied.clone(),
        conditions,
    };
    let api: Api<Channel> = Api::namespaced(ctx.client.clone(), &ns);
    if apply::status(&ctx, &api, &name, Some(&current_status), &status).await? {
        ctx.wrote_chat_status(&channel, status.clone());
    }
    if flipped_to_invalid {
        ctx.event(
            channel.as_ref(),
            true,
            "InvalidSchedule",
            "ApplySchedules",
            message,
        )
        .await;
    }
    Ok(Action::await_change())
}

fn cronjob_key(cronjob: &CronJob) -> Option<(String, String)> {
    let labels = cronjob.labels();
    Some((
        labels.get(names::LABEL_PLUGIN)?.clone(),
        labels.get(names::LABEL_ACTION)?.clone(),
    ))
}

fn desired_instance(
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
    with_applied_hash(instance)
}

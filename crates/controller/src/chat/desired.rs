//! What a chat should have, decided and built from the facts `chat::gather` read: the plan
//! (`plan::plan_chat`: the plugins enabled here, the tasks to apply and keep, the entries to
//! record), and the children it makes of it, each beside what the cache shows of it. Pure: no
//! client and no store.
//!
//! | child | one per | built by |
//! |---|---|---|
//! | /data claim | plugin enabled here | `pod::build_data_claim` |
//! | PluginInstance | plugin enabled here | [`desired_instance`] |
//! | CronJob | scheduled action kept (`ChatPlan::schedules`) | `cronjob::build_cronjob` |
//!
//! The instances of plugins no longer enabled go, with their Pods; the CronJobs not kept go.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};

use crate::cronjob::{CronJobInputs, build_cronjob, existing_task};
use crate::plan::{ChatInputs, ChatPlan, ExistingTask, PluginFacts, PluginView, plan_chat};
use crate::pod::build_data_claim;
use model::names;
use model::resources::{
    Channel, ChannelStatus, HostConfigSpec, PluginInstance, PluginInstanceSpec, Project,
    ProjectTrust,
};

/// What one reconcile of a chat decides from (read by `chat::gather`).
pub struct Facts<'a> {
    pub channel: &'a Channel,
    pub namespace: &'a str,
    pub host: HostConfigSpec,
    pub project: Option<Arc<Project>>,
    /// The project's trust (the ProjectTrust of its name).
    pub trust: Option<Arc<ProjectTrust>>,
    /// The installed plugins, as the plan reads them.
    pub plugins: Vec<PluginFacts>,
    /// Its instances, as the cache shows them.
    pub instances: Vec<Arc<PluginInstance>>,
    /// The /data claims of its installed plugins, by name, as the cache shows them.
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    /// Its CronJobs (those it owns), as the cache shows them.
    pub cronjobs: Vec<CronJob>,
    /// Its instances' Pods.
    pub pods: Vec<Arc<Pod>>,
    /// Its status as this controller last wrote it (see `chat::gather`).
    pub status: ChannelStatus,
    /// Our own image: the CronJobs run `trigger` from it.
    pub self_image: &'a str,
    /// Where the host API answers, for the CronJobs.
    pub api_url: String,
}

/// The chat's plan at `now`.
pub fn plan(facts: &Facts, now: jiff::Timestamp) -> ChatPlan {
    let views: Vec<PluginView> = facts.plugins.iter().map(PluginFacts::view).collect();
    let existing: BTreeMap<(String, String), ExistingTask> =
        facts.cronjobs.iter().filter_map(existing_task).collect();
    plan_chat(&ChatInputs {
        channel: &facts.channel.spec,
        project: facts
            .project
            .as_deref()
            .map(|p| model::resolve::ProjectView::new(p, facts.trust.as_deref())),
        host: &facts.host,
        plugins: &views,
        existing_cronjobs: &existing,
        applied: &facts.status.applied_schedules,
        now,
    })
}

/// An enabled plugin's children here, each with what the cache shows.
#[derive(Debug)]
pub struct PluginChildren<'a> {
    pub plugin: &'a str,
    pub claim: PersistentVolumeClaim,
    pub live_claim: Option<&'a PersistentVolumeClaim>,
    pub instance: PluginInstance,
    pub live_instance: Option<&'a PluginInstance>,
}

/// A CronJob of a scheduled action, with what the cache shows.
#[derive(Debug)]
pub struct Task<'a> {
    /// (plugin, action).
    pub key: (String, String),
    pub desired: CronJob,
    pub live: Option<&'a CronJob>,
}

/// What the chat's children should be.
#[derive(Debug)]
pub struct Desired<'a> {
    /// Each enabled plugin's claim and instance.
    pub plugins: Vec<PluginChildren<'a>>,
    /// The instances of plugins no longer enabled, with their Pods (stopped at once rather
    /// than when garbage collection gets to them).
    pub gone: Vec<(&'a PluginInstance, Vec<&'a Pod>)>,
    /// The CronJobs to apply.
    pub tasks: Vec<Task<'a>>,
    /// The CronJobs not kept.
    pub stale: Vec<&'a CronJob>,
}

/// The children `plan` gives the chat.
pub fn desired<'a>(facts: &'a Facts, plan: &'a ChatPlan) -> Desired<'a> {
    let chat = facts.channel.name_any();
    let ns = facts.namespace;
    let project = &facts.channel.spec.project;
    let owner = facts
        .channel
        .controller_owner_ref(&())
        .expect("channels have a uid");
    let plugins = plan
        .enabled
        .iter()
        .map(|plugin| {
            let claim = build_data_claim(plugin, project, &chat, ns, owner.clone());
            let instance = desired_instance(plugin, project, &chat, ns, owner.clone());
            PluginChildren {
                plugin,
                live_claim: facts.claims.get(&claim.name_any()),
                live_instance: facts
                    .instances
                    .iter()
                    .find(|i| i.name_any() == instance.name_any())
                    .map(|i| i.as_ref()),
                claim,
                instance,
            }
        })
        .collect();
    let gone = facts
        .instances
        .iter()
        .filter(|i| !plan.enabled.contains(&i.spec.plugin))
        .map(|instance| {
            let name = instance.name_any();
            let pods = facts
                .pods
                .iter()
                .filter(|p| p.labels().get(names::LABEL_INSTANCE) == Some(&name))
                .map(|p| p.as_ref())
                .collect();
            (instance.as_ref(), pods)
        })
        .collect();
    let tasks = plan
        .schedules
        .iter()
        .map(|schedule| {
            let desired = build_cronjob(&CronJobInputs {
                plugin: &schedule.plugin,
                project,
                channel: &chat,
                namespace: ns,
                action: &schedule.action,
                timing: &schedule.timing,
                suspend: schedule.suspend,
                entry_hash: &schedule.entry_hash,
                entry_enabled: schedule.entry_enabled,
                self_image: facts.self_image,
                api_url: &facts.api_url,
                owner: owner.clone(),
                options: &schedule.options,
                working_tree: facts.channel.spec.working_tree.as_ref(),
            });
            let live = facts
                .cronjobs
                .iter()
                .find(|c| c.metadata.name == desired.metadata.name);
            Task {
                key: (schedule.plugin.clone(), schedule.action.clone()),
                desired,
                live,
            }
        })
        .collect();
    let stale = facts
        .cronjobs
        .iter()
        .filter(|cronjob| {
            existing_task(cronjob)
                .map(|(key, _)| key)
                .is_none_or(|key| !plan.keep.contains(&key))
        })
        .collect();
    Desired {
        plugins,
        gone,
        tasks,
        stale,
    }
}

/// The PluginInstance of `plugin` in chat `namespace/channel` of `project`, owned by the chat.
pub(crate) fn desired_instance(
    plugin: &str,
    project: &str,
    channel: &str,
    ns: &str,
    owner: OwnerReference,
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
    use crate::tests::fixtures::{self, NS};
    use index::manifests::Manifests;

    const T1: &str = "2026-01-01T10:00:00Z";

    /// The facts of `general` in [`fixtures::World::echo`]: nothing made yet.
    fn facts(channel: &Channel) -> Facts<'_> {
        let host = fixtures::host().spec;
        let plugins =
            PluginFacts::installed(&host, [&fixtures::echo_plugin()], &Manifests::default());
        Facts {
            channel,
            namespace: NS,
            host,
            project: Some(Arc::new(fixtures::project(true))),
            trust: Some(Arc::new(fixtures::trust(true))),
            plugins,
            instances: vec![],
            claims: BTreeMap::new(),
            cronjobs: vec![],
            pods: vec![],
            status: ChannelStatus::default(),
            self_image: "registry.local/loop-plugins@sha256:1111",
            api_url: "http://api:8080".into(),
        }
    }

    fn summary(desired: &Desired) -> Vec<String> {
        let plugins = desired.plugins.iter().map(|p| {
            format!(
                "{}: claim {} (live: {}), instance {} (live: {})",
                p.plugin,
                p.claim.name_any(),
                p.live_claim.is_some(),
                p.instance.name_any(),
                p.live_instance.is_some()
            )
        });
        let gone = desired
            .gone
            .iter()
            .map(|(i, pods)| format!("gone {} with {} Pods", i.name_any(), pods.len()));
        let tasks = desired
            .tasks
            .iter()
            .map(|t| format!("task {} (live: {})", t.desired.name_any(), t.live.is_some()));
        let stale = desired
            .stale
            .iter()
            .map(|c| format!("stale {}", c.name_any()));
        plugins.chain(gone).chain(tasks).chain(stale).collect()
    }

    #[test]
    fn an_enabled_plugin_gets_its_claim_its_instance_and_its_tasks() {
        let channel = fixtures::channel("general");
        let facts = facts(&channel);
        let plan = plan(&facts, T1.parse().unwrap());
        let desired = desired(&facts, &plan);
        assert_eq!(
            summary(&desired),
            [
                "echo: claim data-echo-general (live: false), instance echo-general (live: false)",
                "task echo-general-tick (live: false)",
            ]
        );
        let owner = &desired.plugins[0]
            .instance
            .metadata
            .owner_references
            .as_ref()
            .unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Channel", "general")
        );
    }

    #[test]
    fn a_plugin_no_longer_enabled_loses_its_instance_its_pods_and_its_tasks() {
        let channel = fixtures::channel("general");
        let made = {
            let facts = facts(&channel);
            let plan = plan(&facts, T1.parse().unwrap());
            let desired = desired(&facts, &plan);
            (
                desired.plugins[0].instance.clone(),
                desired.tasks[0].desired.clone(),
            )
        };
        let mut facts = facts(&channel);
        facts.project = Some(Arc::new(fixtures::project(false)));
        facts.trust = Some(Arc::new(fixtures::trust(false)));
        facts.instances = vec![Arc::new(fixtures::served(made.0))];
        let mut pod = Pod::default();
        pod.metadata.name = Some("echo-general-1a2b3c4d".into());
        pod.metadata.labels = Some(
            [(
                names::LABEL_INSTANCE.to_string(),
                "echo-general".to_string(),
            )]
            .into(),
        );
        facts.pods = vec![Arc::new(pod), Arc::new(Pod::default())];
        facts.cronjobs = vec![fixtures::served(made.1)];
        let plan = plan(&facts, T1.parse().unwrap());
        let desired = desired(&facts, &plan);
        // Its task is kept, paused (a project that stops enabling a plugin pauses its tasks).
        assert_eq!(
            summary(&desired),
            [
                "gone echo-general with 1 Pods",
                "task echo-general-tick (live: true)"
            ]
        );
        assert_eq!(desired.tasks[0].desired.spec.suspend, Some(true));
    }
}

//! The world a run declares: the HostConfig, the plugins (the echo plugin under several ids),
//! a trusted Project per namespace enabling every plugin with its scheduled action, and the
//! chats (desktop channels, each with a thread). Names are pure functions of the indexes, so
//! every part of a run (and the checks) can name what should exist.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use model::config::{PluginConfig, PluginsConfig, ScheduleEntry};
use model::resources::{
    App, Channel, ChannelKind, ChannelSpec, HOST_CONFIG_NAME, HostConfig, HostConfigSpec,
    HostPlugins, Plugin, Project, ProjectSpec, ProjectTrust,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::knobs::Sizes;
use testkit::images::Images;

/// The chart release the controller and the API server run as (their RBAC, their Leases).
pub const RELEASE: &str = "scale";
/// Where the release lives: its ServiceAccounts, Leases and the API replicas' records.
pub const SYSTEM_NAMESPACE: &str = "loop-plugins-system";
/// The controller's Lease (the chart's `<release>-loop-plugins-controller`).
pub const CONTROLLER_LEASE: &str = "scale-loop-plugins-controller";
/// The API replicas' fan-out Lease (the chart's `<release>-loop-plugins-api`).
pub const FANOUT_LEASE: &str = "scale-loop-plugins-api";
/// The image a Plugin names until [`declare`] publishes its own (the baseline, which only
/// plans, never publishes).
pub const UNPUBLISHED_IMAGE: &str = "unpublished.scale/echo";
/// The Project in each namespace.
pub const PROJECT: &str = "proj";
/// Who writes the declared objects.
pub const MANAGER: &str = "scale-bench";
/// The scheduled action of every plugin.
pub const ACTION: &str = "tick";
/// When it runs: once a year, so no Job starts during a run (1,500 trigger processes every
/// five minutes would swamp the machine and measure the kubelet stand-in, not us).
pub const YEARLY: &str = "7 3 2 1 *";

/// A digest that names nothing real: the stand-in plays images by repository.
pub fn digest(seed: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(seed.as_bytes()))
}

/// The namespace of project `p`.
pub fn namespace(p: usize) -> String {
    format!("sc-{p:02}")
}

/// Desktop channel `c` of a project.
pub fn channel_name(c: usize) -> String {
    format!("ch-{c:02}")
}

/// The thread of desktop channel `c`.
pub fn thread_name(c: usize) -> String {
    format!("th-{c:02}")
}

/// Plugin `i`'s id.
pub fn plugin_id(i: usize) -> String {
    format!("scale-{}", (b'a' + i as u8) as char)
}

/// Every plugin id of the world.
pub fn plugin_ids(sizes: &Sizes) -> Vec<String> {
    (0..sizes.plugins).map(plugin_id).collect()
}

/// Every project namespace.
pub fn namespaces(sizes: &Sizes) -> Vec<String> {
    (0..sizes.projects).map(namespace).collect()
}

/// A chat of the world: its namespace and name, and its channel when it is a thread.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Chat {
    pub namespace: String,
    pub name: String,
    pub parent: Option<String>,
}

/// Every chat, channels first in each namespace.
pub fn chats(sizes: &Sizes) -> Vec<Chat> {
    let mut all = Vec::with_capacity(sizes.chats());
    for p in 0..sizes.projects {
        for c in 0..sizes.channels_per_project {
            all.push(Chat {
                namespace: namespace(p),
                name: channel_name(c),
                parent: None,
            });
        }
        for c in 0..sizes.channels_per_project {
            all.push(Chat {
                namespace: namespace(p),
                name: thread_name(c),
                parent: Some(channel_name(c)),
            });
        }
    }
    all
}

/// The echo plugin as plugin `id`, its scheduled action once a year, every capability
/// approved, its tools renamed but for the first plugin's; its image is a placeholder until [`declare`] publishes one.
pub fn plugin(id: &str) -> anyhow::Result<Plugin> {
    let text = include_str!("../../../examples/echo-plugin/plugin.json")
        .replacen("\"id\": \"echo\"", &format!("\"id\": \"{id}\""), 1)
        .replacen("*/5 * * * *", YEARLY, 1);
    anyhow::ensure!(
        text.contains(YEARLY) && text.contains(id),
        "the echo manifest changed: the bench's edits no longer apply"
    );
    let image = format!("{UNPUBLISHED_IMAGE}@sha256:{}", digest(id));
    let mut plugin = Plugin::from_manifest(&text, &image, vec!["/echo-plugin".into()], true)?;
    // Tool names are registered across plugins in package-name order (admission's Names
    // stage): the first plugin (`scale-a`) keeps `echo` (the tool the echo binary serves, which the API
    // measure calls), the others get names of their own.
    if id != plugin_id(0) {
        testkit::plugins::rename_tools(&mut plugin, |t| format!("{id}-{t}"));
    }
    Ok(plugin)
}

/// The global config: plugins on, LOOP_API_URL the API server's address.
pub fn host_config(api_url: &str, daily_runs: u32) -> HostConfig {
    HostConfig::new(
        HOST_CONFIG_NAME,
        HostConfigSpec {
            plugins: HostPlugins {
                enabled: true,
                daily_runs,
                ..Default::default()
            },
            api_url: Some(api_url.into()),
            ..Default::default()
        },
    )
}

/// The world's scheduled action, on or off. It names `enabled` either way: applied
/// server-side over `{enabled: false}`, an empty entry comes out as `null` (the one field it
/// held went), which the CRD refuses; `make chaos` had 17 of 27 burst changes refused so.
pub fn schedule_entry(on: bool) -> ScheduleEntry {
    ScheduleEntry {
        enabled: Some(on),
        ..Default::default()
    }
}

/// A project's plugin config: `enabled` each plugin, each with its scheduled action.
pub fn project_config(plugins: &[String], enabled: bool) -> BTreeMap<String, PluginConfig> {
    plugins
        .iter()
        .map(|id| {
            (
                id.clone(),
                PluginConfig {
                    enabled: Some(enabled),
                    settings: BTreeMap::new(),
                    schedules: BTreeMap::from([(ACTION.to_string(), schedule_entry(true))]),
                    secret_settings: BTreeMap::new(),
                    risk_profile: None,
                },
            )
        })
        .collect()
}

/// The Project of a namespace with `config`.
pub fn project(namespace: &str, config: PluginsConfig) -> Project {
    let mut project = Project::new(PROJECT, ProjectSpec { plugins: config });
    project.metadata.namespace = Some(namespace.into());
    project
}

/// The owner's trust of `trusted` for `project` (as made, so it has a uid): the same-named
/// ProjectTrust, owned by the Project, as `loop-plugins project trust` writes it.
pub fn trust(project: &Project, trusted: &PluginsConfig) -> anyhow::Result<ProjectTrust> {
    let mut trust = ProjectTrust::of(&project.name_any(), trusted);
    trust.metadata.namespace = project.namespace();
    trust.metadata.owner_references = Some(vec![OwnerReference {
        api_version: Project::api_version(&()).into_owned(),
        kind: Project::kind(&()).into_owned(),
        name: project.name_any(),
        uid: project.uid().context("the Project as made has a uid")?,
        controller: None,
        block_owner_deletion: None,
    }]);
    Ok(trust)
}

/// Applies `project` and the owner's trust of `trusted` for it.
pub async fn project_trusted(
    client: &Client,
    project: &Project,
    trusted: &PluginsConfig,
) -> anyhow::Result<()> {
    let ns = project.namespace().context("a Project has a namespace")?;
    let made = apply(&Api::<Project>::namespaced(client.clone(), &ns), project).await?;
    apply(
        &Api::<ProjectTrust>::namespaced(client.clone(), &ns),
        &trust(&made, trusted)?,
    )
    .await?;
    Ok(())
}

/// A chat's Channel.
pub fn channel(chat: &Chat) -> Channel {
    let mut channel = Channel::new(
        &chat.name,
        ChannelSpec {
            project: PROJECT.into(),
            kind: if chat.parent.is_some() {
                ChannelKind::Thread
            } else {
                ChannelKind::Channel
            },
            parent: chat.parent.clone(),
            app: App::Desktop,
            hidden: false,
            working_tree: None,
        },
    );
    channel.metadata.namespace = Some(chat.namespace.clone());
    channel
}

/// Server-side applies `object` as [`MANAGER`], forcing conflicts.
pub async fn apply<K>(api: &Api<K>, object: &K) -> anyhow::Result<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let name = object.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {name}", K::kind(&Default::default())))
}

/// Applies namespaced `objects`, `concurrency` at a time.
pub async fn apply_all<K>(
    client: &Client,
    objects: Vec<K>,
    concurrency: usize,
) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + Send + Sync,
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + 'static,
{
    let client = Arc::new(client.clone());
    let results: Vec<anyhow::Result<K>> = futures::stream::iter(objects)
        .map(|object| {
            let client = client.clone();
            async move {
                let ns = object.namespace().context("a namespaced object")?;
                let api: Api<K> = Api::namespaced((*client).clone(), &ns);
                apply(&api, &object).await
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    for result in results {
        result?;
    }
    Ok(())
}

/// Makes the namespaces `names`.
pub async fn namespaces_made(client: &Client, names: &[String]) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.clone());
        apply(&api, &ns).await?;
    }
    Ok(())
}

/// Writes the declared world: the HostConfig, the plugins (each with its image published to
/// `images`, as `plugin install` does), the namespaces, a trusted Project in each and every
/// chat. Returns the chats.
pub async fn declare(
    client: &Client,
    images: &Images,
    sizes: &Sizes,
    api_url: &str,
    daily_runs: u32,
) -> anyhow::Result<Vec<Chat>> {
    apply(
        &Api::<HostConfig>::all(client.clone()),
        &host_config(api_url, daily_runs),
    )
    .await?;
    let plugins = plugin_ids(sizes);
    for id in &plugins {
        let mut plugin = plugin(id)?;
        images.publish(&mut plugin).await?;
        apply(&Api::<Plugin>::all(client.clone()), &plugin).await?;
    }
    let namespaces = namespaces(sizes);
    namespaces_made(client, &namespaces).await?;
    let config = project_config(&plugins, true);
    let made: Vec<anyhow::Result<()>> = futures::stream::iter(&namespaces)
        .map(|ns| {
            let project = project(ns, config.clone());
            let config = &config;
            async move { project_trusted(client, &project, config).await }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for result in made {
        result?;
    }
    let chats = chats(sizes);
    apply_all(client, chats.iter().map(channel).collect(), 16).await?;
    Ok(chats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_echo_manifest_takes_the_benchs_edits() {
        let p = plugin("scale-a").unwrap();
        assert_eq!(p.name_any(), "scale-a");
        let text = serde_json::to_string(&p.spec.manifest).unwrap();
        assert!(text.contains(YEARLY), "{text}");
    }

    #[test]
    fn chats_pair_each_channel_with_a_thread() {
        let sizes = Sizes {
            projects: 2,
            channels_per_project: 3,
            plugins: 3,
            quick: true,
        };
        let all = chats(&sizes);
        assert_eq!(all.len(), sizes.chats());
        let threads: Vec<_> = all.iter().filter(|c| c.parent.is_some()).collect();
        assert_eq!(threads.len(), sizes.channels());
        assert!(threads.iter().all(|t| {
            all.iter()
                .any(|c| Some(&c.name) == t.parent.as_ref() && c.namespace == t.namespace)
        }));
        assert_eq!(plugin_ids(&sizes), ["scale-a", "scale-b", "scale-c"]);
    }
}

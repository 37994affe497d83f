//! From a route's namespace, chat and plugin to the instance a call goes to: read from the
//! reflector stores, never from the cluster. Every refusal says which object and why: 404 for
//! a chat or plugin that does not exist, 409 when the chat's project does not enable the
//! plugin (or plugins are off, or the chat runs none), 503 while the controller has not made
//! the instance or its Secret yet.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::error::{Code, HostError, HostResult};
use super::pods::InstanceKey;
use super::tools::{Compiled, ManifestCache};
use model::contract::SECRET_KEY;
use model::manifest::Capability;
use model::names;
use model::resolve::plugin_enabled;
use model::resources::{
    App, Channel, ChannelKind, HOST_CONFIG_NAME, HostConfig, HostConfigSpec, Plugin,
    PluginInstance, Project,
};

/// The stores every answer reads.
#[derive(Clone)]
pub struct Stores {
    pub host: Store<HostConfig>,
    pub plugins: Store<Plugin>,
    pub projects: Store<Project>,
    pub channels: Store<Channel>,
    pub instances: Store<PluginInstance>,
    /// The instances' token Secrets (label-selected).
    pub secrets: Store<Secret>,
}

impl Stores {
    /// The global config; its defaults while no HostConfig exists.
    pub fn host(&self) -> HostConfigSpec {
        self.host
            .get(&ObjectRef::new(HOST_CONFIG_NAME))
            .map(|h| h.spec.clone())
            .unwrap_or_default()
    }

    pub fn chat(&self, namespace: &str, name: &str) -> HostResult<Arc<Channel>> {
        self.channels
            .get(&ObjectRef::new(name).within(namespace))
            .ok_or_else(|| {
                HostError::new(
                    Code::ChannelNotFound,
                    format!("no Channel {name} in namespace {namespace}"),
                )
            })
    }

    pub fn instance(&self, key: &InstanceKey) -> Option<Arc<PluginInstance>> {
        self.instances
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
    }
}

/// The capabilities the owner approved that the manifest declares.
pub fn approved(plugin: &Plugin, compiled: &Compiled) -> BTreeSet<Capability> {
    plugin
        .spec
        .approved_capabilities
        .iter()
        .filter_map(|c| Capability::parse(c))
        .filter(|c| compiled.manifest.declares_capability(*c))
        .collect()
}

/// Why plugins don't run in a chat at all, if they don't.
pub fn chat_runs_no_plugins(chat: &Channel) -> Option<String> {
    if chat.spec.hidden {
        return Some(format!(
            "chat {} is a hidden thread: plugins are not called there",
            chat.name_any()
        ));
    }
    match chat.spec.app {
        App::Desktop => None,
        App::Slack | App::Discord => Some(format!(
            "chat {} is a {} chat: plugins run only in desktop chats",
            chat.name_any(),
            if chat.spec.app == App::Slack {
                "Slack"
            } else {
                "Discord"
            }
        )),
    }
}

/// An installed plugin, its compiled manifest and approved capabilities, whether or not any
/// project enables it.
pub fn installed(
    stores: &Stores,
    cache: &ManifestCache,
    host: &HostConfigSpec,
    name: &str,
) -> HostResult<(Arc<Plugin>, Arc<Compiled>)> {
    let plugin = stores
        .plugins
        .get(&ObjectRef::new(name))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .ok_or_else(|| {
            HostError::new(
                Code::PluginNotFound,
                format!("no Plugin {name} is installed"),
            )
        })?;
    if !host.plugins.enabled {
        return Err(HostError::new(
            Code::PluginNotEnabled,
            "plugins.enabled is off in HostConfig default: no plugin runs",
        ));
    }
    let compiled = cache.get(&plugin).map_err(|e| {
        HostError::new(
            Code::PluginNotEnabled,
            format!("Plugin {name} is not admitted: its manifest is invalid: {e}"),
        )
    })?;
    Ok((plugin, compiled))
}

/// Whether the chat's project enables the plugin; the reason when it does not.
pub fn enabled_in(
    stores: &Stores,
    host: &HostConfigSpec,
    chat: &Channel,
    plugin: &str,
) -> Result<(), String> {
    if let Some(why) = chat_runs_no_plugins(chat) {
        return Err(why);
    }
    let ns = chat.namespace().unwrap_or_default();
    let Some(project) = stores
        .projects
        .get(&ObjectRef::new(&chat.spec.project).within(&ns))
    else {
        return Err(format!(
            "chat {}'s project {} does not exist",
            chat.name_any(),
            chat.spec.project
        ));
    };
    let enabled = plugin_enabled(&host.plugins, plugin, &project.spec);
    if enabled.is_enabled() {
        Ok(())
    } else {
        Err(format!(
            "project {} does not enable plugin {plugin}: {}",
            chat.spec.project, enabled.reason
        ))
    }
}

/// The instance a call goes to, with what the call needs.
#[derive(Clone)]
pub struct Target {
    pub key: InstanceKey,
    /// The chat (a channel, thread or worktree thread).
    pub chat: String,
    /// The chat's name when it is a thread or worktree thread.
    pub thread_id: Option<String>,
    pub plugin: Arc<Plugin>,
    pub compiled: Arc<Compiled>,
    pub approved: BTreeSet<Capability>,
    pub instance: Arc<PluginInstance>,
    /// The instance's secret, which every request to its container carries.
    pub secret: String,
    /// HostConfig's idle timeout.
    pub idle_timeout: Option<Duration>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("key", &self.key)
            .field("chat", &self.chat)
            .field("plugin", &self.plugin.name_any())
            .finish_non_exhaustive()
    }
}

impl Target {
    pub fn plugin_name(&self) -> String {
        self.plugin.name_any()
    }
}

/// Resolves the plugin's instance in a chat.
pub fn resolve(
    stores: &Stores,
    cache: &ManifestCache,
    namespace: &str,
    chat_name: &str,
    plugin_name: &str,
) -> HostResult<Target> {
    let chat = stores.chat(namespace, chat_name)?;
    let host = stores.host();
    let (plugin, compiled) = installed(stores, cache, &host, plugin_name)?;
    enabled_in(stores, &host, &chat, plugin_name)
        .map_err(|why| HostError::new(Code::PluginNotEnabled, why))?;
    let key = InstanceKey::new(namespace, &names::instance_name(plugin_name, chat_name));
    let pending = |what: &str| {
        HostError::new(
            Code::InstancePending,
            format!(
                "the controller has not made {what} of plugin {plugin_name} in chat {chat_name} yet"
            ),
        )
        .retry_after(1)
    };
    let instance = stores
        .instance(&key)
        .ok_or_else(|| pending("the PluginInstance"))?;
    let secret = stores
        .secrets
        .get(&ObjectRef::new(&names::secret_name(&key.name)).within(namespace))
        .and_then(|s| s.data.as_ref()?.get(SECRET_KEY).cloned())
        .and_then(|b| String::from_utf8(b.0).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| pending("the Secret"))?;
    let approved = approved(&plugin, &compiled);
    Ok(Target {
        thread_id: (chat.spec.kind != ChannelKind::Channel).then(|| chat_name.to_string()),
        chat: chat_name.to_string(),
        key,
        plugin,
        compiled,
        approved,
        instance,
        secret,
        idle_timeout: model::schedule::parse_interval(&host.plugins.idle_timeout).ok(),
    })
}

//! From a namespace, chat and plugin to the instance a call goes to ([`Target`]): read from
//! the reflector stores, never from the cluster. Every refusal is a [`TargetError`] that says
//! which object and why: a chat or plugin that does not exist, a chat whose project does not
//! enable the plugin (or plugins are off, or the chat runs none: [`Disabled`]), an instance or
//! Secret the controller has not made yet. The host API answers them 404, 409 and 503; the
//! fan-out keeps the message with a delivery that failed.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::Target;
use crate::index::{Compiled, Index, InstanceKey};
use model::contract::SECRET_KEY;
use model::manifest::Capability;
use model::names;
use model::resolve::runs_plugins;
use model::resolve::{EnabledReason, ProjectView, plugin_enabled};
use model::resources::{App, Channel, ChannelKind, HostConfigSpec, Plugin, PluginInstance};

/// Why a call or an event cannot go to a plugin's instance in a chat.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("no Channel {name} in namespace {namespace}")]
    ChatNotFound { namespace: String, name: String },
    #[error("no Plugin {name} is installed")]
    PluginNotFound { name: String },
    #[error("plugins.enabled is off in HostConfig default: no plugin runs")]
    PluginsOff,
    #[error("Plugin {name} is not admitted: its manifest is invalid: {reason}")]
    NotAdmitted { name: String, reason: String },
    #[error(transparent)]
    Disabled(#[from] Disabled),
    /// The controller has not made the instance or its Secret yet: a moment's wait helps.
    #[error("the controller has not made {missing} of plugin {plugin} in chat {chat} yet")]
    Pending {
        missing: Missing,
        plugin: String,
        chat: String,
    },
}

/// Why a chat's project does not run a plugin there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Disabled {
    #[error("chat {chat} is a hidden thread: plugins are not called there")]
    HiddenThread { chat: String },
    #[error("chat {chat} is a {} chat: plugins run only in desktop chats", app_name(*.app))]
    OutsideTheDesktop { chat: String, app: App },
    #[error("chat {chat}'s project {project} does not exist")]
    NoProject { chat: String, project: String },
    #[error("project {project} does not enable plugin {plugin}: {reason}")]
    NotEnabled {
        project: String,
        plugin: String,
        reason: EnabledReason,
    },
}

/// What the controller has yet to make for an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    Instance,
    Secret,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Missing::Instance => "the PluginInstance",
            Missing::Secret => "the Secret",
        })
    }
}

/// The app's name as messages spell it.
pub fn app_name(app: App) -> &'static str {
    match app {
        App::Slack => "Slack",
        App::Discord => "Discord",
        App::Desktop => "desktop",
    }
}

/// The chat `namespace/name`.
pub fn chat(index: &Index, namespace: &str, name: &str) -> Result<Arc<Channel>, TargetError> {
    index
        .channel(namespace, name)
        .ok_or_else(|| TargetError::ChatNotFound {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
}

/// The capabilities the owner approved that the manifest declares.
pub fn approved(plugin: &Plugin, compiled: &Compiled) -> BTreeSet<Capability> {
    model::resolve::approved_capabilities(plugin, &compiled.manifest)
}

/// Why plugins don't run in a chat at all, if they don't (`model::resolve::runs_plugins`).
pub fn chat_runs_no_plugins(chat: &Channel) -> Option<Disabled> {
    if runs_plugins(&chat.spec) {
        return None;
    }
    Some(if chat.spec.hidden {
        Disabled::HiddenThread {
            chat: chat.name_any(),
        }
    } else {
        Disabled::OutsideTheDesktop {
            chat: chat.name_any(),
            app: chat.spec.app,
        }
    })
}

/// An installed plugin and its compiled manifest, whether or not any project enables it.
pub fn installed(
    index: &Index,
    host: &HostConfigSpec,
    name: &str,
) -> Result<(Arc<Plugin>, Arc<Compiled>), TargetError> {
    let plugin = index
        .plugin(name)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .ok_or_else(|| TargetError::PluginNotFound {
            name: name.to_string(),
        })?;
    if !host.plugins.enabled {
        return Err(TargetError::PluginsOff);
    }
    let compiled = index
        .manifests
        .get(&plugin)
        .map_err(|reason| TargetError::NotAdmitted {
            name: name.to_string(),
            reason: reason.to_string(),
        })?;
    Ok((plugin, compiled))
}

/// Whether the chat's project enables the plugin; the reason when it does not.
pub fn enabled_in(
    index: &Index,
    host: &HostConfigSpec,
    chat: &Channel,
    plugin: &str,
) -> Result<(), Disabled> {
    if let Some(why) = chat_runs_no_plugins(chat) {
        return Err(why);
    }
    let ns = chat.namespace().unwrap_or_default();
    let Some(project) = index.project(&ns, &chat.spec.project) else {
        return Err(Disabled::NoProject {
            chat: chat.name_any(),
            project: chat.spec.project.clone(),
        });
    };
    let trust = index.project_trust(&ns, &chat.spec.project);
    let hash = index.config_hashes.of(&project);
    let enabled = plugin_enabled(
        &host.plugins,
        plugin,
        ProjectView::new(&project, trust.as_deref()).with_hash(&hash),
    );
    if enabled.is_enabled() {
        Ok(())
    } else {
        Err(Disabled::NotEnabled {
            project: chat.spec.project.clone(),
            plugin: plugin.to_string(),
            reason: enabled.reason,
        })
    }
}

/// A plugin the chat's project enables, for what needs no container (its panels, its
/// switches' list): its instance only if the controller has made it yet, so that a plugin
/// enabled again a moment ago lists its panels while its instance is being made.
#[derive(Clone)]
pub struct Enabled {
    pub key: InstanceKey,
    pub chat: Arc<Channel>,
    pub plugin: Arc<Plugin>,
    pub compiled: Arc<Compiled>,
    pub approved: BTreeSet<Capability>,
    pub instance: Option<Arc<PluginInstance>>,
}

/// Resolves the plugin in a chat whose project enables it.
pub fn resolve_enabled(
    index: &Index,
    namespace: &str,
    chat_name: &str,
    plugin_name: &str,
) -> Result<Enabled, TargetError> {
    enabled_under(
        index,
        &index.host_config().spec,
        namespace,
        chat_name,
        plugin_name,
    )
}

/// [`resolve_enabled`] under `host` (HostConfig's spec, which the caller read once).
fn enabled_under(
    index: &Index,
    host: &HostConfigSpec,
    namespace: &str,
    chat_name: &str,
    plugin_name: &str,
) -> Result<Enabled, TargetError> {
    let chat = chat(index, namespace, chat_name)?;
    let (plugin, compiled) = installed(index, host, plugin_name)?;
    enabled_in(index, host, &chat, plugin_name)?;
    let key = InstanceKey::new(namespace, &names::instance_name(plugin_name, chat_name));
    let approved = approved(&plugin, &compiled);
    let instance = index.instance(&key);
    Ok(Enabled {
        key,
        chat,
        plugin,
        compiled,
        approved,
        instance,
    })
}

/// Resolves the plugin's instance in a chat.
pub fn resolve(
    index: &Index,
    namespace: &str,
    chat_name: &str,
    plugin_name: &str,
) -> Result<Target, TargetError> {
    // The HostConfig as the store keeps it: read once per call, not copied.
    let host = index.host_config();
    let host = &host.spec;
    let Enabled {
        key,
        chat,
        plugin,
        compiled,
        approved,
        instance,
    } = enabled_under(index, host, namespace, chat_name, plugin_name)?;
    let pending = |missing| TargetError::Pending {
        missing,
        plugin: plugin_name.to_string(),
        chat: chat_name.to_string(),
    };
    let instance = instance.ok_or_else(|| pending(Missing::Instance))?;
    let secret = index
        .secrets
        .get(&ObjectRef::new(&names::secret_name(&key.name)).within(namespace))
        .and_then(|s| s.data.as_ref()?.get(SECRET_KEY).cloned())
        .and_then(|b| String::from_utf8(b.0).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| pending(Missing::Secret))?;
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

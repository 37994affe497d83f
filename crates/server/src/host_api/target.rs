//! From a route's namespace, chat and plugin to the instance a call goes to: read from the
//! reflector stores, never from the cluster. Every refusal says which object and why: 404 for
//! a chat or plugin that does not exist, 409 when the chat's project does not enable the
//! plugin (or plugins are off, or the chat runs none), 503 while the controller has not made
//! the instance or its Secret yet.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::error::{Code, HostError, HostResult};
use crate::calls::Target;
use crate::index::{Compiled, Index, InstanceKey};
use model::contract::SECRET_KEY;
use model::manifest::Capability;
use model::names;
use model::resolve::runs_plugins;
use model::resolve::{ProjectView, plugin_enabled};
use model::resources::{App, Channel, ChannelKind, HostConfigSpec, Plugin};

/// The chat `namespace/name`, or 404 naming it.
pub fn chat(index: &Index, namespace: &str, name: &str) -> HostResult<Arc<Channel>> {
    index.channel(namespace, name).ok_or_else(|| {
        HostError::new(
            Code::ChannelNotFound,
            format!("no Channel {name} in namespace {namespace}"),
        )
    })
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

/// Why plugins don't run in a chat at all, if they don't (`model::resolve::runs_plugins`).
pub fn chat_runs_no_plugins(chat: &Channel) -> Option<String> {
    if runs_plugins(&chat.spec) {
        return None;
    }
    Some(if chat.spec.hidden {
        format!(
            "chat {} is a hidden thread: plugins are not called there",
            chat.name_any()
        )
    } else {
        format!(
            "chat {} is a {} chat: plugins run only in desktop chats",
            chat.name_any(),
            match chat.spec.app {
                App::Slack => "Slack",
                App::Discord => "Discord",
                App::Desktop => "desktop",
            }
        )
    })
}

/// An installed plugin, its compiled manifest and approved capabilities, whether or not any
/// project enables it.
pub fn installed(
    index: &Index,
    host: &HostConfigSpec,
    name: &str,
) -> HostResult<(Arc<Plugin>, Arc<Compiled>)> {
    let plugin = index
        .plugin(name)
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
    let compiled = index.manifests.get(&plugin).map_err(|e| {
        HostError::new(
            Code::PluginNotEnabled,
            format!("Plugin {name} is not admitted: its manifest is invalid: {e}"),
        )
    })?;
    Ok((plugin, compiled))
}

/// Whether the chat's project enables the plugin; the reason when it does not.
pub fn enabled_in(
    index: &Index,
    host: &HostConfigSpec,
    chat: &Channel,
    plugin: &str,
) -> Result<(), String> {
    if let Some(why) = chat_runs_no_plugins(chat) {
        return Err(why);
    }
    let ns = chat.namespace().unwrap_or_default();
    let Some(project) = index.project(&ns, &chat.spec.project) else {
        return Err(format!(
            "chat {}'s project {} does not exist",
            chat.name_any(),
            chat.spec.project
        ));
    };
    let trust = index.project_trust(&ns, &chat.spec.project);
    let enabled = plugin_enabled(
        &host.plugins,
        plugin,
        ProjectView::new(&project, trust.as_deref()),
    );
    if enabled.is_enabled() {
        Ok(())
    } else {
        Err(format!(
            "project {} does not enable plugin {plugin}: {}",
            chat.spec.project, enabled.reason
        ))
    }
}

/// Resolves the plugin's instance in a chat.
pub fn resolve(
    index: &Index,
    namespace: &str,
    chat_name: &str,
    plugin_name: &str,
) -> HostResult<Target> {
    let chat = chat(index, namespace, chat_name)?;
    let host = index.host();
    let (plugin, compiled) = installed(index, &host, plugin_name)?;
    enabled_in(index, &host, &chat, plugin_name)
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
    let instance = index
        .instance(&key)
        .ok_or_else(|| pending("the PluginInstance"))?;
    let secret = index
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

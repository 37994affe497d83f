//! Getting calls and events to plugins' instances: the service the host API and the fan-out
//! both use, below both (serve → fanout → plugin_api / host_api → delivery → calls → index),
//! so that neither imports the other's files for it.
//!
//! - [`target`]: from a chat and a plugin to the instance a call goes to, read from the index;
//! - [`routing`]: which containers get an event and what they get (the reference's rules,
//!   pure);
//! - [`deliver_event`]: an event routed and sent, once and best effort, to every container the
//!   rules name, through `crate::Calls` (the one way to call a plugin). What happened to each
//!   is in the [`EventReport`]: the host API answers it, the fan-out counts what got through.

pub mod changes;
pub mod routing;
pub mod target;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::future::join_all;
use http::StatusCode;
use kube::ResourceExt;
use serde_json::Value;

use crate::client::{PluginAnswer, PluginRequest};
use crate::index::{Compiled, Index, InstanceKey};
use crate::{CallError, CallKind, CallOptions, Calls, Target};
use model::manifest::Capability;
use model::names;
use model::resolve::ResolvedSettings;
use model::resources::{Channel, PluginInstance};
use routing::{Chat, Container, Delivery, PluginFacts, Skip};
use target::TargetError;

/// What became of an event: where the rules sent it, and how each send went.
#[derive(Debug)]
pub struct EventReport {
    /// The event's type.
    pub kind: String,
    /// Each container the rules named, and how the send to it went, in the rules' order.
    pub sent: Vec<Sent>,
    /// The containers the rules name that do not get it, and why.
    pub skipped: Vec<Skip>,
    /// Why the chat gets no events at all.
    pub ignored: Option<String>,
}

impl EventReport {
    /// How many containers took the event (answered 2xx).
    pub fn delivered(&self) -> usize {
        self.sent.iter().filter(|s| s.result.is_ok()).count()
    }
}

/// One container the rules named, and the plugin's 2xx status or why the event did not reach
/// it.
#[derive(Debug)]
pub struct Sent {
    pub delivery: Delivery,
    pub result: Result<StatusCode, SendError>,
}

/// Why an event the rules sent to a container did not reach it.
#[derive(Debug)]
pub enum SendError {
    /// The instance is not to be had from the index (its Secret is not made yet, say).
    Target(TargetError),
    /// The call brought no usable answer: the container could not be had, or it failed.
    Call {
        target: Box<Target>,
        error: CallError,
    },
    /// The plugin answered with an error status.
    Refused {
        target: Box<Target>,
        answer: PluginAnswer,
    },
}

/// An installed and admitted plugin as the chat's project sees it: what the rules read.
struct Installed {
    name: String,
    compiled: Arc<Compiled>,
    approved: BTreeSet<Capability>,
    enabled: bool,
    settings: Arc<ResolvedSettings>,
}

impl Installed {
    fn facts(&self) -> PluginFacts<'_> {
        PluginFacts {
            name: &self.name,
            manifest: &self.compiled.manifest,
            approved: &self.approved,
            enabled: self.enabled,
            settings: &self.settings.values,
        }
    }
}

/// Every installed plugin, as the project of the chat `channel` in `ns` sees it.
fn installed_plugins(index: &Index, ns: &str, channel: &Channel) -> Vec<Installed> {
    let host = index.host_config();
    let project = index.project(ns, &channel.spec.project);
    index
        .plugins
        .state()
        .iter()
        .filter_map(|p| {
            let name = p.name_any();
            let (plugin, compiled) = target::installed(index, &host.spec, &name).ok()?;
            let enabled = target::enabled_in(index, &host.spec, channel, &name).is_ok();
            let settings =
                index
                    .settings
                    .of(&compiled.manifest, &plugin, project.as_deref(), &host);
            Some(Installed {
                approved: target::approved(&plugin, &compiled),
                name,
                compiled,
                enabled,
                settings,
            })
        })
        .collect()
}

/// The plugins' instances in `chats`, and whether their containers run: (plugin, chat) →
/// (instance, running).
fn instances_in(
    calls: &Calls,
    ns: &str,
    chats: &[String],
    plugins: &[Installed],
) -> BTreeMap<(String, String), (Arc<PluginInstance>, bool)> {
    let mut found = BTreeMap::new();
    for plugin in plugins {
        for chat in chats {
            let key = InstanceKey::new(ns, &names::instance_name(&plugin.name, chat));
            if let Some(instance) = calls.index().instance(&key) {
                let running = calls.running(&key);
                found.insert((plugin.name.clone(), chat.clone()), (instance, running));
            }
        }
    }
    found
}

/// Routes an event of type `kind` that happened in `channel` (in `ns`) and sends it, best
/// effort and once, to every container the rules name, at the same time; `options` say
/// whether a send may start a stopped container and keep it up.
pub async fn deliver_event(
    calls: &Calls,
    ns: &str,
    channel: &Channel,
    kind: &str,
    data: &Value,
    options: CallOptions,
) -> EventReport {
    let chat = channel.name_any();
    let plugins = installed_plugins(calls.index(), ns, channel);
    let facts: Vec<PluginFacts> = plugins.iter().map(Installed::facts).collect();
    // The instances of the chat and of its parent channel.
    let mut chats = vec![chat.clone()];
    chats.extend(channel.spec.parent.clone());
    let instances = instances_in(calls, ns, &chats, &plugins);
    let routing = routing::route(
        kind,
        data,
        Chat {
            name: &chat,
            spec: &channel.spec,
        },
        &facts,
        |plugin, c| {
            instances
                .get(&(plugin.to_string(), c.to_string()))
                .map(|(instance, running)| Container {
                    running: *running,
                    switches: instance
                        .status
                        .as_ref()
                        .map(|st| st.switches.as_slice())
                        .unwrap_or_default(),
                })
        },
    );
    let no_settings = BTreeMap::new();
    let sends = routing.deliveries.into_iter().map(|delivery| {
        let settings = plugins
            .iter()
            .find(|p| p.name == delivery.plugin)
            .map_or(&no_settings, |p| &p.settings.values);
        let body = routing::event_body(kind, data, delivery.thread_id.as_deref(), settings);
        async move {
            let result = send(calls, ns, &delivery, &body, options).await;
            Sent { delivery, result }
        }
    });
    EventReport {
        kind: kind.to_string(),
        sent: join_all(sends).await,
        skipped: routing.skipped,
        ignored: routing.ignored,
    }
}

/// Sends the event's `body` to the container of one delivery.
async fn send(
    calls: &Calls,
    ns: &str,
    delivery: &Delivery,
    body: &sdk::wire::Event,
    options: CallOptions,
) -> Result<StatusCode, SendError> {
    let target = target::resolve(calls.index(), ns, &delivery.chat, &delivery.plugin)
        .map_err(SendError::Target)?;
    let limits = calls.limits();
    let request = PluginRequest::json(
        CallKind::Event,
        "/events".into(),
        body,
        limits.event,
        limits.body,
    );
    match calls.call_target(&target, &request, options).await {
        Ok(answer) if answer.status.is_success() => Ok(answer.status),
        Ok(answer) => Err(SendError::Refused {
            target: Box::new(target),
            answer,
        }),
        Err(error) => Err(SendError::Call {
            target: Box::new(target),
            error,
        }),
    }
}

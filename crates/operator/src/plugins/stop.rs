//! `plugin stop NAME [--chat NS/CHAT]`: the reference's Stop button. Records the time of the
//! stop on each chosen instance (`status.stoppedAt`, its own field manager); the controller's
//! demand rule (`controller::pod_wanted`) then counts nothing recorded up to that time, so it
//! deletes the Pod now, and the next call, event or schedule (activity after the stop)
//! starts it again. The Pod going sends `plugins.changed` through the API server's fan-out,
//! as the daemon's own stops do (`server::fanout::plugins_changed`).
//!
//! The stop's time is this machine's clock, to the second; the activity it is compared with
//! is the API server's. Clocks apart by more than a second move the line between "before the
//! stop" and "after" by that much.

use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use model::names::{FIELD_MANAGER_STOP, instance_name};
use model::resources::PluginInstance;
use serde_json::{Value, json};

use super::error::PluginError;

/// A chat, as `NS/CHAT` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRef {
    pub namespace: String,
    pub channel: String,
}

impl std::str::FromStr for ChatRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((namespace, channel)) if !namespace.is_empty() && !channel.is_empty() => {
                Ok(ChatRef {
                    namespace: namespace.into(),
                    channel: channel.into(),
                })
            }
            _ => Err(format!("{s:?} is not NAMESPACE/CHAT")),
        }
    }
}

/// The instances a stop is for: the plugin's in every chat, or in the one chat.
pub fn chosen<'a>(
    instances: &'a [PluginInstance],
    plugin: &str,
    chat: Option<&ChatRef>,
) -> Vec<&'a PluginInstance> {
    instances
        .iter()
        .filter(|i| i.spec.plugin == plugin)
        .filter(|i| {
            chat.is_none_or(|c| {
                i.namespace().as_deref() == Some(c.namespace.as_str())
                    && i.spec.channel == c.channel
            })
        })
        .collect()
}

/// The status apply that records a stop at `now` (RFC 3339, to the second).
pub fn stop_patch(instance: &PluginInstance, now: &str) -> Value {
    json!({
        "apiVersion": PluginInstance::api_version(&()),
        "kind": PluginInstance::kind(&()),
        "metadata": { "name": instance.name_any(), "namespace": instance.namespace() },
        "status": { "stoppedAt": now },
    })
}

/// Stops `plugin`'s containers (in one chat with `chat`); returns the instances stopped as
/// `namespace/name`.
pub async fn stop(
    client: &Client,
    plugin: &str,
    chat: Option<&ChatRef>,
) -> Result<Vec<String>, PluginError> {
    let instances = match chat {
        Some(c) => {
            let api: Api<PluginInstance> = Api::namespaced(client.clone(), &c.namespace);
            let name = instance_name(plugin, &c.channel);
            api.get_opt(&name)
                .await
                .map_err(PluginError::kube(format!(
                    "reading PluginInstance {}/{name}",
                    c.namespace
                )))?
                .into_iter()
                .collect()
        }
        None => {
            Api::<PluginInstance>::all(client.clone())
                .list(&ListParams::default())
                .await
                .map_err(PluginError::kube("listing PluginInstances"))?
                .items
        }
    };
    let chosen = chosen(&instances, plugin, chat);
    if chosen.is_empty() {
        return Err(PluginError::Refused(match chat {
            Some(c) => format!(
                "plugin {plugin} has no instance in chat {}/{}",
                c.namespace, c.channel
            ),
            None => format!("plugin {plugin} has no instances"),
        }));
    }
    let now = jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .expect("a timestamp rounds to the second")
        .to_string();
    let mut stopped = Vec::new();
    for instance in chosen {
        let (namespace, name) = (
            instance.namespace().unwrap_or_default(),
            instance.name_any(),
        );
        Api::<PluginInstance>::namespaced(client.clone(), &namespace)
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER_STOP).force(),
                &Patch::Apply(&stop_patch(instance, &now)),
            )
            .await
            .map_err(PluginError::kube(format!(
                "stopping PluginInstance {namespace}/{name}"
            )))?;
        stopped.push(format!("{namespace}/{name}"));
    }
    Ok(stopped)
}

#[cfg(test)]
mod tests {
    use model::resources::PluginInstanceSpec;

    use super::*;

    fn instance(ns: &str, plugin: &str, chat: &str) -> PluginInstance {
        let mut i = PluginInstance::new(
            &instance_name(plugin, chat),
            PluginInstanceSpec {
                plugin: plugin.into(),
                channel: chat.into(),
                project: "proj".into(),
            },
        );
        i.metadata.namespace = Some(ns.into());
        i
    }

    #[test]
    fn a_stop_is_for_the_plugins_instances_in_every_chat_or_the_one() {
        let all = [
            instance("a", "echo", "c1"),
            instance("b", "echo", "c1"),
            instance("a", "other", "c1"),
        ];
        let names = |v: Vec<&PluginInstance>| {
            v.iter()
                .map(|i| format!("{}/{}", i.namespace().unwrap(), i.spec.channel))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(chosen(&all, "echo", None)), ["a/c1", "b/c1"]);
        let chat: ChatRef = "b/c1".parse().unwrap();
        assert_eq!(names(chosen(&all, "echo", Some(&chat))), ["b/c1"]);
        assert!("c1".parse::<ChatRef>().is_err());
        assert!("/c1".parse::<ChatRef>().is_err());
    }

    #[test]
    fn the_stop_owns_only_stopped_at() {
        let patch = stop_patch(&instance("a", "echo", "c1"), "2026-01-01T10:00:00Z");
        assert_eq!(
            patch["status"],
            json!({ "stoppedAt": "2026-01-01T10:00:00Z" })
        );
        assert_eq!(patch["kind"], "PluginInstance");
        assert_eq!(patch["metadata"]["namespace"], "a");
    }
}

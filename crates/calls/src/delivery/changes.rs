//! `plugins.changed`: what moved among the installed Plugins and a namespace's instances, as
//! clients are told (the host API's stream, `crate::host_api::changes`) and as running
//! containers are told (the fan-out, `crate::fanout::plugins_changed`). Pure over the index.
//!
//! | what moved | event data |
//! |---|---|
//! | a Plugin installed, upgraded (a new generation) or removed | `{"plugin", "change": "installed" \| "upgraded" \| "removed"}` |
//! | an instance made in the namespace (a project enables the plugin in a chat) | `{"plugin", "chat", "change": "enabled", "instance"}` |
//! | an instance gone (disabled, the chat or plugin removed) | `{"plugin", "chat", "change": "disabled"}` |
//! | an instance's phase or breaker (a start, a stop, the breaker opening) | `{"plugin", "chat", "change": "instance", "instance"}` |
//!
//! Activity alone (`lastActivity`) sends nothing.

use std::collections::BTreeMap;

use kube::ResourceExt;
use serde::Serialize;
use serde_json::{Value, json};

use crate::index::Index;
use model::resources::{InstancePhase, PluginInstance};

/// The event's name, the reference's.
pub const EVENT: &str = "plugins.changed";

/// A plugin's instance in a chat, as the list answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceView {
    pub plugin: String,
    /// The PluginInstance's name.
    pub instance: String,
    /// `Stopped`, `Starting` or `Running`; `Stopped` until the controller said.
    pub phase: InstancePhase,
    /// `Closed`, `Open` or `HalfOpen`; `Closed` until a call went wrong.
    pub breaker: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
}

impl InstanceView {
    pub fn of(instance: &PluginInstance) -> Self {
        let status = instance.status.clone().unwrap_or_default();
        Self {
            plugin: instance.spec.plugin.clone(),
            instance: instance.name_any(),
            phase: status.phase.unwrap_or(InstancePhase::Stopped),
            breaker: status
                .breaker
                .map(|b| b.state)
                .unwrap_or_else(|| "Closed".into()),
            last_activity: status.last_activity,
            stopped_at: status.stopped_at,
        }
    }
}

/// What happened to a plugin, between two looks at the installed Plugins (name → generation).
pub fn changes(
    before: &BTreeMap<String, i64>,
    now: &BTreeMap<String, i64>,
) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for (name, generation) in now {
        match before.get(name) {
            None => out.push((name.clone(), "installed")),
            Some(g) if g != generation => out.push((name.clone(), "upgraded")),
            Some(_) => {}
        }
    }
    for name in before.keys().filter(|n| !now.contains_key(*n)) {
        out.push((name.clone(), "removed"));
    }
    out
}

/// The installed Plugins (not being deleted), name → generation.
pub fn installed(index: &Index) -> BTreeMap<String, i64> {
    index
        .plugins
        .state()
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (p.name_any(), p.metadata.generation.unwrap_or_default()))
        .collect()
}

/// An instance as the stream compares it: what a client shows of it, without its activity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub chat: String,
    pub view: InstanceView,
}

impl Seen {
    /// What a client shows of it: phase, breaker and the last stop (not the activity).
    fn shown(&self) -> (InstancePhase, &str, Option<&str>) {
        (
            self.view.phase,
            &self.view.breaker,
            self.view.stopped_at.as_deref(),
        )
    }
}

/// A namespace's instances, by name.
pub fn instances_in(index: &Index, namespace: &str) -> BTreeMap<String, Seen> {
    index
        .instances
        .state()
        .iter()
        .filter(|i| i.namespace().as_deref() == Some(namespace))
        .filter(|i| i.metadata.deletion_timestamp.is_none())
        .map(|i| {
            let view = InstanceView::of(i);
            (
                i.name_any(),
                Seen {
                    chat: i.spec.channel.clone(),
                    view,
                },
            )
        })
        .collect()
}

/// The events for what moved between two looks at a namespace's instances.
pub fn instance_changes(
    before: &BTreeMap<String, Seen>,
    now: &BTreeMap<String, Seen>,
) -> Vec<Value> {
    let mut out = Vec::new();
    for (name, seen) in now {
        let change = match before.get(name) {
            None => "enabled",
            Some(was) if was.shown() != seen.shown() => "instance",
            Some(_) => continue,
        };
        out.push(json!({
            "plugin": seen.view.plugin,
            "chat": seen.chat,
            "change": change,
            "instance": seen.view,
        }));
    }
    for (name, seen) in before {
        if !now.contains_key(name) {
            out.push(
                json!({ "plugin": seen.view.plugin, "chat": seen.chat, "change": "disabled" }),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_upgrades_and_removals_are_told_apart() {
        let before = BTreeMap::from([("a".to_string(), 1), ("b".to_string(), 1)]);
        let now = BTreeMap::from([("b".to_string(), 2), ("c".to_string(), 1)]);
        assert_eq!(
            changes(&before, &now),
            [
                ("b".to_string(), "upgraded"),
                ("c".to_string(), "installed"),
                ("a".to_string(), "removed")
            ]
        );
        assert!(changes(&now, &now).is_empty());
    }

    fn seen(plugin: &str, chat: &str, phase: InstancePhase, activity: Option<&str>) -> Seen {
        Seen {
            chat: chat.into(),
            view: InstanceView {
                plugin: plugin.into(),
                instance: format!("{plugin}-{chat}"),
                phase,
                breaker: "Closed".into(),
                last_activity: activity.map(Into::into),
                stopped_at: None,
            },
        }
    }

    #[test]
    fn instances_made_gone_and_moved_are_told_activity_alone_is_not() {
        let before = BTreeMap::from([
            (
                "echo-a".to_string(),
                seen("echo", "a", InstancePhase::Stopped, None),
            ),
            (
                "echo-b".to_string(),
                seen("echo", "b", InstancePhase::Running, None),
            ),
            (
                "quiz-a".to_string(),
                seen("quiz", "a", InstancePhase::Running, None),
            ),
        ]);
        let now = BTreeMap::from([
            (
                "echo-a".to_string(),
                seen("echo", "a", InstancePhase::Running, None),
            ),
            (
                "echo-b".to_string(),
                seen("echo", "b", InstancePhase::Running, Some("T")),
            ),
            (
                "echo-c".to_string(),
                seen("echo", "c", InstancePhase::Stopped, None),
            ),
        ]);
        let found: Vec<(String, String)> = instance_changes(&before, &now)
            .iter()
            .map(|v| {
                (
                    format!(
                        "{}/{}",
                        v["plugin"].as_str().unwrap(),
                        v["chat"].as_str().unwrap()
                    ),
                    v["change"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let owned = |l: &[(&str, &str)]| -> Vec<(String, String)> {
            l.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(
            found,
            owned(&[
                ("echo/a", "instance"),
                ("echo/c", "enabled"),
                ("quiz/a", "disabled")
            ])
        );
    }
}

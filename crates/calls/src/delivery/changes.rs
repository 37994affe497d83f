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
//! | the global config written (HostConfig's spec: made, changed or deleted) | `{"change": "config", "scope": "global"}` |
//! | a project's config written (a Project of the namespace made, changed or deleted) | `{"change": "config", "scope": "project", "project"}` |
//! | a project's config trusted (its ProjectTrust made, changed or deleted) | `{"change": "trusted", "project"}` |
//!
//! The reference sends it on "every config write Loop makes" and on "trusting a project
//! config", whatever moved: a settings- or schedule-only edit, or a trust that starts and stops
//! nothing, is told too (to clients: the fan-out to containers tells installs, removals and
//! stops). Activity alone (`lastActivity`) and status writes send nothing.

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

/// The configs a namespace's clients list plugins by, by generation: the global config, and
/// the namespace's Projects and ProjectTrusts by name. A status write keeps the generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Configs {
    pub global: Option<i64>,
    pub projects: BTreeMap<String, i64>,
    pub trusts: BTreeMap<String, i64>,
}

/// The configs of `namespace` as the index holds them now.
pub fn configs_in(index: &Index, namespace: &str) -> Configs {
    let generations = |items: Vec<(Option<String>, String, Option<i64>)>| {
        items
            .into_iter()
            .filter(|(ns, _, _)| ns.as_deref() == Some(namespace))
            .map(|(_, name, g)| (name, g.unwrap_or_default()))
            .collect()
    };
    Configs {
        global: index
            .host
            .state()
            .iter()
            .find(|h| h.name_any() == model::resources::HOST_CONFIG_NAME)
            .map(|h| h.metadata.generation.unwrap_or_default()),
        projects: generations(
            index
                .projects
                .state()
                .iter()
                .map(|p| (p.namespace(), p.name_any(), p.metadata.generation))
                .collect(),
        ),
        trusts: generations(
            index
                .project_trusts
                .state()
                .iter()
                .map(|t| (t.namespace(), t.name_any(), t.metadata.generation))
                .collect(),
        ),
    }
}

/// The events for what was written between two looks at a namespace's configs.
pub fn config_changes(before: &Configs, now: &Configs) -> Vec<Value> {
    let mut out = Vec::new();
    if before.global != now.global {
        out.push(json!({ "change": "config", "scope": "global" }));
    }
    for project in moved(&before.projects, &now.projects) {
        out.push(json!({ "change": "config", "scope": "project", "project": project }));
    }
    for project in moved(&before.trusts, &now.trusts) {
        out.push(json!({ "change": "trusted", "project": project }));
    }
    out
}

/// The names made, changed (another generation) or gone between two looks.
fn moved<'a>(
    before: &'a BTreeMap<String, i64>,
    now: &'a BTreeMap<String, i64>,
) -> std::collections::BTreeSet<&'a str> {
    let changed = now
        .iter()
        .filter(|(name, g)| before.get(*name) != Some(g))
        .map(|(name, _)| name.as_str());
    let gone = before
        .keys()
        .filter(|name| !now.contains_key(*name))
        .map(String::as_str);
    changed.chain(gone).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_config_write_and_trust_is_told_and_a_status_write_is_not() {
        let configs = |global: Option<i64>, projects: &[(&str, i64)], trusts: &[(&str, i64)]| {
            let map = |l: &[(&str, i64)]| l.iter().map(|(n, g)| (n.to_string(), *g)).collect();
            Configs {
                global,
                projects: map(projects),
                trusts: map(trusts),
            }
        };
        let before = configs(Some(1), &[("app", 3), ("old", 1)], &[("app", 1)]);
        assert!(config_changes(&before, &before.clone()).is_empty());
        let now = configs(
            Some(2),
            &[("app", 4), ("new", 1)],
            &[("app", 2), ("new", 1)],
        );
        assert_eq!(
            config_changes(&before, &now),
            [
                json!({"change": "config", "scope": "global"}),
                json!({"change": "config", "scope": "project", "project": "app"}),
                json!({"change": "config", "scope": "project", "project": "new"}),
                json!({"change": "config", "scope": "project", "project": "old"}),
                json!({"change": "trusted", "project": "app"}),
                json!({"change": "trusted", "project": "new"}),
            ]
        );
        // A trust deleted is told; the global config deleted is too.
        let now = configs(None, &[("app", 3), ("old", 1)], &[]);
        assert_eq!(
            config_changes(&before, &now),
            [
                json!({"change": "config", "scope": "global"}),
                json!({"change": "trusted", "project": "app"}),
            ]
        );
    }

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

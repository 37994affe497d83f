//! `GET /namespaces/{namespace}/plugins/changes`: `plugins.changed` to clients, as a stream of
//! server-sent events (the reference sends it "to every client": open panes and Settings →
//! Plugins list the plugins again on it). It follows the index, as the fan-out that sends the
//! same event to running containers does (`crate::fanout::plugins_changed`):
//!
//! | what moved | event data |
//! |---|---|
//! | a Plugin installed, upgraded (a new generation) or removed | `{"plugin", "change": "installed" \| "upgraded" \| "removed"}` |
//! | an instance made in the namespace (a project enables the plugin in a chat) | `{"plugin", "chat", "change": "enabled", "instance"}` |
//! | an instance gone (disabled, the chat or plugin removed) | `{"plugin", "chat", "change": "disabled"}` |
//! | an instance's phase or breaker (a start, a stop, the breaker opening) | `{"plugin", "chat", "change": "instance", "instance"}` |
//!
//! Activity alone (`lastActivity`) sends nothing. The decisions are the pure [`changes`] and
//! [`instance_changes`]; a client that missed events lists again.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::auth::Permission;
use super::chats::InstanceView;
use super::error::HostError;
use super::state::HostState;
use crate::index::Index;
use model::resources::InstancePhase;

/// The event's name, the reference's.
pub const EVENT: &str = "plugins.changed";
/// How often an idle stream says it is still there.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

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

/// `GET /namespaces/{namespace}/plugins/changes`.
pub async fn follow(
    State(s): State<HostState>,
    Path(ns): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::watch_instances(&ns))
        .await?;
    Ok(Sse::new(stream(s, ns))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// What a stream has seen and has still to send.
struct Follow {
    index: std::sync::Arc<Index>,
    ns: String,
    plugins: tokio::sync::watch::Receiver<u64>,
    instances: tokio::sync::watch::Receiver<u64>,
    known_plugins: BTreeMap<String, i64>,
    known_instances: BTreeMap<String, Seen>,
    queue: VecDeque<Event>,
}

impl Follow {
    /// Waits for the next move of the plugins or the namespace's instances and queues its
    /// events; false once the index is gone.
    async fn next_move(&mut self) -> bool {
        let found: Vec<Value> = tokio::select! {
            moved = self.plugins.changed() => {
                if moved.is_err() {
                    return false;
                }
                let now = installed(&self.index);
                let found = changes(&self.known_plugins, &now)
                    .into_iter()
                    .map(|(plugin, change)| json!({ "plugin": plugin, "change": change }))
                    .collect();
                self.known_plugins = now;
                found
            }
            moved = self.instances.changed() => {
                if moved.is_err() {
                    return false;
                }
                let now = instances_in(&self.index, &self.ns);
                let found = instance_changes(&self.known_instances, &now);
                self.known_instances = now;
                found
            }
        };
        self.queue.extend(
            found
                .into_iter()
                .map(|data| Event::default().event(EVENT).data(data.to_string())),
        );
        true
    }
}

fn stream(s: HostState, ns: String) -> impl Stream<Item = Result<Event, Infallible>> {
    let index = s.index().clone();
    // Subscribed before the first look, so no move falls between the two.
    let (plugins, instances) = (
        index.changed.plugins.subscribe(),
        index.changed.instances.subscribe(),
    );
    let mut follow = Follow {
        known_plugins: installed(&index),
        known_instances: instances_in(&index, &ns),
        index,
        ns,
        plugins,
        instances,
        queue: VecDeque::new(),
    };
    // Says the stream is there: a client that lists after this misses nothing.
    follow
        .queue
        .push_back(Event::default().comment("following plugins.changed"));
    futures::stream::unfold(follow, |mut f| async move {
        loop {
            if let Some(event) = f.queue.pop_front() {
                return Some((Ok(event), f));
            }
            if !f.next_move().await {
                return None;
            }
        }
    })
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

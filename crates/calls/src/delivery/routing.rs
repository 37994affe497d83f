//! Which containers get an event, and what they get: the reference's rules ("Events") as one
//! pure function over the chat, the plugins its project enables, their manifests, settings
//! and switches, and which of their containers run ([`route`]), and the body each is sent
//! ([`event_body`]).
//!
//! - Only plugins the chat's project enables and whose manifest subscribes to the event (with
//!   `events.subscribe` approved) get it; `live.system` also needs `live.control` and a subtype
//!   `live.messages` lists.
//! - An event in a channel goes to the channel's container. One in a thread or worktree thread
//!   carries the thread's id and goes to the thread's own container; `thread_events: channel`
//!   sends it to the channel's container instead, `both` to both.
//! - Events in hidden threads are not sent, nor are events in chats plugins don't run in.
//! - A container already running gets every event. A stopped one is started for it, unless
//!   the manifest has `events_start`: then only while one of the boolean settings it names is
//!   on in the project, or one of the switches it names is on in the chat the event is in.
//!   With `"events_start": {}` events never start it.
//! - `settings.changed` goes only to containers already running, without a thread id, and
//!   carries the plugin's settings in the chat's project.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use sdk::wire::Event;
use serde::Serialize;
use serde_json::{Value, json};

use super::target::app_name;
use model::manifest::{Capability, LIVE_SYSTEM_EVENT, Manifest, ThreadEvents};
use model::resolve::runs_plugins;
use model::resources::{ChannelKind, ChannelSpec, SwitchState};

/// The event a config write or a trust change sends.
pub const SETTINGS_CHANGED: &str = "settings.changed";
/// Sent when a plugin is installed, upgraded or removed, or a container stops.
pub const PLUGINS_CHANGED: &str = "plugins.changed";

/// The host's own events: they go only to containers already running, to the channel's
/// container without a thread id, and start none.
pub fn is_host_event(event: &str) -> bool {
    event == SETTINGS_CHANGED || event == PLUGINS_CHANGED
}

/// The chat an event happened in.
#[derive(Clone, Copy, Debug)]
pub struct Chat<'a> {
    pub name: &'a str,
    pub spec: &'a ChannelSpec,
}

/// A plugin installed and admitted, as the event's chat's project sees it.
#[derive(Clone, Copy, Debug)]
pub struct PluginFacts<'a> {
    pub name: &'a str,
    pub manifest: &'a Manifest,
    /// Approved by the owner and declared by the manifest.
    pub approved: &'a BTreeSet<Capability>,
    /// The chat's project enables it.
    pub enabled: bool,
    /// Its settings in the chat's project.
    pub settings: &'a BTreeMap<String, Value>,
}

/// A plugin's instance in a chat.
#[derive(Clone, Copy, Debug)]
pub struct Container<'a> {
    /// Its container runs (or is starting for another reason).
    pub running: bool,
    /// Its composer switches' state in that chat.
    pub switches: &'a [SwitchState],
}

/// A container that gets the event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Delivery {
    pub plugin: String,
    /// The chat whose container gets it.
    pub chat: String,
    /// The thread it happened in, when it happened in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The container is stopped and the event starts it.
    pub start: bool,
}

/// A container the rules name that does not get the event, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skip {
    pub plugin: String,
    pub chat: String,
    pub reason: SkipReason,
}

/// Why a container does not get an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The owner did not approve a capability the event needs.
    NotApproved(Capability),
    /// A `live.system` message whose subtype `live.messages` does not list.
    SubtypeNotListed(String),
    /// The controller has not made the instance.
    NoInstance,
    /// `settings.changed` goes only to running containers.
    NotRunning,
    /// Stopped, and none of `events_start`'s settings or switches is on.
    EventsStartOff,
    /// Stopped, and `"events_start": {}`: events never start it.
    EventsNeverStart,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NotApproved(c) => write!(f, "capability {c} is not approved"),
            SkipReason::SubtypeNotListed(s) => {
                write!(f, "live.messages does not list subtype {s:?}")
            }
            SkipReason::NoInstance => f.write_str("the plugin has no instance in the chat yet"),
            SkipReason::NotRunning => {
                f.write_str("settings.changed goes only to containers already running")
            }
            SkipReason::EventsStartOff => f.write_str(
                "the container is stopped and none of events_start's settings or switches is on",
            ),
            SkipReason::EventsNeverStart => {
                f.write_str("the container is stopped and events_start lets no event start it")
            }
        }
    }
}

impl Serialize for SkipReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Where an event goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Routing {
    pub deliveries: Vec<Delivery>,
    pub skipped: Vec<Skip>,
    /// Why the chat gets no events at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignored: Option<String>,
}

/// Routes `event` (with its `data`) that happened in `chat`. `container(plugin, chat)` is the
/// plugin's instance in a chat, when the controller made one.
pub fn route<'a>(
    event: &str,
    data: &Value,
    chat: Chat<'_>,
    plugins: &[PluginFacts<'_>],
    container: impl Fn(&str, &str) -> Option<Container<'a>>,
) -> Routing {
    let mut routing = Routing::default();
    if !runs_plugins(chat.spec) {
        routing.ignored = Some(if chat.spec.hidden {
            "events in hidden threads are not sent".into()
        } else {
            format!("plugins don't run in {} chats", app_name(chat.spec.app))
        });
        return routing;
    }
    let in_thread = chat.spec.kind != ChannelKind::Channel;
    for plugin in plugins {
        if !plugin.enabled || !plugin.manifest.events.iter().any(|e| e == event) {
            continue;
        }
        let targets: Vec<(&str, Option<&str>)> = if is_host_event(event) || !in_thread {
            vec![(chat.name, None)]
        } else {
            let parent = chat.spec.parent.as_deref().unwrap_or(chat.name);
            match plugin.manifest.thread_events {
                ThreadEvents::Thread => vec![(chat.name, Some(chat.name))],
                ThreadEvents::Channel => vec![(parent, Some(chat.name))],
                ThreadEvents::Both => vec![(chat.name, Some(chat.name)), (parent, Some(chat.name))],
            }
        };
        let skip = |target: &str, reason| Skip {
            plugin: plugin.name.to_string(),
            chat: target.to_string(),
            reason,
        };
        if let Some(reason) = refusal(event, data, plugin) {
            routing
                .skipped
                .extend(targets.iter().map(|(t, _)| skip(t, reason.clone())));
            continue;
        }
        // The switches of the chat the event is in.
        let event_chat_switches = container(plugin.name, chat.name).map(|c| c.switches);
        for (target, thread_id) in targets {
            let Some(c) = container(plugin.name, target) else {
                routing.skipped.push(skip(target, SkipReason::NoInstance));
                continue;
            };
            let deliver = |start| Delivery {
                plugin: plugin.name.to_string(),
                chat: target.to_string(),
                thread_id: thread_id.map(str::to_string),
                start,
            };
            if c.running {
                routing.deliveries.push(deliver(false));
                continue;
            }
            if is_host_event(event) {
                routing.skipped.push(skip(target, SkipReason::NotRunning));
                continue;
            }
            match &plugin.manifest.events_start {
                None => routing.deliveries.push(deliver(true)),
                Some(gate) if gate.settings.is_empty() && gate.switches.is_empty() => {
                    routing
                        .skipped
                        .push(skip(target, SkipReason::EventsNeverStart));
                }
                Some(gate) => {
                    let setting_on = gate
                        .settings
                        .iter()
                        .any(|s| plugin.settings.get(s) == Some(&Value::Bool(true)));
                    let switch_on = gate.switches.iter().any(|id| {
                        event_chat_switches
                            .unwrap_or_default()
                            .iter()
                            .any(|s| &s.id == id && s.on)
                    });
                    if setting_on || switch_on {
                        routing.deliveries.push(deliver(true));
                    } else {
                        routing
                            .skipped
                            .push(skip(target, SkipReason::EventsStartOff));
                    }
                }
            }
        }
    }
    routing
}

/// The body a container gets for an event of type `kind`: the contract's `Event`, with the
/// thread's id when the delivery carries one. `settings.changed` carries the plugin's
/// `settings` in the chat's project (as `GET /channel` has them) instead of the posted data.
pub fn event_body(
    kind: &str,
    data: &Value,
    thread_id: Option<&str>,
    settings: &BTreeMap<String, Value>,
) -> Event {
    let data = if kind == SETTINGS_CHANGED {
        json!({ "settings": settings })
    } else {
        data.clone()
    };
    Event {
        kind: kind.to_string(),
        thread_id: thread_id.map(str::to_string),
        data,
    }
}

/// Why a subscribed plugin may not get the event at all.
fn refusal(event: &str, data: &Value, plugin: &PluginFacts) -> Option<SkipReason> {
    if !plugin.approved.contains(&Capability::EventsSubscribe) {
        return Some(SkipReason::NotApproved(Capability::EventsSubscribe));
    }
    if event == LIVE_SYSTEM_EVENT {
        if !plugin.approved.contains(&Capability::LiveControl) {
            return Some(SkipReason::NotApproved(Capability::LiveControl));
        }
        let subtype = data.get("subtype").and_then(Value::as_str).unwrap_or("");
        let listed = plugin
            .manifest
            .live
            .as_ref()
            .is_some_and(|l| l.messages.iter().any(|m| m == subtype));
        if !listed {
            return Some(SkipReason::SubtypeNotListed(subtype.to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::App;

    /// A manifest subscribed to message.created, with `extra` fields merged in.
    fn manifest(id: &str, extra: Value) -> Manifest {
        let mut m = json!({
            "id": id, "name": "P", "version": "1", "api": "1",
            "capabilities": ["events.subscribe", "ui.composer_switch", "live.control"],
            "events": ["message.created", "settings.changed", "live.system"],
            "settings": { "sync": { "type": "boolean", "default": false } },
            "ui": { "composer_switches": [{ "id": "mode", "label": "Mode", "icon": "ui/mode.svg" }] },
            "live": { "messages": ["compact"] },
        });
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        model::manifest::from_value(&m).unwrap()
    }

    fn spec(kind: ChannelKind, parent: Option<&str>) -> ChannelSpec {
        ChannelSpec {
            project: "proj".into(),
            kind,
            parent: parent.map(Into::into),
            app: App::Desktop,
            hidden: false,
            working_tree: None,
        }
    }

    struct World {
        manifests: Vec<Manifest>,
        approved: BTreeSet<Capability>,
        settings: BTreeMap<String, Value>,
        /// (plugin, chat) → (running, switch mode on).
        containers: BTreeMap<(String, String), (bool, Vec<SwitchState>)>,
        enabled: bool,
    }

    impl World {
        fn new(manifests: Vec<Manifest>) -> Self {
            Self {
                manifests,
                approved: Capability::ALL.into_iter().collect(),
                settings: BTreeMap::from([("sync".into(), json!(false))]),
                containers: BTreeMap::new(),
                enabled: true,
            }
        }

        /// Every plugin has an instance in `general` and `general-t1`, all stopped.
        fn with_instances(mut self) -> Self {
            for m in &self.manifests {
                for chat in ["general", "general-t1"] {
                    self.containers
                        .insert((m.id.clone(), chat.into()), (false, vec![]));
                }
            }
            self
        }

        fn running(mut self, plugin: &str, chat: &str) -> Self {
            self.containers
                .get_mut(&(plugin.into(), chat.into()))
                .unwrap()
                .0 = true;
            self
        }

        fn switch_on(mut self, plugin: &str, chat: &str) -> Self {
            self.containers
                .get_mut(&(plugin.into(), chat.into()))
                .unwrap()
                .1 = vec![SwitchState {
                id: "mode".into(),
                on: true,
                title: None,
                error: false,
                busy: false,
            }];
            self
        }

        fn route(&self, event: &str, data: Value, chat: &str, spec: &ChannelSpec) -> Routing {
            let facts: Vec<PluginFacts> = self
                .manifests
                .iter()
                .map(|m| PluginFacts {
                    name: &m.id,
                    manifest: m,
                    approved: &self.approved,
                    enabled: self.enabled,
                    settings: &self.settings,
                })
                .collect();
            route(
                event,
                &data,
                Chat { name: chat, spec },
                &facts,
                |plugin, chat| {
                    self.containers
                        .get(&(plugin.to_string(), chat.to_string()))
                        .map(|(running, switches)| Container {
                            running: *running,
                            switches,
                        })
                },
            )
        }
    }

    fn delivered(r: &Routing) -> Vec<(String, String, Option<String>, bool)> {
        r.deliveries
            .iter()
            .map(|d| {
                (
                    d.plugin.clone(),
                    d.chat.clone(),
                    d.thread_id.clone(),
                    d.start,
                )
            })
            .collect()
    }

    fn d(p: &str, c: &str, t: Option<&str>, start: bool) -> (String, String, Option<String>, bool) {
        (p.into(), c.into(), t.map(Into::into), start)
    }

    #[test]
    fn a_channel_event_goes_to_the_channels_container_starting_it() {
        let w = World::new(vec![manifest("pa", json!({}))]).with_instances();
        let r = w.route(
            "message.created",
            json!({}),
            "general",
            &spec(ChannelKind::Channel, None),
        );
        assert_eq!(delivered(&r), [d("pa", "general", None, true)]);
        assert!(r.skipped.is_empty());
    }

    #[test]
    fn thread_events_picks_the_threads_the_channels_or_both_containers() {
        let w = World::new(vec![
            manifest("thread", json!({})),
            manifest("channel", json!({"thread_events": "channel"})),
            manifest("both", json!({"thread_events": "both"})),
        ])
        .with_instances();
        let r = w.route(
            "message.created",
            json!({}),
            "general-t1",
            &spec(ChannelKind::Thread, Some("general")),
        );
        let t1 = Some("general-t1");
        assert_eq!(
            delivered(&r),
            [
                d("thread", "general-t1", t1, true),
                d("channel", "general", t1, true),
                d("both", "general-t1", t1, true),
                d("both", "general", t1, true),
            ]
        );
        // A worktree thread is a thread too.
        let r = w.route(
            "message.created",
            json!({}),
            "general-t1",
            &spec(ChannelKind::Worktree, Some("general")),
        );
        assert_eq!(r.deliveries.len(), 4);
    }

    #[test]
    fn hidden_threads_and_chats_outside_the_desktop_get_nothing() {
        let w = World::new(vec![manifest("pa", json!({"thread_events": "channel"}))])
            .with_instances()
            .running("pa", "general");
        let mut hidden = spec(ChannelKind::Thread, Some("general"));
        hidden.hidden = true;
        let r = w.route("message.created", json!({}), "general-t1", &hidden);
        assert!(r.deliveries.is_empty() && r.skipped.is_empty());
        assert!(r.ignored.unwrap().contains("hidden"));
        let mut slack = spec(ChannelKind::Channel, None);
        slack.app = App::Slack;
        let r = w.route("message.created", json!({}), "general", &slack);
        assert!(r.deliveries.is_empty());
        assert!(r.ignored.unwrap().contains("Slack"));
    }

    #[test]
    fn only_plugins_enabled_and_subscribed_with_the_capability_approved() {
        let mut w = World::new(vec![manifest("pa", json!({}))]).with_instances();
        let chan = spec(ChannelKind::Channel, None);
        assert!(
            w.route("agent.status", json!({}), "general", &chan)
                .deliveries
                .is_empty(),
            "not subscribed"
        );
        w.approved.remove(&Capability::EventsSubscribe);
        let r = w.route("message.created", json!({}), "general", &chan);
        assert!(r.deliveries.is_empty());
        assert_eq!(
            r.skipped[0].reason,
            SkipReason::NotApproved(Capability::EventsSubscribe)
        );
        w.approved.insert(Capability::EventsSubscribe);
        w.enabled = false;
        let r = w.route("message.created", json!({}), "general", &chan);
        assert_eq!(r, Routing::default());
        // No instance yet: said so.
        let mut w = World::new(vec![manifest("pa", json!({}))]);
        w.enabled = true;
        let r = w.route("message.created", json!({}), "general", &chan);
        assert_eq!(r.skipped[0].reason, SkipReason::NoInstance);
    }

    #[test]
    fn events_start_gates_starting_by_settings_and_the_event_chats_switches() {
        let gated = json!({"events_start": {"settings": ["sync"], "switches": ["mode"]}, "thread_events": "channel"});
        let thread = spec(ChannelKind::Thread, Some("general"));
        let w = World::new(vec![manifest("pg", gated.clone())]).with_instances();
        let r = w.route("message.created", json!({}), "general-t1", &thread);
        assert!(r.deliveries.is_empty());
        assert_eq!(r.skipped[0].reason, SkipReason::EventsStartOff);
        // A boolean setting it names is on in the project: it starts.
        let mut w = World::new(vec![manifest("pg", gated.clone())]).with_instances();
        w.settings.insert("sync".into(), json!(true));
        let r = w.route("message.created", json!({}), "general-t1", &thread);
        assert_eq!(
            delivered(&r),
            [d("pg", "general", Some("general-t1"), true)]
        );
        // A switch it names is on in the chat the event is in (the thread), though the
        // event goes to the channel's container.
        let w = World::new(vec![manifest("pg", gated.clone())])
            .with_instances()
            .switch_on("pg", "general-t1");
        let r = w.route("message.created", json!({}), "general-t1", &thread);
        assert_eq!(
            delivered(&r),
            [d("pg", "general", Some("general-t1"), true)]
        );
        // On in another chat only: no.
        let w = World::new(vec![manifest("pg", gated)])
            .with_instances()
            .switch_on("pg", "general");
        let r = w.route("message.created", json!({}), "general-t1", &thread);
        assert!(r.deliveries.is_empty());
    }

    #[test]
    fn a_running_container_gets_every_event_and_empty_events_start_never_starts() {
        let never = json!({"events_start": {}});
        let chan = spec(ChannelKind::Channel, None);
        let w = World::new(vec![manifest("pn", never.clone())]).with_instances();
        let r = w.route("message.created", json!({}), "general", &chan);
        assert_eq!(r.skipped[0].reason, SkipReason::EventsNeverStart);
        let w = World::new(vec![manifest("pn", never)])
            .with_instances()
            .running("pn", "general");
        let r = w.route("message.created", json!({}), "general", &chan);
        assert_eq!(delivered(&r), [d("pn", "general", None, false)]);
    }

    #[test]
    fn settings_changed_goes_only_to_running_containers_without_a_thread_id() {
        let w = World::new(vec![
            manifest("pa", json!({})),
            manifest("pb", json!({"thread_events": "both"})),
        ])
        .with_instances()
        .running("pb", "general-t1");
        let r = w.route(
            SETTINGS_CHANGED,
            json!({}),
            "general-t1",
            &spec(ChannelKind::Thread, Some("general")),
        );
        assert_eq!(delivered(&r), [d("pb", "general-t1", None, false)]);
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(r.skipped[0].reason, SkipReason::NotRunning);
    }

    #[test]
    fn live_system_needs_live_control_and_a_listed_subtype() {
        let chan = spec(ChannelKind::Channel, None);
        let mut w = World::new(vec![manifest("pl", json!({}))])
            .with_instances()
            .running("pl", "general");
        let r = w.route(
            LIVE_SYSTEM_EVENT,
            json!({"subtype": "compact"}),
            "general",
            &chan,
        );
        assert_eq!(r.deliveries.len(), 1);
        let r = w.route(
            LIVE_SYSTEM_EVENT,
            json!({"subtype": "other"}),
            "general",
            &chan,
        );
        assert_eq!(
            r.skipped[0].reason,
            SkipReason::SubtypeNotListed("other".into())
        );
        w.approved.remove(&Capability::LiveControl);
        let r = w.route(
            LIVE_SYSTEM_EVENT,
            json!({"subtype": "compact"}),
            "general",
            &chan,
        );
        assert_eq!(
            r.skipped[0].reason,
            SkipReason::NotApproved(Capability::LiveControl)
        );
    }

    #[test]
    fn a_container_gets_the_event_its_thread_and_for_settings_changed_the_settings() {
        let settings = BTreeMap::from([("sync".to_string(), json!(true))]);
        let body = |b: Event| serde_json::to_value(b).unwrap();
        assert_eq!(
            body(event_body(
                "message.created",
                &json!({"text": "hi"}),
                Some("general-t1"),
                &settings
            )),
            json!({"type": "message.created", "thread_id": "general-t1", "data": {"text": "hi"}})
        );
        assert_eq!(
            body(event_body(
                SETTINGS_CHANGED,
                &json!({"posted": 1}),
                None,
                &settings
            )),
            json!({"type": "settings.changed", "data": {"settings": {"sync": true}}})
        );
    }
}

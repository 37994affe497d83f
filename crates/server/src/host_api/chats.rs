//! `GET /namespaces/{namespace}/chats`: a namespace's chats, each with its plugins' instances
//! (phase, breaker, last activity, the last stop) and its unread cards: the console's sidebar
//! and its chat header. Read from the index, never the cluster; built by the pure
//! [`chat_views`].

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use serde::Serialize;
use serde_json::json;

use super::auth::Permission;
use super::cards;
use super::error::HostError;
use super::state::HostState;
use crate::delivery::changes::InstanceView;
use model::resources::{App, Channel, ChannelKind, PluginInstance};

/// One chat as the list answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatView {
    pub name: String,
    pub kind: ChannelKind,
    /// A thread's channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub project: String,
    pub app: App,
    /// A plugin's hidden thread (its agent runs): no plugin runs there.
    pub hidden: bool,
    /// Its cards not read yet.
    pub unread: usize,
    /// The instances of the plugins its project enables, by plugin name.
    pub plugins: Vec<InstanceView>,
}

/// The chats of one namespace, by name, each with the instances whose `spec.channel` it is
/// (by plugin name) and its count in `unread` (a chat not named there has none).
pub fn chat_views<'a>(
    chats: impl IntoIterator<Item = &'a Channel>,
    instances: impl IntoIterator<Item = &'a PluginInstance>,
    unread: &BTreeMap<String, usize>,
) -> Vec<ChatView> {
    let mut by_chat: BTreeMap<&str, Vec<InstanceView>> = BTreeMap::new();
    for i in instances {
        by_chat
            .entry(i.spec.channel.as_str())
            .or_default()
            .push(InstanceView::of(i));
    }
    let mut views: Vec<ChatView> = chats
        .into_iter()
        .map(|c| {
            let name = c.name_any();
            let mut plugins = by_chat.remove(name.as_str()).unwrap_or_default();
            plugins.sort_by(|a, b| a.plugin.cmp(&b.plugin));
            ChatView {
                unread: unread.get(&name).copied().unwrap_or(0),
                kind: c.spec.kind,
                parent: c.spec.parent.clone(),
                project: c.spec.project.clone(),
                app: c.spec.app,
                hidden: c.spec.hidden,
                plugins,
                name,
            }
        })
        .collect();
    views.sort_by(|a, b| a.name.cmp(&b.name));
    views
}

/// `GET /namespaces/{namespace}/chats`.
pub async fn list(
    State(s): State<HostState>,
    Path(ns): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::list_chats(&ns)).await?;
    let index = s.index();
    let in_ns = |n: Option<String>| n.as_deref() == Some(ns.as_str());
    let chats: Vec<Arc<Channel>> = index
        .channels
        .state()
        .into_iter()
        .filter(|c| in_ns(c.namespace()))
        .collect();
    let instances: Vec<Arc<PluginInstance>> = index
        .instances
        .state()
        .into_iter()
        .filter(|i| in_ns(i.namespace()) && i.metadata.deletion_timestamp.is_none())
        .collect();
    let unread = cards::unread_in(index, &ns);
    let views = chat_views(
        chats.iter().map(Arc::as_ref),
        instances.iter().map(Arc::as_ref),
        &unread,
    );
    Ok(Json(json!({ "chats": views })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::InstancePhase;
    use model::resources::{BreakerState, ChannelSpec, PluginInstanceSpec, PluginInstanceStatus};

    fn chat(name: &str, parent: Option<&str>) -> Channel {
        let mut c = Channel::new(
            name,
            ChannelSpec {
                project: "proj".into(),
                kind: if parent.is_some() {
                    ChannelKind::Thread
                } else {
                    ChannelKind::Channel
                },
                parent: parent.map(Into::into),
                app: App::Desktop,
                hidden: false,
                working_tree: None,
            },
        );
        c.metadata.namespace = Some("team".into());
        c
    }

    fn instance(plugin: &str, chat: &str, status: Option<PluginInstanceStatus>) -> PluginInstance {
        let mut i = PluginInstance::new(
            &format!("{plugin}-{chat}"),
            PluginInstanceSpec {
                plugin: plugin.into(),
                channel: chat.into(),
                project: "proj".into(),
            },
        );
        i.status = status;
        i
    }

    #[test]
    fn each_chat_lists_its_own_instances_by_plugin_and_its_unread_count() {
        let chats = [
            chat("random", None),
            chat("general", None),
            chat("general-t1", Some("general")),
        ];
        let running = PluginInstanceStatus {
            phase: Some(InstancePhase::Running),
            last_activity: Some("2026-12-05T09:00:00Z".into()),
            breaker: Some(BreakerState {
                state: "Open".into(),
                failures: 3,
                open_until: None,
                container: None,
            }),
            ..Default::default()
        };
        let instances = [
            instance("quiz", "general", Some(running)),
            instance("echo", "general", None),
            instance("echo", "general-t1", None),
        ];
        let unread = BTreeMap::from([("general".to_string(), 2)]);
        let views = chat_views(&chats, &instances, &unread);
        let names: Vec<&str> = views.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["general", "general-t1", "random"]);
        let general = &views[0];
        assert_eq!(general.unread, 2);
        assert_eq!(
            general.plugins,
            [
                InstanceView {
                    plugin: "echo".into(),
                    instance: "echo-general".into(),
                    phase: InstancePhase::Stopped,
                    breaker: "Closed".into(),
                    last_activity: None,
                    stopped_at: None,
                },
                InstanceView {
                    plugin: "quiz".into(),
                    instance: "quiz-general".into(),
                    phase: InstancePhase::Running,
                    breaker: "Open".into(),
                    last_activity: Some("2026-12-05T09:00:00Z".into()),
                    stopped_at: None,
                },
            ]
        );
        assert_eq!(views[1].parent.as_deref(), Some("general"));
        assert_eq!(views[1].plugins.len(), 1);
        assert!(views[2].plugins.is_empty());
        assert_eq!(views[2].unread, 0);
    }
}

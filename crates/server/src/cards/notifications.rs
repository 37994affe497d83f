//! A chat's notifications, as its drawer lists them beside the cards: what its plugins posted
//! with `POST /notifications` (approved for `notifications.send`), from the chat's inbox
//! ConfigMaps, newest first, each unread or not ([`super::read_marks`]). A notification is
//! text (a title, a body, a level): unlike a card it has no page, so it shows whatever its
//! plugin is now, and goes only with its plugin's instance in the chat. Pure: the host API's
//! route gathers the maps (`crate::host_api::notifications`).

use k8s_openapi::api::core::v1::ConfigMap;
use serde::Serialize;

use super::inbox::{self, Kind, Level};
use super::read_marks;

/// One notification, as the drawer lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listed {
    pub id: String,
    /// Who posted it: `plugin` (its `POST /notifications`) or `host` (this host's own, about
    /// the plugin: [`super::host_notes`]).
    pub from: &'static str,
    /// The plugin that posted it, or that the host's is about.
    pub plugin: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    pub level: Level,
    pub created: String,
    pub unread: bool,
}

/// The notifications of a chat's inbox ConfigMaps, newest first (by `created`, then by id).
pub fn listed<'a>(maps: impl IntoIterator<Item = &'a ConfigMap>) -> Vec<Listed> {
    let mut all: Vec<(inbox::Entry, Listed)> = maps
        .into_iter()
        .flat_map(|map| {
            let plugin = inbox::plugin_of(map);
            let host = super::host_notes::is_host_inbox(map);
            let marked = read_marks::marked(map);
            inbox::entries(map)
                .into_iter()
                .filter(|e| e.kind == Kind::Notification)
                .map(move |entry| {
                    let about = entry.data.as_ref().and_then(|d| d["plugin"].as_str());
                    let listed = Listed {
                        id: entry.id.clone(),
                        from: if host { "host" } else { "plugin" },
                        plugin: match (host, about) {
                            (true, Some(about)) => about.to_string(),
                            _ => plugin.clone(),
                        },
                        title: entry.title.clone(),
                        body: entry.body.clone(),
                        level: entry.level.unwrap_or_default(),
                        created: entry.created.clone(),
                        unread: !marked.contains(&entry.id),
                    };
                    (entry, listed)
                })
        })
        .collect();
    all.sort_by(|(a, _), (b, _)| inbox::age(b).cmp(&inbox::age(a)));
    all.into_iter().map(|(_, listed)| listed).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cards::inbox::Entry;

    fn inbox_with(plugin: &str, entries: &[(&str, Kind, &str)], read: &[&str]) -> ConfigMap {
        let mut map = inbox::template(
            "team",
            &format!("{plugin}-general"),
            plugin,
            "proj",
            "general",
            None,
        );
        let data = map.data.get_or_insert_default();
        for (id, kind, created) in entries {
            let entry = Entry {
                id: id.to_string(),
                kind: *kind,
                card: (*kind == Kind::Card).then(|| "score".into()),
                title: format!("title of {id}"),
                data: None,
                body: (*kind == Kind::Notification).then(|| "body".into()),
                level: (*kind == Kind::Notification).then_some(Level::Warning),
                created: created.to_string(),
            };
            data.insert(id.to_string(), serde_json::to_string(&entry).unwrap());
        }
        map.metadata.annotations = Some(
            read.iter()
                .map(|id| (format!("{}{id}", read_marks::READ_PREFIX), "T".into()))
                .collect(),
        );
        map
    }

    #[test]
    fn notifications_of_every_plugin_newest_first_without_the_cards() {
        let maps = [
            inbox_with(
                "quiz",
                &[
                    ("note-1", Kind::Notification, "2026-01-01T00:00:01Z"),
                    ("card-1", Kind::Card, "2026-01-01T00:00:05Z"),
                ],
                &["note-1"],
            ),
            inbox_with(
                "echo",
                &[("note-2", Kind::Notification, "2026-01-01T00:00:02Z")],
                &[],
            ),
        ];
        let listed = listed(&maps);
        let seen: Vec<(&str, &str, bool)> = listed
            .iter()
            .map(|n| (n.id.as_str(), n.plugin.as_str(), n.unread))
            .collect();
        assert_eq!(seen, [("note-2", "echo", true), ("note-1", "quiz", false)]);
        assert_eq!(listed[0].level, Level::Warning);
        assert_eq!(listed[0].from, "plugin");
        assert_eq!(listed[0].body.as_deref(), Some("body"));
    }

    #[test]
    fn the_hosts_own_are_told_apart_and_name_the_plugin_they_are_about() {
        use crate::cards::host_notes::{self, About};
        let chat = model::resources::Channel::new(
            "general",
            model::resources::ChannelSpec {
                project: "proj".into(),
                kind: model::resources::ChannelKind::Channel,
                parent: None,
                app: model::resources::App::Desktop,
                hidden: false,
                working_tree: None,
            },
        );
        let mut map = host_notes::template(&chat);
        let about = About::FailedAction {
            plugin: "echo",
            action: "tick",
            task: "echo-general-tick",
            why: "it timed out",
        };
        let entry = host_notes::entry(&about, "2026-01-01T00:00:03Z");
        for (k, v) in host_notes::patch(&[], &entry).unwrap() {
            map.data.get_or_insert_default().insert(k, v.unwrap());
        }
        let listed = listed(&[map]);
        assert_eq!(
            (listed[0].from, listed[0].plugin.as_str(), listed[0].level),
            ("host", "echo", Level::Error)
        );
        assert_eq!(listed[0].body.as_deref(), Some("it timed out"));
    }
}

//! Cards and notifications: where they are stored for the app to read.
//!
//! Each (plugin, chat) has one ConfigMap, `<instance>-inbox`, owned by its PluginInstance (so
//! removing the plugin drops its notifications), labelled like the instance's other children
//! with `app.kubernetes.io/component=inbox`. Each key is one entry's id; each value the entry
//! as JSON ([`Entry`]). The app lists the chat's inbox ConfigMaps by label
//! (`plugins.loop.dev/channel=<chat>`, `app.kubernetes.io/component=inbox`) to fill the
//! notification drawer. A chat keeps the newest [`MAX_ENTRIES`] entries of each plugin; writing
//! one more drops the oldest.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use model::names;

/// Entries kept per (plugin, chat).
pub const MAX_ENTRIES: usize = 100;
/// The largest entry as JSON; a card's or notification's title and a notification's body, in
/// characters.
pub use sdk::api::limits::{
    MAX_INBOX_ENTRY_BYTES as MAX_ENTRY_BYTES, MAX_NOTIFICATION_BODY as MAX_BODY, MAX_TITLE,
};

/// The inbox ConfigMap of an instance.
pub fn inbox_name(instance: &str) -> String {
    names::join_name(&[instance, "inbox"])
}

/// One card or notification, as stored and as answered, what it is, and how a notification
/// is shown: the Plugin API's own wire types (`InboxEntry`), as the SDK's client reads them.
pub use sdk::api::wire::{InboxEntry as Entry, InboxKind as Kind, Level};

/// The entries of an inbox ConfigMap that parse.
pub fn entries(map: &ConfigMap) -> Vec<Entry> {
    map.data
        .iter()
        .flatten()
        .filter_map(|(_, v)| serde_json::from_str::<Entry>(v).ok())
        .collect()
}

/// The entry with this id.
pub fn entry(map: &ConfigMap, id: &str) -> Option<Entry> {
    let text = map.data.as_ref()?.get(id)?;
    serde_json::from_str(text).ok()
}

/// What orders entries by age, oldest first: the time they were posted (to the millisecond;
/// an unreadable time counts as oldest), then the id.
pub fn age(entry: &Entry) -> (Option<jiff::Timestamp>, &str) {
    (entry.created.parse().ok(), &entry.id)
}

/// The keys to drop so that one more entry fits: the oldest beyond `MAX_ENTRIES - 1`.
pub fn to_drop(existing: &[Entry]) -> Vec<String> {
    let mut by_age: Vec<&Entry> = existing.iter().collect();
    by_age.sort_by(|a, b| age(a).cmp(&age(b)));
    let excess = (existing.len() + 1).saturating_sub(MAX_ENTRIES);
    by_age
        .into_iter()
        .take(excess)
        .map(|e| e.id.clone())
        .collect()
}

/// The inbox ConfigMap as created when it does not exist yet (its data comes by patch).
pub fn template(
    namespace: &str,
    instance: &str,
    plugin: &str,
    project: &str,
    channel: &str,
    owner: Option<OwnerReference>,
) -> ConfigMap {
    let mut labels = names::labels(plugin, project, channel, "inbox");
    labels.insert(names::LABEL_INSTANCE.into(), instance.into());
    crate::config_map::empty(inbox_name(instance), namespace, labels, owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(id: &str, created: &str) -> Entry {
        Entry {
            id: id.into(),
            kind: Kind::Notification,
            card: None,
            title: "t".into(),
            data: None,
            body: None,
            level: None,
            created: created.into(),
        }
    }

    #[test]
    fn the_oldest_entries_make_room() {
        let mut existing: Vec<Entry> = (0..MAX_ENTRIES)
            .map(|i| {
                e(
                    &format!("n-{i:03}"),
                    &format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60),
                )
            })
            .collect();
        existing.reverse();
        assert_eq!(to_drop(&existing), vec!["n-000".to_string()]);
        assert!(to_drop(&existing[..10]).is_empty());
    }

    #[test]
    fn entries_order_by_their_time_to_the_millisecond_then_id() {
        let mut list = [
            e("b", "2026-01-01T00:00:01Z"),
            e("c", "2026-01-01T00:00:01.250Z"),
            e("a", "2026-01-01T00:00:01.250Z"),
            e("z", "not a time"),
            e("d", "2026-01-01T00:00:00.999Z"),
        ];
        list.sort_by(|x, y| age(x).cmp(&age(y)));
        let ids: Vec<&str> = list.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["z", "d", "b", "a", "c"]);
    }

    #[test]
    fn entries_round_trip_through_the_config_map() {
        let mut map = template("team", "echo-a", "echo", "proj", "a", None);
        let entry_a = e("n-1", "2026-01-01T00:00:00Z");
        map.data
            .as_mut()
            .unwrap()
            .insert("n-1".into(), serde_json::to_string(&entry_a).unwrap());
        map.data.as_mut().unwrap().insert("junk".into(), "{".into());
        assert_eq!(entries(&map), vec![entry_a.clone()]);
        assert_eq!(entry(&map, "n-1"), Some(entry_a));
        assert_eq!(entry(&map, "junk"), None);
        assert_eq!(map.metadata.name.as_deref(), Some("echo-a-inbox"));
        assert_eq!(
            map.metadata.labels.as_ref().unwrap()["app.kubernetes.io/component"],
            "inbox"
        );
    }
}

//! Cards and notifications: where they are stored for the app to read.
//!
//! Each (plugin, chat) has one ConfigMap, `<instance>-inbox`, owned by its PluginInstance (so
//! removing the plugin drops its notifications), labelled like the instance's other children
//! with `app.kubernetes.io/component=inbox`. Each key is one entry's id; each value the entry
//! as JSON ([`Entry`]). The app lists the chat's inbox ConfigMaps by label
//! (`plugins.loop.dev/channel=<chat>`, `app.kubernetes.io/component=inbox`) to fill the
//! notification drawer. A chat keeps the newest [`MAX_ENTRIES`] cards and the newest
//! [`MAX_ENTRIES`] notifications of each plugin, within [`kind_budget`] bytes of each kind;
//! writing one more drops the oldest of its kind, so a chatty plugin's notifications never push
//! its cards out, and the map stays under the 1 MiB a ConfigMap may hold (a hundred cards of up
//! to 64 KiB each would not).

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use model::names;

/// Entries of each kind kept per (plugin, chat).
pub const MAX_ENTRIES: usize = 100;
/// The bytes a (plugin, chat)'s cards may take as stored.
pub const CARD_BYTES: usize = 640 * 1024;
/// The bytes a (plugin, chat)'s notifications may take as stored. With the cards', 960 KiB:
/// the rest of the ConfigMap's 1 MiB is its read marks (one short annotation per held entry)
/// and metadata.
pub const NOTIFICATION_BYTES: usize = 320 * 1024;

// Both kinds' budgets and a read mark (under 64 bytes) per entry fit the 1 MiB of a ConfigMap.
const _: () = assert!(CARD_BYTES + NOTIFICATION_BYTES + MAX_ENTRIES * 2 * 64 <= 1024 * 1024);

/// The bytes the entries of `kind` may take in one inbox.
pub fn kind_budget(kind: Kind) -> usize {
    match kind {
        Kind::Card => CARD_BYTES,
        Kind::Notification => NOTIFICATION_BYTES,
    }
}

/// An entry's size as stored: its key and its JSON.
pub fn stored_bytes(entry: &Entry) -> usize {
    entry.id.len() + serde_json::to_string(entry).map_or(0, |t| t.len())
}
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

/// The plugin whose inbox `map` is (its `plugins.loop.dev/plugin` label; empty without one).
pub fn plugin_of(map: &ConfigMap) -> String {
    map.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::LABEL_PLUGIN))
        .cloned()
        .unwrap_or_default()
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

/// The keys to drop so that `adding` fits: the oldest entries of its kind, until at most
/// [`MAX_ENTRIES`] `- 1` of them are left and they take at most [`kind_budget`] less its size.
/// Entries of the other kind are never dropped for it.
pub fn to_drop(existing: &[Entry], adding: &Entry) -> Vec<String> {
    let mut by_age: Vec<&Entry> = existing.iter().filter(|e| e.kind == adding.kind).collect();
    by_age.sort_by(|a, b| age(a).cmp(&age(b)));
    let budget = kind_budget(adding.kind).saturating_sub(stored_bytes(adding));
    let mut count = by_age.len();
    let mut bytes: usize = by_age.iter().map(|e| stored_bytes(e)).sum();
    let mut dropped = Vec::new();
    for oldest in by_age {
        if count < MAX_ENTRIES && bytes <= budget {
            break;
        }
        count -= 1;
        bytes -= stored_bytes(oldest);
        dropped.push(oldest.id.clone());
    }
    dropped
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
        let one_more = e("n-new", "2026-01-02T00:00:00Z");
        assert_eq!(to_drop(&existing, &one_more), vec!["n-000".to_string()]);
        assert!(to_drop(&existing[..10], &one_more).is_empty());
    }

    #[test]
    fn notifications_never_push_cards_out_and_each_kind_keeps_to_its_bytes() {
        let card = |i: usize, size: usize| Entry {
            kind: Kind::Card,
            card: Some("score".into()),
            data: Some(serde_json::json!("x".repeat(size))),
            ..e(
                &format!("card-{i:03}"),
                &format!("2026-01-01T00:00:{i:02}Z"),
            )
        };
        // A full set of cards, and a notification: only notifications could go, and none is held.
        let cards: Vec<Entry> = (0..MAX_ENTRIES).map(|i| card(i, 10)).collect();
        assert!(to_drop(&cards, &e("note-new", "2026-01-02T00:00:00Z")).is_empty());
        // Big cards: ten of 60 KiB are over the cards' budget with one more, so the oldest go
        // until it fits, though far fewer than MAX_ENTRIES are held.
        let big: Vec<Entry> = (0..10).map(|i| card(i, 60 * 1024)).collect();
        let dropped = to_drop(&big, &card(10, 60 * 1024));
        assert_eq!(dropped, ["card-000".to_string()]);
        let kept: usize =
            big[1..].iter().map(stored_bytes).sum::<usize>() + stored_bytes(&card(10, 60 * 1024));
        assert!(kept <= CARD_BYTES, "{kept}");
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

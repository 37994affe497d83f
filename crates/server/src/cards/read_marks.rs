//! Which cards and notifications of a chat's drawer were read: kept on their inbox ConfigMap
//! (one per plugin and chat, `crate::cards::inbox`), one annotation per read entry,
//! `read.plugins.loop.dev/<entry id>: <when it was marked read>`. Cards and notifications are
//! marked apart (each list has its own "mark all read"). Pure: what to write is
//! decided here, the write is [`super::marks`]'.
//!
//! Why one annotation per card, and not a list or a "read up to" mark:
//! - marking is a JSON merge patch of those annotations alone. It never touches `data`, which
//!   `POST /cards` merges into, and two markings of different cards set different keys, so
//!   concurrent posts and markings need no read-modify-write: no resourceVersion precondition,
//!   no retry, nothing lost;
//! - a mark names its card, so it can't mark a card posted after the list the person saw (a
//!   "read up to" time or id would), and reading one old card leaves the newer ones unread;
//! - the index keeps annotations (its trim drops only `managedFields`), so the drawer and the
//!   unread counts are read from the index;
//! - bounded by the inbox's own bound: a mark is written only for a card the map holds, and
//!   every write drops the marks of cards the inbox dropped since (the oldest go when it is
//!   full), so after a write a map holds at most one mark per entry it holds (`inbox::MAX_ENTRIES`
//!   of each kind).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;

use crate::cards::inbox::{self, Kind};

/// The prefix of a read mark's annotation key; the card's id follows.
pub const READ_PREFIX: &str = "read.plugins.loop.dev/";

/// The longest name part of an annotation key.
const MAX_KEY_NAME: usize = 63;

/// Which cards a marking marks read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marking {
    /// These cards (ids the map does not hold are passed over).
    Cards(BTreeSet<String>),
    /// Every card the map holds.
    All,
}

/// Annotation keys to set (`Some`) or remove (`None`), as a JSON merge patch writes them.
pub type MarkPatch = BTreeMap<String, Option<String>>;

/// The annotation key of a card's read mark; None for an id that can't name an annotation
/// (never one `POST /cards` gives: `card-<16 hex>`).
pub fn mark_key(card: &str) -> Option<String> {
    let valid = !card.is_empty()
        && card.len() <= MAX_KEY_NAME
        && card
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && card.starts_with(|c: char| c.is_ascii_alphanumeric())
        && card.ends_with(|c: char| c.is_ascii_alphanumeric());
    valid.then(|| format!("{READ_PREFIX}{card}"))
}

/// The ids of the cards marked read in `map` (whether or not it still holds them).
pub fn marked(map: &ConfigMap) -> BTreeSet<String> {
    map.metadata
        .annotations
        .iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix(READ_PREFIX))
        .map(str::to_string)
        .collect()
}

/// The ids of the entries of `kind` that `map` holds.
pub fn held(map: &ConfigMap, kind: Kind) -> BTreeSet<String> {
    inbox::entries(map)
        .into_iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.id)
        .collect()
}

/// How many of the entries of `kind` that `map` holds are not marked read.
pub fn unread(map: &ConfigMap, kind: Kind) -> usize {
    let marked = marked(map);
    held(map, kind).difference(&marked).count()
}

/// The patch that marks `marking` of the entries of `kind` read in `map` at `now` (RFC
/// 3339): a mark for each it names that the map holds unmarked, and the removal of the marks of
/// entries (of either kind) the map no longer holds. None when none is newly marked: a marking
/// that changes nothing writes nothing (the stale marks wait for the next write).
pub fn patch(map: &ConfigMap, marking: &Marking, kind: Kind, now: &str) -> Option<MarkPatch> {
    let marked = marked(map);
    let mut patch: MarkPatch = held(map, kind)
        .iter()
        .filter(|id| !marked.contains(*id))
        .filter(|id| match marking {
            Marking::All => true,
            Marking::Cards(ids) => ids.contains(*id),
        })
        .filter_map(|id| mark_key(id))
        .map(|key| (key, Some(now.to_string())))
        .collect();
    if patch.is_empty() {
        return None;
    }
    let every: BTreeSet<String> = inbox::entries(map).into_iter().map(|e| e.id).collect();
    patch.extend(
        marked
            .difference(&every)
            .map(|gone| (format!("{READ_PREFIX}{gone}"), None)),
    );
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cards::inbox::Entry;

    fn entry(id: &str, kind: Kind) -> Entry {
        Entry {
            id: id.into(),
            kind,
            card: (kind == Kind::Card).then(|| "score".into()),
            title: "t".into(),
            data: None,
            body: None,
            level: None,
            created: "2026-01-01T00:00:00Z".into(),
        }
    }

    /// An inbox holding `cards` (and a notification), with `read` marked.
    fn map(cards: &[&str], read: &[&str]) -> ConfigMap {
        let mut map = inbox::template("team", "quiz-general", "quiz", "proj", "general", None);
        let data = map.data.get_or_insert_default();
        for id in cards {
            let text = serde_json::to_string(&entry(id, Kind::Card)).unwrap();
            data.insert(id.to_string(), text);
        }
        let note = serde_json::to_string(&entry("note-1", Kind::Notification)).unwrap();
        data.insert("note-1".into(), note);
        map.metadata.annotations = Some(
            read.iter()
                .map(|id| (format!("{READ_PREFIX}{id}"), "2026-01-01T00:00:01Z".into()))
                .chain([("other/annotation".to_string(), "kept".to_string())])
                .collect(),
        );
        map
    }

    fn ids(list: &[&str]) -> Marking {
        Marking::Cards(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn unread_counts_the_held_cards_not_marked() {
        assert_eq!(unread(&map(&["card-a", "card-b"], &[]), Kind::Card), 2);
        assert_eq!(
            unread(&map(&["card-a", "card-b"], &["card-a"]), Kind::Card),
            1
        );
        // A mark of a card the inbox dropped counts for nothing; notifications are no cards.
        assert_eq!(unread(&map(&["card-b"], &["card-a"]), Kind::Card), 1);
        assert_eq!(unread(&map(&[], &[]), Kind::Card), 0);
        assert_eq!(unread(&map(&[], &[]), Kind::Notification), 1);
        assert_eq!(unread(&map(&[], &["note-1"]), Kind::Notification), 0);
    }

    #[test]
    fn marking_sets_one_key_per_newly_read_card() {
        let m = map(&["card-a", "card-b", "card-c"], &["card-a"]);
        assert_eq!(
            patch(
                &m,
                &ids(&["card-a", "card-b", "card-x", "note-1"]),
                Kind::Card,
                "T"
            ),
            Some(MarkPatch::from([(
                "read.plugins.loop.dev/card-b".into(),
                Some("T".into())
            )]))
        );
        assert_eq!(
            patch(&m, &Marking::All, Kind::Card, "T"),
            Some(MarkPatch::from([
                ("read.plugins.loop.dev/card-b".into(), Some("T".into())),
                ("read.plugins.loop.dev/card-c".into(), Some("T".into())),
            ]))
        );
    }

    #[test]
    fn a_marking_that_changes_nothing_writes_nothing() {
        let m = map(&["card-a"], &["card-a", "card-gone"]);
        assert_eq!(patch(&m, &ids(&["card-a"]), Kind::Card, "T"), None);
        assert_eq!(patch(&m, &Marking::All, Kind::Card, "T"), None);
        assert_eq!(patch(&m, &ids(&["card-elsewhere"]), Kind::Card, "T"), None);
    }

    #[test]
    fn notifications_are_marked_apart_from_cards_and_keep_their_marks() {
        let m = map(&["card-a"], &["note-1"]);
        assert_eq!(patch(&m, &Marking::All, Kind::Notification, "T"), None);
        let m = map(&["card-a"], &[]);
        assert_eq!(
            patch(&m, &Marking::All, Kind::Notification, "T"),
            Some(MarkPatch::from([(
                "read.plugins.loop.dev/note-1".into(),
                Some("T".into())
            )]))
        );
        // Marking cards keeps the notification's mark: it is held.
        let m = map(&["card-a"], &["note-1"]);
        assert_eq!(
            patch(&m, &Marking::All, Kind::Card, "T"),
            Some(MarkPatch::from([(
                "read.plugins.loop.dev/card-a".into(),
                Some("T".into())
            )]))
        );
    }

    #[test]
    fn a_write_drops_the_marks_of_cards_the_inbox_dropped() {
        let m = map(&["card-b"], &["card-a"]);
        assert_eq!(
            patch(&m, &Marking::All, Kind::Card, "T"),
            Some(MarkPatch::from([
                ("read.plugins.loop.dev/card-a".into(), None),
                ("read.plugins.loop.dev/card-b".into(), Some("T".into())),
            ]))
        );
    }

    #[test]
    fn only_ids_that_can_name_an_annotation_get_a_mark() {
        assert_eq!(
            mark_key("card-0123456789abcdef").as_deref(),
            Some("read.plugins.loop.dev/card-0123456789abcdef")
        );
        for bad in ["", "-card", "card-", "a/b", "a b", &"x".repeat(64)] {
            assert_eq!(mark_key(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_index_keeps_the_marks_when_it_trims_a_map() {
        let mut m = map(&["card-a"], &["card-a"]);
        m.metadata.managed_fields = Some(vec![Default::default()]);
        ::index::trim::managed_fields(&mut m);
        assert_eq!(marked(&m), BTreeSet::from(["card-a".to_string()]));
        assert_eq!(unread(&m, Kind::Card), 0);
    }
}

//! A chat's card drawer ("Cards" in the reference): the cards its plugins posted, from the
//! chat's inbox ConfigMaps (one per plugin), newest first, each unread or not
//! ([`super::read_marks`]), and what each shows: its page from a signed link, framed 160
//! pixels high until the page asks `ui.resize` for another height, or a note in its place
//! when its plugin can't show it any more (removed, no longer approved for
//! `ui.notification.card`, ...). Pure: [`crate::host_api::cards`] gathers the maps and what each
//! plugin is now ([`PluginNow`]).
//!
//! | the card's plugin now | the drawer shows | `reason` |
//! |---|---|---|
//! | no Plugin (removed; its cards go with its instances) | a note | `removed` |
//! | installed but unusable (manifest refused, plugins off) | a note | `unavailable` |
//! | `ui.notification.card` not approved | a note | `not_approved` |
//! | the chat's project does not enable it | a note | `not_enabled` |
//! | its manifest no longer has the card's page | a note | `unknown_card` |
//! | its image not read yet | a note | `unavailable` |
//! | otherwise | the page, from a signed link | |

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use serde::Serialize;
use serde_json::Value;

use super::read_marks;
use crate::cards::inbox::{self, Entry, Kind, MAX_TITLE};
use crate::ui::bundle::UI_DIR;
use crate::ui::link::{self, LINK_LIFETIME_SECONDS, Link, LinkKeys, Page};
use crate::ui::route::PREFIX as UI_PREFIX;
use model::manifest::Card;

/// A card's frame height, in pixels, until its page sets its own with `ui.resize`.
pub const CARD_HEIGHT: u32 = 160;

/// A card as stored, with its plugin and whether it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredCard {
    pub plugin: String,
    pub entry: Entry,
    pub unread: bool,
}

/// The cards of a chat's inbox ConfigMaps, newest first (by `created`, then by id).
pub fn stored_cards<'a>(maps: impl IntoIterator<Item = &'a ConfigMap>) -> Vec<StoredCard> {
    let mut cards: Vec<StoredCard> = maps
        .into_iter()
        .flat_map(|map| {
            let plugin = inbox::plugin_of(map);
            let marked = read_marks::marked(map);
            inbox::entries(map)
                .into_iter()
                .filter(|e| e.kind == Kind::Card)
                .map(move |entry| StoredCard {
                    plugin: plugin.clone(),
                    unread: !marked.contains(&entry.id),
                    entry,
                })
        })
        .collect();
    cards.sort_by(|a, b| inbox::age(&b.entry).cmp(&inbox::age(&a.entry)));
    cards
}

/// What a card's plugin is now, as far as showing its cards goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginNow {
    /// No Plugin of that name: removed (its inbox goes with its instances).
    Removed,
    /// Installed, but nothing of it is served: why (its manifest refused, plugins off).
    Unusable(String),
    Installed(Installed),
}

/// An installed plugin, as its cards see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    /// Whether `ui.notification.card` is approved (and declared).
    pub approved: bool,
    /// Whether the chat's project enables it; why not.
    pub enabled: Result<(), String>,
    /// The image digest its pages are served from; None until admission read it.
    pub digest: Option<String>,
    /// Its manifest's `ui.cards`.
    pub cards: Vec<Card>,
}

/// Why a card shows a note in its place.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Note {
    #[error("plugin {plugin} was removed")]
    Removed { plugin: String },
    #[error("plugin {plugin} is no longer approved for ui.notification.card")]
    NotApproved { plugin: String },
    #[error("{why}")]
    NotEnabled { why: String },
    #[error("plugin {plugin} no longer has a card {card:?}")]
    UnknownCard { plugin: String, card: String },
    #[error("{why}")]
    Unavailable { why: String },
}

impl Note {
    /// The note's reason, for a client to tell them apart.
    pub fn reason(&self) -> &'static str {
        match self {
            Note::Removed { .. } => "removed",
            Note::NotApproved { .. } => "not_approved",
            Note::NotEnabled { .. } => "not_enabled",
            Note::UnknownCard { .. } => "unknown_card",
            Note::Unavailable { .. } => "unavailable",
        }
    }
}

/// The page a card opens: the digest of the image its files come from, and its path under
/// `ui/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CardPage<'a> {
    pub digest: &'a str,
    pub path: &'a str,
}

/// What the card `card` (the manifest's id) of `plugin` shows: its page, or why a note
/// stands in its place.
pub fn shows<'a>(plugin: &str, now: &'a PluginNow, card: &str) -> Result<CardPage<'a>, Note> {
    let installed = match now {
        PluginNow::Removed => {
            return Err(Note::Removed {
                plugin: plugin.into(),
            });
        }
        PluginNow::Unusable(why) => return Err(Note::Unavailable { why: why.clone() }),
        PluginNow::Installed(installed) => installed,
    };
    if !installed.approved {
        return Err(Note::NotApproved {
            plugin: plugin.into(),
        });
    }
    if let Err(why) = &installed.enabled {
        return Err(Note::NotEnabled { why: why.clone() });
    }
    let Some(entry) = installed.cards.iter().find(|c| c.id == card) else {
        return Err(Note::UnknownCard {
            plugin: plugin.into(),
            card: card.into(),
        });
    };
    let Some(digest) = &installed.digest else {
        return Err(Note::Unavailable {
            why: format!("the image of plugin {plugin} has not been read yet"),
        });
    };
    Ok(CardPage {
        digest,
        path: entry.entry.strip_prefix(UI_DIR).unwrap_or(&entry.entry),
    })
}

/// One card of the drawer, as the list answers it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrawerCard {
    pub id: String,
    pub plugin: String,
    /// The manifest's card id.
    pub card: String,
    pub title: String,
    /// RFC 3339.
    pub created: String,
    pub unread: bool,
    #[serde(flatten)]
    pub shown: Shown,
}

/// What stands in the drawer for a card.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Shown {
    /// The card's page.
    Page {
        /// The page's signed link, a path on this server.
        url: String,
        /// Unix seconds after which the link opens nothing: list again before.
        expires: i64,
        /// The frame's height until the page asks for another with `ui.resize`.
        height: u32,
        /// What the plugin posted with the card (the page's `context.get`).
        data: Value,
    },
    /// A note in its place.
    Note { note: String, reason: &'static str },
}

/// The drawer of chat `chat` (`<namespace>/<channel>`) at `now` (unix seconds): `cards` as
/// [`stored_cards`] ordered them, each with its page's signed link or its note, by what its
/// plugin is now (`plugins`, by name; a plugin missing there counts as removed).
pub fn drawer(
    cards: Vec<StoredCard>,
    plugins: &BTreeMap<String, PluginNow>,
    chat: &str,
    keys: &LinkKeys,
    now: i64,
) -> Result<Vec<DrawerCard>, link::ClaimError> {
    let expires = now + LINK_LIFETIME_SECONDS;
    cards
        .into_iter()
        .map(|stored| {
            let card = stored.entry.card.clone().unwrap_or_default();
            let plugin_now = plugins.get(&stored.plugin).unwrap_or(&PluginNow::Removed);
            let shown = match shows(&stored.plugin, plugin_now, &card) {
                Ok(page) => {
                    let token = link::sign(
                        keys,
                        &Link {
                            plugin: stored.plugin.clone(),
                            digest: page.digest.to_string(),
                            chat: chat.to_string(),
                            page: Page::Card(stored.entry.id.clone()),
                            expires,
                        },
                    )?;
                    Shown::Page {
                        url: format!("{UI_PREFIX}/{token}/{}", page.path),
                        expires,
                        height: CARD_HEIGHT,
                        data: stored.entry.data.clone().unwrap_or(Value::Null),
                    }
                }
                Err(note) => Shown::Note {
                    note: note.to_string(),
                    reason: note.reason(),
                },
            };
            Ok(DrawerCard {
                id: stored.entry.id,
                plugin: stored.plugin,
                card,
                title: within_limit(stored.entry.title),
                created: stored.entry.created,
                unread: stored.unread,
                shown,
            })
        })
        .collect()
}

/// A title as the drawer shows it: at most `MAX_TITLE` characters, as `POST /cards` takes
/// them (a ConfigMap edited by hand may hold a longer one).
fn within_limit(title: String) -> String {
    match title.char_indices().nth(MAX_TITLE) {
        Some((end, _)) => title[..end].to_string(),
        None => title,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cards::read_marks::READ_PREFIX;
    use crate::ui::link::LinkKey;
    use serde_json::json;

    fn keys() -> LinkKeys {
        LinkKeys {
            current: LinkKey {
                id: "k".into(),
                secret: b"key".to_vec(),
            },
            previous: None,
        }
    }

    fn card(id: &str, created: &str) -> Entry {
        Entry {
            id: id.into(),
            kind: Kind::Card,
            card: Some("score".into()),
            title: format!("title of {id}"),
            data: Some(json!({ "of": id })),
            body: None,
            level: None,
            created: created.into(),
        }
    }

    /// The inbox of `plugin` in team/general holding `entries`, `read` marked.
    fn inbox(plugin: &str, entries: &[Entry], read: &[&str]) -> ConfigMap {
        let instance = format!("{plugin}-general");
        let mut map = inbox::template("team", &instance, plugin, "proj", "general", None);
        let data = map.data.get_or_insert_default();
        for e in entries {
            data.insert(e.id.clone(), serde_json::to_string(e).unwrap());
        }
        map.metadata.annotations = Some(
            read.iter()
                .map(|id| (format!("{READ_PREFIX}{id}"), "T".to_string()))
                .collect(),
        );
        map
    }

    fn installed() -> Installed {
        Installed {
            approved: true,
            enabled: Ok(()),
            digest: Some("sha256:aa".into()),
            cards: vec![Card {
                id: "score".into(),
                entry: "ui/cards/score.html".into(),
            }],
        }
    }

    #[test]
    fn cards_of_every_plugin_list_newest_first_with_their_read_marks() {
        let quiz = inbox(
            "quiz",
            &[
                card("card-1", "2026-01-01T10:00:00Z"),
                card("card-3", "2026-01-01T10:00:02.500Z"),
                Entry {
                    kind: Kind::Notification,
                    card: None,
                    ..card("note-1", "2026-01-01T11:00:00Z")
                },
            ],
            &["card-1"],
        );
        let echo = inbox(
            "echo",
            &[
                card("card-2", "2026-01-01T10:00:02Z"),
                // The same time: the id breaks the tie.
                card("card-4", "2026-01-01T10:00:02.500Z"),
            ],
            &[],
        );
        let listed: Vec<(String, String, bool)> = stored_cards([&quiz, &echo])
            .into_iter()
            .map(|c| (c.entry.id, c.plugin, c.unread))
            .collect();
        let expected = [
            ("card-4", "echo", true),
            ("card-3", "quiz", true),
            ("card-2", "echo", true),
            ("card-1", "quiz", false),
        ]
        .map(|(id, plugin, unread)| (id.to_string(), plugin.to_string(), unread));
        assert_eq!(listed, expected);
    }

    #[test]
    fn a_title_keeps_to_the_limit_of_post_cards() {
        assert_eq!(within_limit("é".repeat(MAX_TITLE)), "é".repeat(MAX_TITLE));
        assert_eq!(
            within_limit("é".repeat(MAX_TITLE + 5)),
            "é".repeat(MAX_TITLE)
        );
    }

    #[test]
    fn a_card_shows_its_page_while_its_plugin_can_show_it() {
        let now = PluginNow::Installed(installed());
        assert_eq!(
            shows("quiz", &now, "score"),
            Ok(CardPage {
                digest: "sha256:aa",
                path: "cards/score.html"
            })
        );
    }

    #[test]
    fn a_note_stands_in_for_a_card_its_plugin_cannot_show() {
        let with = |f: fn(&mut Installed)| {
            let mut i = installed();
            f(&mut i);
            PluginNow::Installed(i)
        };
        let cases = [
            (
                PluginNow::Removed,
                "score",
                "removed",
                "plugin quiz was removed",
            ),
            (
                PluginNow::Unusable("Plugin quiz is not admitted".into()),
                "score",
                "unavailable",
                "Plugin quiz is not admitted",
            ),
            (
                with(|i| i.approved = false),
                "score",
                "not_approved",
                "plugin quiz is no longer approved for ui.notification.card",
            ),
            (
                with(|i| i.enabled = Err("project proj does not enable plugin quiz".into())),
                "score",
                "not_enabled",
                "project proj does not enable plugin quiz",
            ),
            (
                PluginNow::Installed(installed()),
                "old",
                "unknown_card",
                "plugin quiz no longer has a card \"old\"",
            ),
            (
                with(|i| i.digest = None),
                "score",
                "unavailable",
                "the image of plugin quiz has not been read yet",
            ),
            // Removal and approval come before the rest.
            (
                with(|i| {
                    i.approved = false;
                    i.enabled = Err("not enabled".into());
                    i.digest = None;
                }),
                "old",
                "not_approved",
                "plugin quiz is no longer approved for ui.notification.card",
            ),
        ];
        for (now, card, reason, text) in cases {
            let note = shows("quiz", &now, card).unwrap_err();
            assert_eq!((note.reason(), note.to_string().as_str()), (reason, text));
        }
    }

    #[test]
    fn the_drawer_signs_a_link_to_each_shown_card_and_notes_the_rest() {
        let quiz = inbox("quiz", &[card("card-1", "2026-01-01T10:00:00Z")], &[]);
        let gone = inbox(
            "gone",
            &[card("card-2", "2026-01-01T10:00:01Z")],
            &["card-2"],
        );
        let plugins = BTreeMap::from([("quiz".to_string(), PluginNow::Installed(installed()))]);
        let listed = drawer(
            stored_cards([&quiz, &gone]),
            &plugins,
            "team/general",
            &keys(),
            100,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&listed[0]).unwrap(),
            json!({
                "id": "card-2", "plugin": "gone", "card": "score", "title": "title of card-2",
                "created": "2026-01-01T10:00:01Z", "unread": false,
                "note": "plugin gone was removed", "reason": "removed",
            })
        );
        let Shown::Page {
            url,
            expires,
            height,
            data,
        } = &listed[1].shown
        else {
            panic!("{listed:?}");
        };
        assert_eq!(
            (*expires, *height, data),
            (100 + LINK_LIFETIME_SECONDS, 160, &json!({ "of": "card-1" }))
        );
        let (token, page) = url
            .strip_prefix("/ui/v1/")
            .and_then(|rest| rest.split_once('/'))
            .unwrap();
        assert_eq!(page, "cards/score.html");
        assert_eq!(
            link::verify(&keys(), token, 100).unwrap(),
            Link {
                plugin: "quiz".into(),
                digest: "sha256:aa".into(),
                chat: "team/general".into(),
                page: Page::Card("card-1".into()),
                expires: 100 + LINK_LIFETIME_SECONDS,
            }
        );
        let answered = serde_json::to_value(&listed[1]).unwrap();
        assert_eq!(answered["unread"], true);
        assert!(answered.get("note").is_none(), "{answered}");
    }
}

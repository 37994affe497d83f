//! The card drawer's routes: a chat's cards with their links ([`list`]), marking them read
//! ([`mark_read`]), and the unread counts of a namespace's chats ([`unread`]), for the
//! sidebar. They read the index (the inbox ConfigMaps `POST /cards` fills, the Plugins), never
//! the cluster, and call no plugin; marking writes the read marks ([`crate::cards::read_marks`]).
//! What a card shows is decided by [`crate::cards::drawer`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use serde::Deserialize;
use serde_json::json;

use super::auth::Permission;
use super::error::{Code, HostError, HostResult};
use super::state::{HostState, json_body};
use crate::cards::drawer::{self, Installed, PluginNow};
use crate::cards::inbox::Kind;
use crate::cards::marks::MarkError;
use crate::cards::read_marks::{self, Marking};
use crate::delivery::target::{self, TargetError};
use crate::index::Index;
use model::manifest::Capability;
use model::names::{LABEL_CHANNEL, LABEL_COMPONENT};
use model::resources::{Channel, HostConfigSpec};

/// `app.kubernetes.io/component` of an inbox ConfigMap.
const INBOX: &str = "inbox";

/// `GET .../channels/{channel}/cards`: the chat's cards newest first, each with its link or
/// its note, and how many are unread.
pub async fn list(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::read_drawer(&ns, &chat))
        .await?;
    let channel = target::chat(s.index(), &ns, &chat)?;
    let keys = s.link_keys()?;
    let maps = inboxes(s.index(), &ns, Some(&chat));
    let cards = drawer::stored_cards(maps.iter().map(Arc::as_ref));
    let host = s.index().host_config();
    let names: BTreeSet<&str> = cards.iter().map(|c| c.plugin.as_str()).collect();
    let plugins: BTreeMap<String, PluginNow> = names
        .into_iter()
        .map(|name| {
            (
                name.into(),
                plugin_now(s.index(), &host.spec, &channel, name),
            )
        })
        .collect();
    let listed = drawer::drawer(
        cards,
        &plugins,
        &format!("{ns}/{chat}"),
        &keys,
        jiff::Timestamp::now().as_second(),
    )
    .map_err(|e| HostError::new(Code::Internal, e.to_string()))?;
    let unread = listed.iter().filter(|c| c.unread).count();
    Ok(Json(json!({ "cards": listed, "unread": unread })).into_response())
}

/// `POST .../cards/read`'s (and `.../notifications/read`'s) body: the entries to mark read, or
/// all of them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadRequest {
    #[serde(default)]
    ids: Option<Vec<String>>,
    #[serde(default)]
    all: bool,
}

/// What a marking's body asks for.
pub(super) fn marking(request: ReadRequest) -> HostResult<Marking> {
    match (request.ids, request.all) {
        (Some(ids), false) => Ok(Marking::Cards(ids.into_iter().collect())),
        (None, true) => Ok(Marking::All),
        _ => Err(HostError::new(
            Code::InvalidBody,
            "give the cards to mark read as ids: [...], or all: true, not both",
        )),
    }
}

/// `POST .../channels/{channel}/cards/read`: marks cards of the chat read (ids the chat does
/// not hold are passed over); answers how many stay unread.
pub async fn mark_read(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::mark_cards(&ns, &chat))
        .await?;
    target::chat(s.index(), &ns, &chat)?;
    let unread = mark(&s, &ns, &chat, &marking(json_body(&body)?)?, Kind::Card).await?;
    Ok(Json(json!({ "unread": unread })).into_response())
}

/// Marks `marking` of the chat's entries of `kind` read, inbox by inbox (a marking that
/// changes an inbox nothing writes nothing); answers how many of that kind stay unread.
pub(super) async fn mark(
    s: &HostState,
    ns: &str,
    chat: &str,
    marking: &Marking,
    kind: Kind,
) -> HostResult<usize> {
    let what = match kind {
        Kind::Card => "cards",
        Kind::Notification => "notifications",
    };
    let now = crate::clock::rfc3339(jiff::Timestamp::now());
    let mut unread = 0;
    for map in inboxes(s.index(), ns, Some(chat)) {
        let Some(patch) = read_marks::patch(&map, marking, kind, &now) else {
            unread += read_marks::unread(&map, kind);
            continue;
        };
        match s.marks.mark(&map, &patch).await {
            Ok(written) => unread += read_marks::unread(&written, kind),
            // Its plugin went, its entries with it.
            Err(MarkError::Gone { .. }) => {}
            Err(e @ MarkError::Failed { .. }) => {
                tracing::warn!(error = %e, "marking {what} read failed");
                return Err(HostError::new(
                    Code::Unavailable,
                    format!("the {what} could not be marked read; try again: {e}"),
                )
                .retry_after(1));
            }
        }
    }
    Ok(unread)
}

/// `GET /namespaces/{namespace}/cards/unread`: each chat of the namespace with unread cards
/// or notifications (what its drawer holds unread), and how many (a chat not named has none).
pub async fn unread(
    State(s): State<HostState>,
    Path(ns): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::count_cards(&ns)).await?;
    Ok(Json(json!({ "chats": unread_in(s.index(), &ns) })).into_response())
}

/// The unread cards of each chat of a namespace (chats with none left out).
pub fn unread_in(index: &Index, namespace: &str) -> BTreeMap<String, usize> {
    unread_by_chat(inboxes(index, namespace, None).iter().map(Arc::as_ref))
}

/// The unread cards of each chat the inbox ConfigMaps `maps` belong to; chats with none
/// left out.
pub fn unread_by_chat<'a>(
    maps: impl IntoIterator<Item = &'a ConfigMap>,
) -> BTreeMap<String, usize> {
    let mut chats = BTreeMap::new();
    for map in maps {
        let n = read_marks::unread(map, Kind::Card) + read_marks::unread(map, Kind::Notification);
        let Some(chat) = map.labels().get(LABEL_CHANNEL) else {
            continue;
        };
        if n > 0 {
            *chats.entry(chat.clone()).or_insert(0) += n;
        }
    }
    chats
}

/// The inbox ConfigMaps of a namespace, or of one chat of it, as the index holds them.
pub(super) fn inboxes(index: &Index, namespace: &str, chat: Option<&str>) -> Vec<Arc<ConfigMap>> {
    index
        .config_maps
        .state()
        .into_iter()
        .filter(|m| m.namespace().as_deref() == Some(namespace))
        .filter(|m| m.labels().get(LABEL_COMPONENT).map(String::as_str) == Some(INBOX))
        .filter(|m| {
            chat.is_none_or(|c| m.labels().get(LABEL_CHANNEL).map(String::as_str) == Some(c))
        })
        .collect()
}

/// What plugin `name` is now, for its cards in `chat`.
fn plugin_now(index: &Index, host: &HostConfigSpec, chat: &Channel, name: &str) -> PluginNow {
    match target::installed(index, host, name) {
        Err(TargetError::PluginNotFound { .. }) => PluginNow::Removed,
        Err(e) => PluginNow::Unusable(e.to_string()),
        Ok((plugin, compiled)) => PluginNow::Installed(Installed {
            approved: target::approved(&plugin, &compiled)
                .contains(&Capability::UiNotificationCard),
            enabled: target::enabled_in(index, host, chat, name).map_err(|e| e.to_string()),
            digest: crate::ui::route::pinned_digest(&plugin),
            cards: compiled.manifest.ui.cards.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cards::inbox::{self, Entry, Kind};

    fn inbox_of(plugin: &str, chat: &str, cards: &[&str], read: &[&str]) -> ConfigMap {
        let instance = format!("{plugin}-{chat}");
        let mut map = inbox::template("team", &instance, plugin, "proj", chat, None);
        let data = map.data.get_or_insert_default();
        for id in cards {
            let entry = Entry {
                id: id.to_string(),
                kind: Kind::Card,
                card: Some("score".into()),
                title: "t".into(),
                data: None,
                body: None,
                level: None,
                created: "2026-01-01T00:00:00Z".into(),
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
    fn unread_cards_add_up_per_chat_over_its_plugins() {
        let maps = [
            inbox_of("quiz", "general", &["card-1", "card-2"], &["card-1"]),
            inbox_of("echo", "general", &["card-3"], &[]),
            inbox_of("quiz", "random", &["card-4"], &["card-4"]),
            inbox_of("quiz", "empty", &[], &[]),
        ];
        assert_eq!(
            unread_by_chat(&maps),
            BTreeMap::from([("general".to_string(), 2)])
        );
    }

    #[test]
    fn a_marking_names_its_cards_or_all_of_them() {
        let parse = |body: &str| marking(serde_json::from_str(body).unwrap());
        assert_eq!(
            parse(r#"{"ids": ["card-1"]}"#).unwrap(),
            Marking::Cards(["card-1".to_string()].into())
        );
        assert_eq!(parse(r#"{"all": true}"#).unwrap(), Marking::All);
        for bad in [r#"{}"#, r#"{"all": false}"#, r#"{"ids": [], "all": true}"#] {
            assert_eq!(parse(bad).unwrap_err().code, Code::InvalidBody, "{bad}");
        }
    }
}

//! A chat's notifications in its drawer: listing them ([`list`]) and marking them read
//! ([`mark_read`]), with permissions of their own (`get`/`update channels/notifications`).
//! They read the index's inbox ConfigMaps (what `POST /notifications` fills) and call no
//! plugin; what is listed is decided by [`crate::cards::notifications`], what a marking writes
//! by [`crate::cards::read_marks`].

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::auth::Permission;
use super::cards::{inboxes, mark, marking};
use super::error::HostError;
use super::state::{HostState, json_body};
use crate::cards::inbox::Kind;
use crate::cards::notifications;
use crate::delivery::target;

/// `GET .../channels/{channel}/notifications`: the chat's notifications newest first, and how
/// many are unread.
pub async fn list(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::read_notifications(&ns, &chat))
        .await?;
    target::chat(s.index(), &ns, &chat)?;
    let maps = inboxes(s.index(), &ns, Some(&chat));
    let listed = notifications::listed(maps.iter().map(Arc::as_ref));
    let unread = listed.iter().filter(|n| n.unread).count();
    Ok(Json(json!({ "notifications": listed, "unread": unread })).into_response())
}

/// `POST .../channels/{channel}/notifications/read`: marks notifications of the chat read (ids
/// the chat does not hold are passed over); answers how many stay unread.
pub async fn mark_read(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::mark_notifications(&ns, &chat))
        .await?;
    target::chat(s.index(), &ns, &chat)?;
    let unread = mark(
        &s,
        &ns,
        &chat,
        &marking(json_body(&body)?)?,
        Kind::Notification,
    )
    .await?;
    Ok(Json(json!({ "unread": unread })).into_response())
}

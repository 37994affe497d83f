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
use super::cards::{inboxes, marking};
use super::error::{Code, HostError};
use super::state::{HostState, json_body};
use crate::cards::inbox::Kind;
use crate::cards::marks::MarkError;
use crate::cards::notifications;
use crate::cards::read_marks;
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
    let marking = marking(json_body(&body)?)?;
    let now = crate::clock::rfc3339(jiff::Timestamp::now());
    let mut unread = 0;
    for map in inboxes(s.index(), &ns, Some(&chat)) {
        let Some(patch) = read_marks::patch(&map, &marking, Kind::Notification, &now) else {
            unread += read_marks::unread(&map, Kind::Notification);
            continue;
        };
        match s.marks.mark(&map, &patch).await {
            Ok(written) => unread += read_marks::unread(&written, Kind::Notification),
            // Its plugin went, its notifications with it.
            Err(MarkError::Gone { .. }) => {}
            Err(e @ MarkError::Failed { .. }) => {
                tracing::warn!(error = %e, "marking notifications read failed");
                return Err(HostError::new(
                    Code::Unavailable,
                    format!("the notifications could not be marked read; try again: {e}"),
                )
                .retry_after(1));
            }
        }
    }
    Ok(Json(json!({ "unread": unread })).into_response())
}

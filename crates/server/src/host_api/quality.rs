//! A chat's quality scan, the app's side (`crate::quality` keeps it in the cluster):
//!
//! | method | route (under `.../namespaces/{ns}/channels/{channel}`) | RBAC on `channels/quality` | answer |
//! |---|---|---|---|
//! | PUT | `/quality` `{commit?, totals, functions}` | update | the scan as stored: its totals, when, how many functions were listed and kept; and what became of its `quality.scanned` event |
//! | GET | `/quality` | get | the scan as kept (404 `scan_not_found` before the first) |
//!
//! The body is read and checked by `crate::quality::scan::parse` (400 `invalid_body` naming
//! the field's path), at most `crate::quality::scan::MAX_BODY_BYTES` (413). Plugins read the
//! scan as hotspots through the Plugin API. A stored scan is a Loop event in the chat,
//! `quality.scanned` with `{commit, totals, scanned_at}`: `crate::delivery` sends it to the
//! containers the rules name (the chat's plugins subscribed to it), as `POST .../events`
//! sends the app's, and the answer says what became of it ([`super::events::answer`]).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;

use super::auth::Permission;
use super::error::{Code, HostError, HostResult};
use super::events;
use super::state::HostState;
use crate::calls::CallOptions;
use crate::delivery::{deliver_event, target};
use crate::quality::scan::{self, Scan};

/// `PUT .../quality`: stores the scan as the chat's latest, then sends `quality.scanned`,
/// starting the stopped containers the rules let it start.
pub async fn put(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::quality("update", &ns, &chat))
        .await?;
    let channel = target::chat(s.index(), &ns, &chat)?;
    let posted =
        scan::parse(&body).map_err(|e| HostError::new(Code::InvalidBody, e.to_string()))?;
    let stored = Scan::of(posted, Timestamp::now());
    s.quality.store(&channel, &stored).await.map_err(|e| {
        tracing::warn!(error = %e, "a quality scan was not stored");
        HostError::new(Code::Unavailable, format!("{e}; try again")).retry_after(1)
    })?;
    let report = deliver_event(
        &s.calls,
        &ns,
        &channel,
        scan::EVENT,
        &scan::event_data(&stored),
        CallOptions::DEMAND,
    )
    .await;
    let mut answer = scan::stored(&chat, &stored);
    answer["event"] = events::answer(&report);
    Ok(Json(answer).into_response())
}

/// `GET .../quality`: the chat's latest scan, as kept.
pub async fn get(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::quality("get", &ns, &chat))
        .await?;
    target::chat(s.index(), &ns, &chat)?;
    let scan = s.quality.scan(&ns, &chat).ok_or_else(|| {
        HostError::new(
            Code::ScanNotFound,
            format!("chat {chat} has no quality scan yet: PUT one first"),
        )
    })?;
    Ok(Json(scan::view(&chat, &scan)).into_response())
}

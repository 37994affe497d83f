//! The app's side of a chat's live session (`crate::live` keeps it in the cluster):
//!
//! | method | route (under `.../namespaces/{ns}/channels/{channel}`) | RBAC on `channels/live` | answer |
//! |---|---|---|---|
//! | GET | `/live` | get | the session (open or lapsed), whether the chat is live, the plugins holding it, the requests waiting |
//! | PUT | `/live` `{controls, lease_seconds?}` | update | opens or renews (the heartbeat) the session |
//! | DELETE | `/live` | delete | closes it; the requests waiting for it are dropped |
//! | GET | `/live/requests` | watch | a stream (`text/event-stream`) of the plugins' control requests: those waiting, then each new one, once |
//! | POST | `/live/requests/{id}` `{response}` | create | answers a request: the plugin's `POST /channel/live/control` gets `response` |
//!
//! The session's `live.status` and system messages reach plugins as events, through
//! `POST .../events` (`live.system` only to plugins approved for `live.control` whose
//! `live.messages` list the subtype).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ask_stream;
use super::auth::Permission;
use super::error::{Code, HostError, HostResult};
use super::state::{HostState, json_body};
use crate::live::session::Open;
use crate::live::{Live, LiveError};

fn live(s: &HostState) -> HostResult<Arc<Live>> {
    s.live.clone().ok_or_else(|| {
        HostError::new(
            Code::Unavailable,
            "this server keeps no live sessions (it runs without a cluster)",
        )
    })
}

fn live_error(e: LiveError) -> HostError {
    let code = match &e {
        LiveError::Invalid(_) => Code::InvalidBody,
        LiveError::NoChat { .. } => Code::ChannelNotFound,
        LiveError::NoRequest { .. } => Code::RequestNotFound,
        LiveError::Store { .. } => Code::Unavailable,
    };
    HostError::new(code, e.to_string())
}

/// `GET .../live`.
pub async fn get(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::live("get", &ns, &chat))
        .await?;
    let live = live(&s)?;
    Ok(Json(live.view(&ns, &chat)).into_response())
}

/// `PUT .../live`.
pub async fn put(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::live("update", &ns, &chat))
        .await?;
    let live = live(&s)?;
    let open: Open = json_body(&body)?;
    let session = live.open(&ns, &chat, &open).await.map_err(live_error)?;
    Ok(Json(json!({
        "chat": chat,
        "live": true,
        "expires": session.expires(),
        "session": session,
    }))
    .into_response())
}

/// `DELETE .../live`.
pub async fn delete(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::live("delete", &ns, &chat))
        .await?;
    let live = live(&s)?;
    live.close(&ns, &chat).await.map_err(live_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    response: Value,
}

/// `POST .../live/requests/{id}`.
pub async fn answer(
    State(s): State<HostState>,
    Path((ns, chat, id)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::live("create", &ns, &chat))
        .await?;
    let live = live(&s)?;
    let answer: Answer = json_body(&body)?;
    live.answer(&ns, &chat, &id, &answer.response)
        .await
        .map_err(live_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET .../live/requests`: the requests waiting, then each new one.
pub async fn requests(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::live("watch", &ns, &chat))
        .await?;
    let live = live(&s)?;
    let pending = {
        let live = live.clone();
        Arc::new(move |ns: &str, chat: &str| live.pending(ns, chat, jiff::Timestamp::now()))
    };
    Ok(ask_stream::response(
        live.hub(),
        pending,
        ns,
        chat,
        "control",
    ))
}

//! The app's side of UI commands (`crate::ui_commands` keeps them in the cluster):
//!
//! | method | route (under `.../namespaces/{ns}/channels/{channel}`) | RBAC on `channels/uicommands` | answer |
//! |---|---|---|---|
//! | GET | `/ui/commands` | watch | a stream (`text/event-stream`, events named `command`) of the plugins' UI commands to the chat: those waiting, then each new one, once |
//! | POST | `/ui/commands/{id}` `{steps: [{status, error?}]}` | create | answers a command, a result per step: the plugin's `POST /ui/commands` gets them |
//!
//! What each step is and which statuses an answer may give: `sdk::api::ui_command`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::ask_stream;
use super::auth::Permission;
use super::error::{Code, HostError, HostResult};
use super::state::{HostState, json_body};
use crate::ui_commands::{AnswerError, UiCommands};
use sdk::api::ui_command::AppAnswer;

fn commands(s: &HostState) -> HostResult<Arc<UiCommands>> {
    s.ui_commands.clone().ok_or_else(|| {
        HostError::new(
            Code::Unavailable,
            "this server carries no UI commands (it runs without a cluster)",
        )
    })
}

/// `GET .../ui/commands`: the commands waiting, then each new one.
pub async fn stream(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::ui_commands("watch", &ns, &chat))
        .await?;
    let commands = commands(&s)?;
    let pending = {
        let commands = commands.clone();
        Arc::new(move |ns: &str, chat: &str| commands.pending(ns, chat, jiff::Timestamp::now()))
    };
    Ok(ask_stream::response(
        commands.hub(),
        pending,
        ns,
        chat,
        "command",
    ))
}

/// `POST .../ui/commands/{id}`.
pub async fn answer(
    State(s): State<HostState>,
    Path((ns, chat, id)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::ui_commands("create", &ns, &chat))
        .await?;
    let commands = commands(&s)?;
    let answer: AppAnswer = json_body(&body)?;
    commands
        .answer(&ns, &chat, &id, &answer)
        .await
        .map_err(|e| {
            let code = match &e {
                AnswerError::Invalid(_) => Code::InvalidBody,
                AnswerError::NoCommand { .. } => Code::RequestNotFound,
                AnswerError::Store { .. } => Code::Unavailable,
            };
            HostError::new(code, e.to_string())
        })?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

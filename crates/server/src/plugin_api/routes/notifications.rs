//! `POST /notifications`: a notification in the chat's drawer, beside the plugin's cards.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;

use super::cards::{created, post};
use super::{check_length, json_body};
use crate::cards::inbox::{Entry, Kind, Level, MAX_BODY, MAX_TITLE};
use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::ApiResult;
use crate::plugin_api::state::PluginApiState;
use model::manifest::Capability;

#[derive(Deserialize)]
struct NotificationRequest {
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    level: Level,
}

pub async fn create(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require(Capability::NotificationsSend)?;
    let req: NotificationRequest = json_body(&body)?;
    check_length("title", &req.title, MAX_TITLE, true)?;
    if let Some(text) = &req.body {
        check_length("body", text, MAX_BODY, false)?;
    }
    let entry = Entry {
        id: String::new(),
        kind: Kind::Notification,
        card: None,
        title: req.title,
        data: None,
        body: req.body,
        level: Some(req.level),
        created: String::new(),
    };
    let entry = post(&state, &caller, entry).await?;
    Ok(created(entry, "notifications"))
}

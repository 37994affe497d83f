//! `POST /events`: takes the events the manifest subscribes to (the journal has them) and
//! acts on `settings.changed`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{ApiError, parse_json};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub thread_id: Option<String>,
    #[serde(default)]
    pub data: Value,
}

pub async fn take(State(state): State<AppState>, body: Bytes) -> Result<StatusCode, ApiError> {
    let event: Event = parse_json(&body)?;
    if !state.manifest.subscribes(&event.kind) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("type: not subscribed to {:?}", event.kind),
        ));
    }
    if event.kind == "settings.changed" {
        state.settings.update(&event.data["settings"]);
    }
    tracing::debug!(event = event.kind, thread_id = ?event.thread_id, "event taken");
    Ok(StatusCode::NO_CONTENT)
}

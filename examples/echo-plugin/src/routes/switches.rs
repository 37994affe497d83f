//! `POST /switches/{switch}`: a composer switch was clicked; the answer is its new state.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde::Deserialize;

use crate::error::{ApiError, parse_json};
use crate::state::AppState;
use crate::switches::SwitchState;

#[derive(Debug, Deserialize)]
pub struct SwitchRequest {
    pub on: bool,
    #[serde(default)]
    pub thread_id: Option<String>,
}

pub async fn set(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<SwitchState>, ApiError> {
    let Some(switch) = state.manifest.switch(&id) else {
        return Err(ApiError::not_found(format!("no such switch: {id}")));
    };
    let req: SwitchRequest = parse_json(&body)?;
    let thread = req.thread_id.as_deref().unwrap_or("");
    let answer = state
        .switches
        .set(switch, thread, req.on)
        .map_err(ApiError::internal)?;
    tracing::info!(switch = id, thread, on = req.on, "switch set");
    Ok(Json(answer))
}
